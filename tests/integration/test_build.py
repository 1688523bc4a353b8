"""`flagtree-cpu build` and `env` on the fixture FlagTree, whose setup.py records what it received."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import Result

from tests.support.cli import Workspace, new_workspace, ready_to_build
from tests.support.envelope import result_of
from tests.support.fixes import without_context
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv, make_venv, tiny_wheel

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden-v1"
JOB_VARIABLES = ("MAX_JOBS", "TRITON_PARALLEL_LINK_JOBS")  # the machine's, not the recipe's doing
PIP_OWN = ("PIP_BUILD_TRACKER", "_PYPROJECT_HOOKS_BUILD_BACKEND")  # what pip adds for setup.py
RUN_MARK = "FLAGTREE_CPU_RUN"  # every command the tool starts carries it (proc; reaper stops them by it)
NVIDIA = ("TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_CUDACRT_PATH",
          "TRITON_CUDART_PATH", "TRITON_CUPTI_INCLUDE_PATH", "TRITON_CUPTI_LIB_PATH")


@dataclass
class BuildWorkspace:
    ws: Workspace
    python: Path
    record: Path

    def build(self, *args: str, sets: tuple[str, ...] = ()) -> Result:
        return self.ws.run("build", "--ignore-host", "--python", str(self.python), *args, sets=sets)

    def records(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def build_records(self) -> list[dict]:
        """The setup.py runs that built (pip also runs it for metadata)."""
        commands = {"editable_wheel", "bdist_wheel", "develop", "build_ext", "build"}
        return [r for r in self.records() if commands & set(r["argv"][1:])]


@pytest.fixture
def bws(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer,
        monkeypatch: pytest.MonkeyPatch) -> BuildWorkspace:
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    ws = ready_to_build(world, tmp_path / "ws", url)
    record = tmp_path / "build-record.jsonl"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    return BuildWorkspace(ws, build_venv(tmp_path / "venv", TOOLS), record)


def test_build_runs_setup_py_with_the_exact_environment(bws: BuildWorkspace, tmp_path: Path) -> None:
    result = bws.build()
    assert result.exit_code == 0, result.stderr
    [entry] = [r for r in bws.build_records() if "editable_wheel" in r["argv"]]
    env = entry["env"]
    home = os.environ["HOME"]
    empty = bws.ws.root / ".flagtree-cpu" / "empty"
    assert entry["cwd"] == str(bws.ws.flagtree / "python")
    assert env["FLAGTREE_BACKEND"] == "cpu" and env["TRITON_BUILD_PROTON"] == "OFF"
    assert env["LLVM_SYSPATH"] == f"{home}/.triton/llvm/{TOP}"
    assert env["TRITON_APPEND_CMAKE_ARGS"] == f"-DCMAKE_INSTALL_PREFIX={home}/.flagtree_install"
    assert {env[name] for name in NVIDIA} == {str(empty)} and empty.is_dir() and not list(empty.iterdir())
    assert int(env["MAX_JOBS"]) >= 1 and int(env["TRITON_PARALLEL_LINK_JOBS"]) >= 1
    assert "TRITON_OFFLINE_BUILD" not in env and "PIP_NO_INDEX" not in env
    assert env["PATH"].split(os.pathsep)[0] == str(bws.python.parent)
    assert entry["executable"] == str(bws.python)
    logs = list((bws.ws.root / "logs").glob("build-*.log"))
    assert len(logs) == 1
    log = logs[0].read_text()
    assert log.startswith(f"+ {bws.python} -m pip install -e python/ --no-build-isolation -v\n")
    assert "# exit status 0" in log
    # the fixture triton is now installed (editable) in the target interpreter
    installed = sys.modules["subprocess"].run([str(bws.python), "-c", "import triton; print(triton.__version__)"],
                                              capture_output=True, text=True, cwd=tmp_path)
    assert installed.stdout.strip() == "3.3.0"
    # setup.py made link 12 absolute (as FlagTree's does): still accepted after the build
    assert os.path.isabs(os.readlink(bws.ws.flagtree / "python/triton/language/extra/cpu"))


def _normalized(text: str, bws: BuildWorkspace, tmp_path: Path) -> str:
    """Paths as tests/fixtures/golden-v1 writes them."""
    for old, new in ((str(bws.python), "<python>"), (str(bws.ws.root), "<workdir>"), (str(tmp_path), "<tmp>"),
                     (os.environ["HOME"], "<home>")):
        text = text.replace(old, new)
    return text


def _header(log: str) -> list[str]:
    """The log's own lines (the command, cwd, what the environment changed, the exit), without the
    time they were written, the job counts and ccache (the machine's doing)."""
    kept = []
    for line in log.splitlines():
        if not line.startswith(("+ ", "# ")) or line.startswith("# started:"):
            continue
        if line.startswith(tuple(f"# {name}=" for name in (*JOB_VARIABLES, "TRITON_BUILD_WITH_CCACHE"))):
            continue
        kept.append(re.sub(r"^# exit status (\d+) after [0-9.]+ s$", r"# exit status \1 after <s> s", line))
    return kept


def test_the_build_gets_what_the_v1_engine_gave(bws: BuildWorkspace, tmp_path: Path) -> None:
    """The v2 recipe through the v2 engine: the command, folder and environment setup.py received, the
    log header and the stamp's components are those the v1 engine gave the v1 recipe."""
    result = bws.build()
    assert result.exit_code == 0, result.stderr
    [entry] = [r for r in bws.build_records() if "editable_wheel" in r["argv"]]
    env = {name: value for name, value in entry["env"].items()
           if os.environ.get(name) != value and name not in (*PIP_OWN, RUN_MARK)}
    env["PATH"] = env["PATH"].split(os.pathsep)[0]
    env.update({name: "<n>" for name in JOB_VARIABLES if name in env})
    env.pop("TRITON_BUILD_WITH_CCACHE", None)  # the recipe's if_command sets it only where ccache is installed
    got = json.loads(_normalized(json.dumps({"cwd": entry["cwd"], "env": env, "executable": entry["executable"]}),
                                 bws, tmp_path))
    assert got == json.loads((GOLDEN / "build-record.json").read_text())

    [log] = (bws.ws.root / "logs").glob("build-*.log")
    expected = _header((GOLDEN / "build-log-header.txt").read_text())
    # what moved since v1 (tests/support/v1_moves.py): the install prefix is build.cmake.define, whose arguments
    # are applied after every env operation, so its line comes after the recipe's other variables, same value
    moved = next(line for line in expected if line.startswith("# TRITON_APPEND_CMAKE_ARGS="))
    expected.remove(moved)
    expected.insert(next(i for i, line in enumerate(expected) if line.startswith("# PATH starts with")), moved)
    assert _header(_normalized(log.read_text(), bws, tmp_path)) == expected

    golden_stamp = json.loads((GOLDEN / "build-stamp-keys.json").read_text())
    components = json.loads((bws.ws.root / ".flagtree-cpu" / "build-editable.json").read_text())["components"]
    assert set(golden_stamp["keys"]) <= set(components)  # v2 may add keys (steps, variant), none go
    command = json.loads(_normalized(json.dumps(components["command"]), bws, tmp_path))
    assert command == golden_stamp["command"]
    assert sorted(components["env"]) == golden_stamp["env"]


def test_an_unchanged_rebuild_is_skipped(bws: BuildWorkspace) -> None:  # how fast: bench_build
    assert bws.build().exit_code == 0
    runs = len(bws.records())
    again = bws.build()
    assert again.exit_code == 0, again.stderr
    assert "up to date" in again.stderr
    assert len(bws.records()) == runs  # pip and setup.py did not run at all
    assert bws.build("--jobs", "1").exit_code == 0 and len(bws.records()) == runs  # jobs do not change the result


def test_what_changed_is_said_and_rebuilt(bws: BuildWorkspace) -> None:
    assert bws.build().exit_code == 0
    tip = bws.ws.world["flagtree"].commits["tip"]
    assert bws.ws.run("sync", sets=(f"sources.flagtree.commit={tip}",)).exit_code == 0
    result = bws.build(sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 0, result.stderr
    old = bws.ws.world["flagtree"].commits["cpu-backend"]
    assert f"sources.flagtree.commit changed: {old[:12]} -> {tip[:12]}" in result.stderr
    assert len(bws.build_records()) == 2


def test_a_local_edit_and_an_env_change_trigger_a_rebuild(bws: BuildWorkspace) -> None:
    assert bws.build().exit_code == 0
    readme = bws.ws.flagtree / "README.md"
    readme.write_text(readme.read_text() + "my edit\n")
    edited = bws.build()
    assert "sources.flagtree.local_changes changed" in edited.stderr
    changed_env = bws.build(sets=("build.env.set.TRITON_BUILD_PROTON=ON",))
    assert "env.TRITON_BUILD_PROTON changed: OFF -> ON" in changed_env.stderr
    assert len(bws.build_records()) == 3


def test_force_rebuilds(bws: BuildWorkspace) -> None:
    assert bws.build().exit_code == 0
    forced = bws.build("--force")
    assert forced.exit_code == 0 and "building because --force" in forced.stderr
    assert len(bws.build_records()) == 2


def test_a_missing_product_triggers_a_rebuild(bws: BuildWorkspace) -> None:
    assert bws.build().exit_code == 0
    (bws.ws.flagtree / "python/triton/_C/libtriton.so").unlink()
    again = bws.build()
    assert "build products are missing" in again.stderr and len(bws.build_records()) == 2


def test_offline_build_gets_the_offline_variables(bws: BuildWorkspace) -> None:
    result = bws.build("--offline")
    assert result.exit_code == 0, result.stderr
    [entry] = [r for r in bws.build_records() if "editable_wheel" in r["argv"]]
    assert entry["env"]["TRITON_OFFLINE_BUILD"] == "1" and entry["env"]["PIP_NO_INDEX"] == "1"


def test_offline_lists_every_missing_input_and_runs_nothing(world: GitWorld, tmp_path: Path,
                                                            http_server: LoopbackHTTPServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    ws = new_workspace(world, tmp_path / "ws", always_set=(PREREQUISITES,))
    bare = make_venv(tmp_path / "bare-venv", with_pip=False)  # no pybind11, no ninja
    result = ws.run("build", "--ignore-host", "--offline", "--python", str(bare))
    assert result.exit_code == 5
    assert "inputs of an offline build are missing; nothing was run" in result.stderr
    assert "source flagtree: not checked out" in result.stderr and "flagtree-cpu sync" in without_context(result.stderr)
    # the LLVM's name is read from the FlagTree checkout that is not there yet
    assert "artifact llvm: read from flagtree's cmake/llvm-hash.txt after sync" in result.stderr
    assert "flagtree-cpu fetch" in result.stderr
    assert "pybind11>=2.13.1: missing" in result.stderr
    # the exact command, shell-quoted (an unquoted >= would be a redirection)
    assert f"{bare} -m pip install 'setuptools>=40.8.0' wheel 'pybind11>=2.13.1'" in result.stderr
    assert not record.exists() and http_server.requests == []


def test_missing_prerequisites_are_installed_once(bws: BuildWorkspace, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    wheelhouse = tiny_wheel(tmp_path, "flagtree-fixture-prereq", "1.2").parent
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    extra = ('python.build=[setuptools>=40.8.0, wheel, pybind11>=2.13.1, '
             '{requirement: "ninja>=1.11.1", system_command: ninja}, flagtree-fixture-prereq>=1.0]')
    first = bws.build(sets=(extra,))
    assert first.exit_code == 0, first.stderr
    # uv (auto: the test venv has one), with pip's PIP_FIND_LINKS/PIP_NO_INDEX carried over to it
    assert "uv pip install --python" in first.stderr and "'flagtree-fixture-prereq>=1.0' --no-index" in first.stderr
    assert len(list((bws.ws.root / "logs").glob("prerequisites-*.log"))) == 1
    second = bws.build(sets=(extra,))
    assert second.exit_code == 0 and "up to date" in second.stderr
    assert len(list((bws.ws.root / "logs").glob("prerequisites-*.log"))) == 1  # no pip the second time


def test_conflicting_inherited_variables_are_dropped_and_reported(bws: BuildWorkspace,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLVM_INCLUDE_DIRS", "/opt/old-llvm/include")
    monkeypatch.setenv("FLAGTREE_BACKEND", "xpu")
    monkeypatch.setenv("TRITON_OFFLINE_BUILD", "ON")
    result = bws.build()
    assert result.exit_code == 0, result.stderr
    assert "inherited LLVM_INCLUDE_DIRS dropped" in result.stderr
    assert "inherited FLAGTREE_BACKEND overridden: 'xpu' -> 'cpu'" in result.stderr
    assert "inherited TRITON_OFFLINE_BUILD dropped (was 'ON')" in result.stderr
    [entry] = [r for r in bws.build_records() if "editable_wheel" in r["argv"]]
    assert "LLVM_INCLUDE_DIRS" not in entry["env"] and "TRITON_OFFLINE_BUILD" not in entry["env"]
    assert entry["env"]["FLAGTREE_BACKEND"] == "cpu"


def test_a_known_failure_is_diagnosed(bws: BuildWorkspace, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = Path(__file__).resolve().parent.parent / "fixtures" / "build-logs"
    monkeypatch.setenv("FIXTURE_BUILD_FAIL_LOG", str(logs / "out-of-memory.log"))
    result = bws.build("--jobs", "8")
    assert result.exit_code == 5
    assert "the build failed (exit status 1)" in result.stderr
    assert "cause: the compiler was killed for lack of memory" in result.stderr
    assert "Killed signal terminated program cc1plus" in result.stderr
    assert "flagtree-cpu build --jobs 4" in without_context(result.stderr)
    log = next((bws.ws.root / "logs").glob("build-*.log"))
    assert f"log: {log}" in result.stderr
    assert not (bws.ws.root / ".flagtree-cpu/build-editable.json").exists()  # a failed build is no stamp


def test_the_recipes_own_diagnosis_comes_before_the_generic_one(bws: BuildWorkspace,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    logs = Path(__file__).resolve().parent.parent / "fixtures" / "build-logs"
    monkeypatch.setenv("FIXTURE_BUILD_FAIL_LOG", str(logs / "out-of-memory.log"))
    own = ("diagnosis.build=[{id: board-oom, pattern: 'Killed signal terminated', cause: this board's swap is off, "
           "fix: 'enable swap, or flagtree-cpu build --jobs {jobs_half}'}]")
    result = bws.build("--jobs", "6", sets=(own,))
    assert result.exit_code == 5
    assert "cause: this board's swap is off" in result.stderr and "enable swap, or flagtree-cpu build --jobs 3" in \
        without_context(result.stderr)


def test_a_crash_is_reported_with_its_signal(bws: BuildWorkspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_BUILD_SEGFAULT", "1")
    result = bws.build()
    assert result.exit_code == 5
    assert "the build failed" in result.stderr and "log:" in result.stderr


def test_a_wheel_for_many_boards(bws: BuildWorkspace, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    result = bws.build("--wheel", str(dist))
    assert result.exit_code == 0, result.stderr
    [wheel] = list(dist.glob("triton-3.3.0-*.whl"))
    import hashlib

    assert f"wheel:  {wheel}\nsha256: {hashlib.sha256(wheel.read_bytes()).hexdigest()}\n" in result.stderr
    [entry] = [r for r in bws.build_records() if "bdist_wheel" in r["argv"]]
    assert entry["env"]["FLAGTREE_BACKEND"] == "cpu"
    again = bws.build("--wheel", str(dist))
    assert "up to date" in again.stderr and f"wheel:  {wheel}" in again.stderr


def test_build_stops_at_doctors_blocking_host_rules_before_running_anything(bws: BuildWorkspace) -> None:
    # build's preflight is doctor's rules that block the build (as setup's is): exit 7, as doctor and setup give
    result = bws.ws.run("build", "--python", str(bws.python), sets=("platform.host.arch=[riscv64]",))
    assert result.exit_code == 7, result.stderr
    said = " ".join(result.stderr.split())
    assert "host.arch:" in said and "builds on riscv64" in said and "--ignore-host" in said
    # the recipe's own reason, not the engine's
    assert "(libtriton is compiled with" in said
    assert bws.records() == []


def test_env_prints_runtime_exports_and_the_build_env(bws: BuildWorkspace) -> None:
    runtime = bws.ws.run("env")
    assert runtime.stdout == "export FLAGTREE_BACKEND=cpu\nexport FLAGGEMS_VENDOR=arm\n"
    build = bws.ws.run("env", "--build", "--json", "--python", str(bws.python))
    document = result_of(build.stdout)
    assert document["set"]["TRITON_BUILD_PROTON"] == "OFF" and "TRITON_OFFLINE_BUILD" not in document["set"]
    offline = result_of(bws.ws.run("env", "--build", "--offline", "--json").stdout)
    assert offline["set"]["TRITON_OFFLINE_BUILD"] == "1"



def test_the_offline_dry_run_judges_the_build_as_the_offline_setup_does(bws: BuildWorkspace) -> None:
    """The build's plan is judged with the run's own options: after `build --offline`, whose stamp holds a variable
    only offline builds get, `setup --offline --dry-run` says the build is current, as `setup --offline` finds it."""
    offline_only = ("build.offline_env.set.FIXTURE_OFFLINE_ONLY=1",)
    assert bws.build("--offline", sets=offline_only).exit_code == 0
    dry = bws.ws.run("setup", "--offline", "--skip-validate", "--dry-run", "--json", "--ignore-host", "--python",
                     str(bws.python), sets=offline_only)
    [item] = [i for i in result_of(dry.stdout)["items"] if i["area"] == "build"]
    assert (item["state"], item["will"]) == ("ok", "ok"), item
    again = bws.build("--offline", sets=offline_only)
    assert again.exit_code == 0 and "up to date" in again.stderr
