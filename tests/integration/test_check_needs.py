"""A check's `needs` (devices, paths, commands, toolchains): on a host that lacks one the check is reported
`skip` with what is absent, and never runs; validation still passes. On a host that has them it runs and is
judged as usual. A `needs.toolchains` name the recipe does not declare is a recipe error (with a did-you-mean).

Each check here writes a marker file when it runs, so "skipped" is seen to mean "not run"."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import error_of, result_of

HOST = platform.machine()
ABSENT_DEVICE = "/dev/flagtree-cpu-test-no-such-device"


class World:
    """A workspace, a recipe of the given checks, and a folder each check marks when it runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ws = root / "ws"
        self.ran = root / "ran"
        self.ws.mkdir(parents=True)
        self.ran.mkdir()

    def check(self, name: str, needs: dict[str, Any], **extra: Any) -> dict[str, Any]:
        marker = self.ran / name
        return {"name": name, "argv": ["{python}", "-c", f"open({str(marker)!r}, 'w').close()"], "needs": needs,
                **extra}

    def recipe(self, checks: list[dict[str, Any]], **extra: Any) -> Path:
        data = {"schema_version": 2, "name": "needs-fixture", "platform": {"host": {"arch": [HOST]}},
                "sources": {}, "checks": checks, **extra}
        path = self.root / "needs-fixture.yaml"
        path.write_text(json.dumps(data, indent=1))  # JSON is YAML
        return path

    def validate(self, checks: list[dict[str, Any]], *, env: dict[str, str] | None = None, **extra: Any) -> Result:
        recipe = self.recipe(checks, **extra)
        return CliRunner().invoke(app, ["-w", str(self.ws), "--recipe", str(recipe), "validate", "--json",
                                        "--python", sys.executable], env=env)

    def ran_checks(self) -> set[str]:
        return {p.name for p in self.ran.iterdir()}


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def rows(result: Result) -> dict[str, dict[str, Any]]:
    return {r["kernel"]: r for r in result_of(result.stdout)["results"]}


def test_a_check_whose_device_path_or_command_is_absent_is_skipped_not_run_and_validation_passes(
        world: World) -> None:
    present = world.root / "present.txt"
    present.write_text("here\n")
    (world.ws / "inside.txt").write_text("a relative path is in the workdir, where the check runs\n")
    result = world.validate([
        world.check("npu-device", {"devices": [ABSENT_DEVICE]}),
        world.check("npu-command", {"commands": ["flagtree-cpu-test-no-such-smi"]}),
        world.check("model-file", {"paths": ["{workdir}/models/absent.bin"]}),
        world.check("all-three", {"devices": [ABSENT_DEVICE, "/dev/null"],
                                  "commands": ["sh", "flagtree-cpu-test-no-such-smi"], "paths": [str(present)]}),
        world.check("has-everything", {"devices": ["/dev/null"], "commands": ["sh"],
                                       "paths": [str(present), "inside.txt"]}),
    ])
    assert result.exit_code == 0, result.stdout
    found = rows(result)
    assert {n: r["status"] for n, r in found.items()} == {
        "npu-device": "skip", "npu-command": "skip", "model-file": "skip", "all-three": "skip",
        "has-everything": "pass"}
    assert found["npu-device"]["message"] == f"needs {ABSENT_DEVICE} (absent on this host)"
    assert found["npu-command"]["message"] == "needs command flagtree-cpu-test-no-such-smi (absent on this host)"
    # placeholders are filled in before the path is looked for
    assert found["model-file"]["message"] == f"needs path {world.ws}/models/absent.bin (absent on this host)"
    # only what is absent is named, all of it
    assert found["all-three"]["message"] == (f"needs {ABSENT_DEVICE}, command flagtree-cpu-test-no-such-smi "
                                             "(absent on this host)")
    assert found["npu-device"]["required"] is True  # a required check, skipped: still no failure
    assert result_of(result.stdout)["summary"] == {"pass": 1, "fail": 0, "skip": 4}
    assert world.ran_checks() == {"has-everything"}


def test_commands_are_looked_for_on_the_run_time_path(world: World) -> None:
    tools = world.root / "vendor-bin"
    tools.mkdir()
    smi = tools / "fixture-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    checks = [world.check("smi", {"commands": ["fixture-smi"]})]
    without = world.validate(checks)
    assert rows(without)["smi"]["status"] == "skip" and world.ran_checks() == set()
    with_path = world.validate(checks, runtime={"env": {"prepend": {"PATH": [str(tools)]}}})
    assert with_path.exit_code == 0, with_path.stdout
    assert rows(with_path)["smi"]["status"] == "pass" and world.ran_checks() == {"smi"}


