"""The bundled `flaggems-arm` recipe, stacked on `flagtree-cpu-arm64` in one workspace and one interpreter,
against the loopback FlagGems world (tests/support/worlds/flaggems.py).

One module-scoped stack is built once: FlagTree's fixture through the base recipe (sync, link, fetch, build),
then FlagGems on top (`--recipe flaggems-arm build`). Tests read it; the test that makes FlagGems' build replace
triton runs last and puts the base back the way its fix says.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import TOOLS, build_venv, target_version, tiny_wheel
from tests.support.worlds.flaggems import (
    ARM_BACKEND,
    BRANCH,
    QUICK_TESTS,
    build_flaggems_world,
    stack_overrides,
    write_base_recipe,
)

BASE = "flagtree-cpu-arm64"
STACK = "flaggems-arm"
VENV_PACKAGES = [*TOOLS, "torch", "numpy", "pytest"]
BUILD_COMMANDS = {"editable_wheel", "bdist_wheel", "develop", "build_ext"}


@dataclass
class Stack:
    """A workspace holding FlagTree (base) and FlagGems (stacked), and the venv both are installed in."""

    world: GitWorld
    root: Path
    home: Path
    recipes: Path  # the fixture's flagtree-cpu-arm64.yaml (hides the bundled one)
    python: Path
    record: Path
    ws: Path
    sets: tuple[str, ...]
    first_build: Result | None = None
    base_before: dict[str, bytes] = field(default_factory=dict)  # the base's state files before FlagGems
    base_status_before: list[tuple[str, ...]] = field(default_factory=list)

    def run(self, *args: str, recipe: str = STACK, ws: Path | None = None, sets: tuple[str, ...] = ()) -> Result:
        argv = ["-w", str(ws or self.ws), "--recipes-dir", str(self.recipes), "--recipe", recipe]
        for assignment in (*(self.sets if recipe == STACK else ()), *sets):
            argv += ["--set", assignment]
        return CliRunner().invoke(app, [*argv, *args])

    def build(self, *args: str, recipe: str = STACK, ws: Path | None = None, sets: tuple[str, ...] = ()) -> Result:
        return self.run("build", "--ignore-host", "--python", str(self.python), *args, recipe=recipe, ws=ws,
                        sets=sets)

    def builds(self, project: str) -> list[dict]:
        """The setup.py runs that built ``project`` (triton: the base; flag_gems: FlagGems)."""
        if not self.record.exists():
            return []
        runs = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [r for r in runs if r.get("project", "triton") == project and BUILD_COMMANDS & set(r["argv"][1:])]

    def base_status(self) -> list[tuple[str, ...]]:
        status = result_of(self.run("--json", "status", "--python", str(self.python), recipe=BASE).stdout)
        return [(i["area"], i["subject"], i["state"], i["detail"]) for i in status["items"]]

    def state(self, ws: Path | None = None) -> Path:
        return (ws or self.ws) / ".flagtree-cpu"

    def py(self, code: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, cwd=self.root,
                              env={**os.environ, **env})


BASE_STATE = ("build-editable.json", "lock.yaml")


def behind(status: dict | list) -> list[tuple[str, ...]]:
    """What a status report says is not current, besides the validation (these tests never validate the
    base: its kernels are test_validate's)."""
    items = status if isinstance(status, list) else [(i["area"], i["subject"], i["state"], i["detail"])
                                                      for i in status["items"]]
    return [i for i in items if i[2] != "ok" and i[0] != "validation"]


@pytest.fixture(scope="module")
def stack(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("flaggems")
    world = build_flaggems_world(root / "world", git_world)
    home = root / "home"
    home.mkdir()
    server = LoopbackHTTPServer()
    with pytest.MonkeyPatch.context() as mp:
        make_hermetic(mp, home)
        mp.setenv("GIT_CONFIG_GLOBAL", str(world.gitconfig))
        mp.setenv("FIXTURE_BUILD_RECORD", str(root / "build-record.jsonl"))
        try:
            url = server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
            recipes = root / "recipes"
            write_base_recipe(recipes, world, url)
            s = Stack(world, root, home, recipes, build_venv(root / "venv", VENV_PACKAGES),
                      root / "build-record.jsonl", root / "ws", stack_overrides(world))
            for step in (["sync"], ["link"], ["fetch"]):
                result = s.run(*step, recipe=BASE)
                assert result.exit_code == 0, (step, result.stderr)
            result = s.build(recipe=BASE)
            assert result.exit_code == 0, result.stderr
            s.base_before = {name: (s.state() / name).read_bytes() for name in BASE_STATE}
            s.base_status_before = s.base_status()
            # what a shell prepared for another scikit-build-core project may carry
            mp.setenv("SKBUILD_BUILD_DIR", str(root / "elsewhere"))
            s.first_build = s.run("sync")
            assert s.first_build.exit_code == 0, s.first_build.stderr
            s.first_build = s.build()
        finally:
            server.close()
    yield s


@pytest.fixture
def at(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The stack, in the environment it was built in (the same HOME: the base's stamp records paths under it)."""
    make_hermetic(monkeypatch, stack.home)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(stack.world.gitconfig))
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(stack.record))
    return stack


def test_flaggems_builds_on_top_and_the_base_stays_as_it_was(at: Stack) -> None:
    result = at.first_build
    assert result is not None and result.exit_code == 0, result.stderr
    [entry] = at.builds("flag_gems")
    assert entry["cwd"] == str(at.ws / "FlagGems") and entry["executable"] == str(at.python)
    env = entry["env"]
    assert env["CMAKE_ARGS"] == "-DFLAGGEMS_BUILD_C_EXTENSIONS=OFF"
    assert "SKBUILD_BUILD_DIR" not in env  # SKBUILD_* unset
    assert "LLVM_SYSPATH" not in env and "TRITON_APPEND_CMAKE_ARGS" not in env  # the base's build env stays its own
    # every pip run of the stack keeps to the constraints, kept in FlagGems' own state folder
    own = at.state() / "recipes" / STACK
    assert env["PIP_CONSTRAINT"] == str(own / "constraints.txt")
    constraints = (own / "constraints.txt").read_text()
    assert "numpy==" in constraints and "pybind11==" in constraints
    # FlagGems' lock and stamp are its own; the base's lock and stamp are byte for byte what they were
    assert (own / "lock.yaml").is_file() and (own / "build-editable.json").is_file()
    lock = (own / "lock.yaml").read_text()
    assert at.world["flaggems"].commits["rc2"] in lock and f"ref: {BRANCH}" in lock
    for name, before in at.base_before.items():
        assert (at.state() / name).read_bytes() == before, name
    assert "flaggems" not in (at.state() / "lock.yaml").read_text()
    # the workspace now holds the stack: its record names the top, so a bare command on it means FlagGems
    assert json.loads((at.state() / "workspace.json").read_text())["recipe"]["name"] == STACK
    assert len(at.builds("triton")) == 1  # FlagTree was built once, before FlagGems
    # the base's status: still all current
    assert at.base_status() == at.base_status_before
    assert behind(at.base_status()) == []
    # flag_gems is installed next to FlagTree's triton, which is still the editable build of FlagTree
    shown = at.py("import flag_gems, triton; print(flag_gems.vendor_name, triton.__version__, triton.__file__)",
                  FLAGGEMS_VENDOR="arm")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split()[:2] == ["arm", "3.3.0"] and str(at.ws / "FlagTree") in shown.stdout


def test_the_runtime_env_is_the_base_s_plus_flaggems_vendor(at: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    # FlagGems reads PPU_SDK (thead) and GEMS_VENDOR before FLAGGEMS_VENDOR: left in the shell, they would win
    monkeypatch.setenv("GEMS_VENDOR", "nvidia")
    monkeypatch.setenv("PPU_SDK", "/opt/ppu")
    env = result_of(at.run("--json", "env").stdout)
    assert env["set"]["FLAGTREE_BACKEND"] == "cpu"  # the base's, merged in by the stack
    assert env["set"]["FLAGGEMS_VENDOR"] == "arm"
    assert {"GEMS_VENDOR", "PPU_SDK"} <= set(env.get("unset", []))
    text = at.run("env").stdout
    assert "export FLAGTREE_BACKEND=cpu" in text and "export FLAGGEMS_VENDOR=arm" in text
    assert "unset GEMS_VENDOR" in text


def test_an_unchanged_stack_is_up_to_date(at: Stack) -> None:
    result = at.build()
    assert result.exit_code == 0, result.stderr
    assert "up to date" in result.stderr
    assert len(at.builds("flag_gems")) == 1
    assert behind(result_of(at.run("--json", "status", "--python", str(at.python)).stdout)) == []


def test_checks_pass_with_vendor_arm_even_when_the_shell_says_otherwise(at: Stack,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # both would win over FLAGGEMS_VENDOR in FlagGems' device_finder: the run-time env unsets them
    monkeypatch.setenv("GEMS_VENDOR", "nvidia")
    monkeypatch.setenv("PPU_SDK", "/opt/ppu")
    result = at.run("--json", "validate", "--python", str(at.python), "--check", "import-flag-gems",
                    "--check", "operator-lt")
    assert result.exit_code == 0, result.stderr
    report = result_of(result.stdout)
    by_name = {r["kernel"]: r for r in report["results"]}
    assert by_name["import-flag-gems"]["status"] == "pass"
    assert by_name["operator-lt"]["status"] == "pass"
    assert f"{QUICK_TESTS} passed" in json.dumps(by_name["operator-lt"])


def test_the_operator_check_fails_on_a_wrong_result(at: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_FLAGGEMS_MODE", "wrong-lt")  # lt is wrong for bfloat16
    result = at.run("--json", "validate", "--python", str(at.python), "--check", "operator-lt")
    assert result.exit_code != 0
    text = json.dumps(result_of(result.stdout) if result.stdout.strip() else {}) + result.stderr
    assert "2 failed" in text and "4 passed" in text


def test_the_import_check_fails_for_another_vendor(at: Stack) -> None:
    result = at.run("--json", "validate", "--python", str(at.python), "--check", "import-flag-gems",
                    sets=("runtime.env.set.FLAGGEMS_VENDOR=nvidia",))
    assert result.exit_code != 0
    text = result.stdout + result.stderr
    assert "The nvidia device is not supported currently" in text


def test_flaggems_own_pins_against_the_base_as_built_are_refused_naming_both(at: Stack) -> None:
    """The recipe as shipped (pybind11==3.0.3, setuptools<80 ...) on a base built with this machine's newer
    versions: installing FlagGems' pins would make FlagTree's build stale, so nothing is installed."""
    record_before = len(at.builds("flag_gems"))
    pip_logs = sorted((at.ws / "logs").glob("prerequisites-*.log"))
    result = at.run("--json", "build", "--ignore-host", "--python", str(at.python), "--force",
                    sets=("python.build=['setuptools>=64.0,<80.0', scikit-build-core==0.12.2, pybind11==3.0.3]",
                          "python.constraints=[]"))
    assert result.exit_code in (2, 5), result.stderr
    message = json.dumps(error_of(result.stdout))
    assert "pybind11==3.0.3" in message and f"pybind11=={target_version('pybind11')}" in message
    assert sorted((at.ws / "logs").glob("prerequisites-*.log")) == pip_logs  # refused before pip ran
    assert len(at.builds("flag_gems")) == record_before


def test_offline_on_a_fresh_stack_lists_what_is_missing(at: Stack, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    result = at.build("--offline", ws=fresh, sets=("python.build=[scikit-build-core==0.12.2]",))
    assert result.exit_code == 5, result.stderr
    assert "inputs of an offline build are missing; nothing was run" in result.stderr
    assert "source flaggems: not checked out" in result.stderr
    assert "scikit-build-core==0.12.2: missing" in result.stderr
    assert BASE in result.stderr and "not built in this workspace" in result.stderr
    assert not (fresh / "FlagGems").exists()


def test_a_commit_without_the_arm_backend_is_stopped_by_the_probe(at: Stack, tmp_path: Path) -> None:
    old = at.world["flaggems"].commits["pre-arm"]  # main, before the Arm vendor backend
    result = at.run("sync", ws=tmp_path / "old", sets=(f"sources.flaggems.commit={old}",))
    assert result.exit_code != 0
    assert ARM_BACKEND in result.stderr and "no Arm vendor backend" in result.stderr


def test_setup_on_a_fresh_workspace_sets_the_base_up_first(at: Stack, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    python = build_venv(tmp_path / "venv", VENV_PACKAGES)
    fresh = tmp_path / "fresh"
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    result = at.run("setup", "--ignore-host", "--skip-validate", "--python", str(python), ws=fresh)
    assert result.exit_code == 0, result.stderr
    runs = [json.loads(line) for line in record.read_text().splitlines()]
    built = [r.get("project", "triton") for r in runs if BUILD_COMMANDS & set(r["argv"][1:])]
    assert built == ["triton", "flag_gems"]  # FlagTree first, then FlagGems on it
    assert (fresh / ".flagtree-cpu" / "build-editable.json").is_file()
    assert (fresh / ".flagtree-cpu" / "recipes" / STACK / "build-editable.json").is_file()
    assert behind(result_of(at.run("--json", "status", "--python", str(python), recipe=BASE, ws=fresh).stdout)) == []


HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


@pytest.mark.parametrize(("board", "arch", "features"), [("graviton4-neoverse-v2", "ok", "ok"),
                                                        ("rpi5-cortex-a76", "ok", "fail"),
                                                        ("x86_64-debian", "fail", "fail")])
def test_doctor_on_a_board_applies_the_base_s_platform(board: str, arch: str, features: str, tmp_path: Path) -> None:
    """No platform of its own: FlagGems builds and runs where FlagTree's cpu triton does (aarch64, Armv9)."""
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--recipe", STACK, "--json", "doctor", "--offline",
                                      "--sysroot", str(HOSTS / board), "--check", "host.arch", "--check",
                                      "cpu.features"])
    found = {f["id"]: f for f in result_of(result.stdout)["checks"]}
    assert (found["host.arch"]["status"], found["cpu.features"]["status"]) == (arch, features)
    if features == "fail":
        assert "sve2" in json.dumps(found["cpu.features"])


def test_doctor_warns_about_a_shell_set_up_for_flaggems_c_extensions(at: Stack,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def build_env() -> dict:
        result = at.run("--json", "doctor", "--offline", "--python", str(at.python), "--check", "workspace.build-env")
        [finding] = result_of(result.stdout)["checks"]
        return finding

    assert "CMAKE_ARGS" not in json.dumps(build_env())
    monkeypatch.setenv("CMAKE_ARGS", "-DFLAGGEMS_BUILD_C_EXTENSIONS=ON -DFLAGGEMS_BACKEND=CUDA")  # a GPU build's
    finding = build_env()
    assert finding["status"] == "warn" and "CMAKE_ARGS" in json.dumps(finding)


def test_a_build_that_replaces_triton_is_stopped_with_the_fix(at: Stack, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Last: FlagGems' build pulls another triton in; the tool says so and how to put FlagTree's back, and
    that fix works."""
    wheelhouse = tiny_wheel(tmp_path, "triton", "3.6.0").parent
    monkeypatch.setenv("FIXTURE_REPLACE_TRITON", "triton==3.6.0")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    stamp = at.state() / "recipes" / STACK / "build-editable.json"
    stamp_before = stamp.read_bytes()
    result = at.run("--json", "build", "--ignore-host", "--python", str(at.python), "--force")
    assert result.exit_code == 5, result.stderr
    error = error_of(result.stdout)
    message = json.dumps(error)
    assert "replaced triton" in message and "3.3.0" in message and "3.6.0" in message
    assert f"--recipe {BASE} build --force" in error["fix"]
    assert stamp.read_bytes() == stamp_before  # a refused build is not taken for a good one
    # the import check sees the replacement too: FlagGems would now run on another triton
    check = at.run("--json", "validate", "--python", str(at.python), "--check", "import-flag-gems")
    assert check.exit_code != 0

    # the fix: FlagTree's build put back; the base is current again
    monkeypatch.delenv("FIXTURE_REPLACE_TRITON")
    again = at.build("--force", recipe=BASE)
    assert again.exit_code == 0, again.stderr
    shown = at.py("import triton; print(triton.__version__)")
    assert shown.stdout.strip() == "3.3.0", shown.stderr
    assert at.base_status() == at.base_status_before
    assert behind(at.base_status()) == []
