"""`build --compile-farm`: real distccd helpers on 127.0.0.1, reached through ccache's prefix command.

The fixture FlagTree compiles FIXTURE_BUILD_COMPILE generated C++ units with `ccache g++` (as FlagTree's CMake does
when ccache is installed); each workspace has its own empty CCACHE_DIR, so every unit is a miss that ccache hands
to `distcc`, and each daemon's log says which units it compiled."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.cli import Workspace, ready_to_build
from tests.support.distccd import Distccd, alive_in_group, missing_parts
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import TOOLS, build_venv

UNITS = 6


@pytest.fixture
def daemons() -> Iterator[list[Distccd]]:
    why = missing_parts()
    if why:
        pytest.skip(why)
    started = [Distccd(jobs=2), Distccd(jobs=2)]
    yield started
    for daemon in started:
        daemon.stop()


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer,
       monkeypatch: pytest.MonkeyPatch) -> Workspace:
    why = missing_parts()
    if why:
        pytest.skip(why)
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    workspace = ready_to_build(world, tmp_path / "ws", url)
    workspace.python = build_venv(tmp_path / "venv", TOOLS)  # type: ignore[attr-defined]
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    monkeypatch.setenv("FIXTURE_BUILD_COMPILE", str(UNITS))
    return workspace


def build(ws: Workspace, *args: str) -> Result:
    return ws.run("--json", "build", "--ignore-host", "--jobs", "1", "--python", str(ws.python), *args)  # type: ignore


def farm_data(result: Result) -> dict:
    assert result.exit_code == 0, result.stdout + result.stderr
    [action] = result_of(result.stdout)["actions"]
    return action["compile_farm"]


def last_build_env(ws: Workspace) -> dict[str, str]:
    lines = (ws.flagtree / "python" / "build" / "fixture-build-record.jsonl").read_text().splitlines()
    return json.loads(lines[-1])["env"]


def compiled(ws: Workspace) -> dict:
    return json.loads((ws.flagtree / "python" / "build" / "fixture-compile.json").read_text())


def test_two_daemons_compile_every_unit_and_jobs_grow_by_their_slots(daemons: list[Distccd], ws: Workspace) -> None:
    hosts = " ".join(d.spec for d in daemons)
    result = build(ws, "--compile-farm", hosts)
    data = farm_data(result)
    assert data["active"] and data["used"] == [d.spec for d in daemons] and data["slots"] == 4
    assert "warning" not in result.stderr
    sent = [unit for d in daemons for unit in d.compiled()]
    assert sorted(sent) == sorted(f"unit{i}.cpp" for i in range(1, UNITS + 1))  # each unit once, all on the farm
    assert compiled(ws) == {"compiled": UNITS, "compiler": ["ccache", "g++"]}
    env = last_build_env(ws)
    assert env["MAX_JOBS"] == "5"  # --jobs 1, plus 2 + 2 slots
    assert env["CCACHE_PREFIX"].endswith("/distcc") and env["DISTCC_HOSTS"] == hosts
    assert env["DISTCC_IO_TIMEOUT"] == "60" and env["DISTCC_DIR"].startswith(str(ws.root))
    assert "compile farm: 2 of 2 hosts (4 slots added to the build's jobs)" in result_of(result.stdout)[
        "actions"][0]["detail"]


def test_the_farm_is_not_a_build_input(daemons: list[Distccd], ws: Workspace, monkeypatch: pytest.MonkeyPatch,
                                       refused_port: int) -> None:
    assert build(ws, "--compile-farm", daemons[0].spec).exit_code == 0
    again = build(ws)  # no farm now: the same stamp, nothing to build
    assert again.exit_code == 0, again.stderr
    assert result_of(again.stdout)["actions"][0]["detail"] == "up to date"
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_FARM", f"127.0.0.1:{refused_port}")
    third = build(ws)
    assert result_of(third.stdout)["actions"][0]["detail"] == "up to date" and "warning" not in third.stderr


@pytest.mark.timeout(300)
def test_no_host_answers_is_one_warning_and_a_local_build(ws: Workspace, refused_port: int) -> None:
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        hosts = f"127.0.0.1:{refused_port} 127.0.0.1:{silent.getsockname()[1]}"
        result = build(ws, "--compile-farm", hosts)
    data = farm_data(result)
    assert not data["active"] and data["slots"] == 0
    assert result.stderr.count("warning") == 1
    said = " ".join(result.stderr.split())
    assert "no host answered" in said and "refuses connections" in said and "did not answer" in said
    assert "building locally" in said
    assert compiled(ws)["compiled"] == UNITS and "CCACHE_PREFIX" not in last_build_env(ws)
    assert last_build_env(ws)["MAX_JOBS"] == "1"


@pytest.mark.timeout(300)
def test_a_helper_killed_mid_build_the_build_succeeds_locally(daemons: list[Distccd], ws: Workspace) -> None:
    helper = daemons[0]
    group = helper.process.pid

    def kill_after_the_second_unit() -> None:
        deadline = time.monotonic() + 240
        while len(helper.compiled()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        helper.kill()

    killer = threading.Thread(target=kill_after_the_second_unit)
    killer.start()
    result = build(ws, "--compile-farm", helper.spec)
    killer.join()
    data = farm_data(result)  # exit 0
    assert data["active"]
    assert 2 <= len(helper.compiled()) < UNITS  # some units on the helper, the rest here (distcc's fallback)
    assert compiled(ws)["compiled"] == UNITS
    assert all((ws.flagtree / "python" / "build" / "fixture-objects" / f"unit{i}.o").stat().st_size > 0
               for i in range(1, UNITS + 1))
    assert not alive_in_group(group)
    log = Path(result_of(result.stdout)["actions"][0]["log"]).read_text()
    assert "distcc" in log and "locally" in log  # distcc said it compiled here instead


def test_doctor_probes_the_configured_farm(daemons: list[Distccd], ws: Workspace, monkeypatch: pytest.MonkeyPatch,
                                           refused_port: int) -> None:
    def check() -> dict:
        result = ws.run("--json", "doctor", "--python", str(ws.python), "--check", "toolchain.compile-farm")  # type: ignore
        [found] = [c for c in result_of(result.stdout)["checks"] if c["id"] == "toolchain.compile-farm"]
        return found

    assert check()["status"] == "skip"
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_FARM", " ".join(d.spec for d in daemons))
    live = check()
    assert live["status"] == "ok" and "2 of 2 hosts" in live["detail"] and "4 slots" in live["detail"]
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_FARM", f"{daemons[0].spec} 127.0.0.1:{refused_port}")
    half = check()
    assert half["status"] == "warn" and "1 of 2 hosts" in half["detail"] and "refuses connections" in half["detail"]
    assert not any(d.compiled() for d in daemons) and daemons[0].sent()  # only probe units were compiled


@pytest.mark.parametrize(("hosts", "says"), [
    ("@helper", "is an ssh host"),
    ("helper,cpp", "pump mode"),
    ("localhost", "is this machine"),
    ("helper/0", "limit 0 is not 1-256"),
])
@pytest.mark.parametrize("given", ["option", "environment", "recipe"])
@pytest.mark.parametrize("command", ["build", "setup"])
def test_hosts_distcc_would_misread_are_exit_2_before_anything_runs(
        hosts: str, says: str, given: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["-w", str(tmp_path / "ws"), command]
    if given == "option":
        argv.append(f"--compile-farm={hosts}")
    elif given == "environment":
        monkeypatch.setenv("FLAGTREE_CPU_COMPILE_FARM", hosts)
    else:
        argv[2:2] = ["--set", f"build.compile_farm={hosts}"]
    result = CliRunner().invoke(app, argv)
    output = " ".join((result.stdout + result.stderr).replace("\u2502", " ").split())
    assert result.exit_code == 2, output
    assert says in output
    if given == "environment":
        assert "(from FLAGTREE_CPU_COMPILE_FARM)" in output
    assert not (tmp_path / "ws").exists()  # nothing ran