def test_a_toolchain_is_needed_as_build_judges_it_folder_then_expected_files(world: World) -> None:
    cann = world.root / "Ascend" / "cann"
    toolchains = {"cann": {"path": str(cann), "expect": ["bin/atc", "set_env.sh"], "why": "the NPU kernels"}}
    checks = [world.check("npu-kernels", {"toolchains": ["cann"]}, required=True)]

    no_folder = world.validate(checks, toolchains=toolchains)
    assert no_folder.exit_code == 0, no_folder.stdout
    assert rows(no_folder)["npu-kernels"]["message"] == f"needs toolchain cann ({cann} missing) (absent on this host)"

    (cann / "bin").mkdir(parents=True)
    (cann / "bin" / "atc").write_text("")
    one_file_short = world.validate(checks, toolchains=toolchains)
    assert rows(one_file_short)["npu-kernels"]["message"] == (f"needs toolchain cann ({cann}/set_env.sh missing) "
                                                              "(absent on this host)")
    assert world.ran_checks() == set()

    (cann / "set_env.sh").write_text("")
    complete = world.validate(checks, toolchains=toolchains)
    assert rows(complete)["npu-kernels"]["status"] == "pass" and world.ran_checks() == {"npu-kernels"}


def test_a_toolchain_moved_on_this_host_is_found_through_its_override(world: World) -> None:
    elsewhere = world.root / "opt" / "cann-8"
    (elsewhere / "bin").mkdir(parents=True)
    (elsewhere / "bin" / "atc").write_text("")
    toolchains = {"cann": {"path": str(world.root / "not-here"), "expect": ["bin/atc"]}}
    checks = [world.check("npu-kernels", {"toolchains": ["cann"]})]
    result = world.validate(checks, toolchains=toolchains, env={"FLAGTREE_CPU_TOOLCHAIN_CANN": str(elsewhere)})
    assert rows(result)["npu-kernels"]["status"] == "pass", rows(result)["npu-kernels"]


def test_a_skipped_check_does_not_hide_a_failing_one(world: World) -> None:
    result = world.validate([
        world.check("npu-device", {"devices": [ABSENT_DEVICE]}),
        {"name": "cpu-fails", "argv": ["{python}", "-c", "raise SystemExit(1)"], "needs": {"devices": ["/dev/null"]}},
    ])
    assert result.exit_code == 6
    found = rows(result)
    assert (found["npu-device"]["status"], found["cpu-fails"]["status"]) == ("skip", "fail")
    assert error_of(result.stdout)["message"] == "1 required validation check failed"


def test_needs_that_name_no_toolchain_of_the_recipe_are_recipe_errors(world: World) -> None:
    recipe = world.recipe([
        world.check("typo", {"toolchains": ["can"]}),
        world.check("undeclared", {"toolchains": ["cuda"]}),
        world.check("not-a-device", {"devices": ["davinci0"]}),
    ], toolchains={"cann": {"path": str(world.root / "cann")}})
    # a real process: the exit status and the message as a user sees them
    done = subprocess.run([sys.executable, "-m", "flagtree_cpu_build", "-w", str(world.ws), "recipe", "validate",
                           str(recipe)], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
                          timeout=60)
    assert done.returncode == 2, done.stderr
    text = " ".join((done.stdout + done.stderr).split())
    assert "checks[0].needs.toolchains[0]: there is no toolchain named 'can' (did you mean 'cann'?)" in text
    assert "checks[1].needs.toolchains[0]: there is no toolchain named 'cuda'" in text
    assert "use one of the recipe's toolchains: cann" in text
    assert "checks[2].needs.devices[0]: 'davinci0' is not a device node path" in text
    assert world.ran_checks() == set()


def test_a_recipe_without_toolchains_says_to_declare_one(world: World) -> None:
    recipe = world.recipe([world.check("npu", {"toolchains": ["cann"]})])
    result = CliRunner().invoke(app, ["-w", str(world.ws), "--json", "recipe", "validate", str(recipe)])
    assert result.exit_code == 2
    [problem] = error_of(result.stdout)["problems"]
    assert problem["key"] == "checks[0].needs.toolchains[0]"
    assert problem["message"] == "there is no toolchain named 'cann'"
    assert problem["fix"].startswith("declare it under `toolchains:`")
