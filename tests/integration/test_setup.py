"""`flagtree-cpu setup` end to end: every stage against the git world, the loopback HTTP server
and the fixture FlagTree (whose setup.py records each build and whose triton runs the kernels).

The target venv has torch and numpy linked in (build_venv), the recipe's run-time prerequisites
are relaxed to what this machine has, and the build prerequisites leave out cmake (the fixture
build does not run CMake). Everything else is the bundled recipe.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import Result

from flagtree_cpu_build.locking import exclusive
from tests.support.cli import ONE_KERNEL, Workspace, new_workspace
from tests.support.envelope import envelope_of, result_of
from tests.support.fetching import wait_for
from tests.support.gitworld import GitWorld
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.ports import ServerOutput
from tests.support.tarballs import TOP, Tarball, llvm_tarball
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv, simple_index, tiny_wheel

RUNTIME = "python.runtime=[torch>=2.0, numpy]"
LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"
STAGES = ["preflight", "sources", "artifacts", "links", "python", "build", "validate"]
FAILURE_LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "build-logs"


@dataclass
class SetupWorld:
    ws: Workspace
    python: Path
    server: LoopbackHTTPServer
    world: GitWorld
    record: Path
    tarball: Tarball

    def setup(self, *args: str, sets: tuple[str, ...] = ()) -> Result:
        return self.ws.run("setup", "--ignore-host", "--python", str(self.python), *args, sets=sets)

    def builds(self) -> list[dict]:
        """The fixture setup.py runs that built (pip also runs it for metadata)."""
        if not self.record.exists():
            return []
        runs = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [r for r in runs if {"editable_wheel", "bdist_wheel", "develop", "build_ext"} & set(r["argv"][1:])]

    def gets(self) -> int:
        return len([r for r in self.server.requests_for(LLVM_PATH) if r.method == "GET"])

    def logs(self, kind: str) -> list[Path]:
        return sorted((self.ws.root / "logs").glob(f"{kind}-*.log"))

    @property
    def llvm(self) -> Path:
        return Path.home() / ".triton" / "llvm" / TOP


def _setup_world(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch,
                 *sets: str) -> SetupWorld:
    tarball = llvm_tarball()
    url = http_server.serve(LLVM_PATH, tarball.data)
    record = tmp_path / "build-record.jsonl"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    ws = new_workspace(world, tmp_path / "ws",
                       always_set=(f"artifacts.llvm.url={url}", PREREQUISITES, RUNTIME, *sets))
    return SetupWorld(ws, build_venv(tmp_path / "venv", [*TOOLS, "torch", "numpy"]), http_server, world, record,
                      tarball)


@pytest.fixture
def sw_full(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer,
            monkeypatch: pytest.MonkeyPatch) -> SetupWorld:
    """The bundled recipe as it is, every kernel of its checks included."""
    return _setup_world(world, tmp_path, http_server, monkeypatch)


@pytest.fixture
def sw(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> SetupWorld:
    """The bundled recipe with one kernel in its checks (ONE_KERNEL): for tests about when stages run."""
    return _setup_world(world, tmp_path, http_server, monkeypatch, ONE_KERNEL)


def stages(report: dict) -> dict[str, str]:
    return {s["stage"]: s["status"] for s in report["stages"]}


def test_setup_runs_every_stage_then_a_rerun_is_a_quick_no_op(sw_full: SetupWorld) -> None:
    sw = sw_full
    result = sw.setup()
    assert result.exit_code == 0, result.stderr
    for stage in STAGES:
        assert stage in result.stderr
    assert "setup finished" in result.stderr
    assert f'eval "$(flagtree-cpu -w {sw.ws.root} env)"' in result.stderr  # the next step, for this workdir
    # a terse line per stage as it finishes; what each did is said once, in the summary table
    assert "\nsources: created (" in result.stderr and "\nbuild: created (" in result.stderr
    assert result.stderr.count("flagtree created") == 1, result.stderr
    assert sw.ws.head(sw.ws.flagtree) == sw.ws.flagtree_commit
    assert (sw.ws.flagtree_cpu / "third_party" / "sleef" / ".git").exists()
    assert (sw.llvm / "bin" / "clang").is_file()
    assert sw.ws.run("link", "--check").exit_code == 0  # all 12 links in place
    assert len(sw.builds()) == 1 and sw.gets() == 1
    last = json.loads((sw.ws.root / ".flagtree-cpu" / "last-validation.json").read_text())
    assert last["ok"] is True and last["summary"]["pass"] == 5

    # the second run: nothing is fetched, cloned, installed, built or validated again
    sw.world.stop()  # any git network I/O now fails
    logs_before = {kind: sw.logs(kind) for kind in ("build", "prerequisites", "validate-backend", "venv")}
    again = sw.setup("--json")
    assert again.exit_code == 0, again.stderr
    report = result_of(again.stdout)
    assert report["schema"] == "flagtree-cpu/setup/v1" and report["ok"] is True
    assert stages(report) == {"preflight": "ok", "sources": "ok", "artifacts": "ok", "links": "ok", "python": "ok",
                              "build": "ok", "validate": "ok"}
    assert report["commits"]["flagtree"] == sw.ws.flagtree_commit
    assert report["artifacts"]["llvm"]["sha256"] == sw.tarball.sha256
    assert report["validation"]["ok"] is True
    assert sw.gets() == 1 and len(sw.builds()) == 1
    assert {kind: sw.logs(kind) for kind in logs_before} == logs_before  # how fast: bench_setup (warm re-run)


@pytest.mark.parametrize(("signum", "code", "said"), [(signal.SIGINT, 130, "interrupted during setup (artifacts)"),
                                                       (signal.SIGTERM, 143, "stopped by SIGTERM during setup "
                                                        "(artifacts)")], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_during_the_download_then_a_rerun_completes(sw: SetupWorld, signum: int, code: int,
                                                           said: str) -> None:
    """Ctrl-C (or a CI runner's SIGTERM) while only the download is still running: the error names that
    stage, as the summary table does; the partial download is kept and the re-run resumes it."""
    faults = Faults(hold_after=300_000)  # the rest of the 787 KB waits: the clones finish, the download does not
    sw.server.serve(LLVM_PATH, sw.tarball.data, faults)
    process = sw.ws.process("setup", "--ignore-host", "--python", str(sw.python))
    partial = Path.home() / ".cache" / "flagtree-cpu" / "downloads" / "partial"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        parts = list(partial.glob("*.part")) if partial.is_dir() else []
        if parts and parts[0].stat().st_size > 100_000:
            break
        time.sleep(0.05)
    else:
        process.kill()
        pytest.fail("the download never started")
    sw.ws.root.joinpath("FlagTree", "third_party", "triton-cpu", "third_party", "sleef")  # sources finish first
    deadline = time.monotonic() + 20
    while not (sw.ws.flagtree_cpu / "third_party" / "sleef" / ".git").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the sources stage records its result
    process.send_signal(signum)
    faults.release(rate=32 * 1024)  # the download's worker stops at its next progress update: give it one, slowly
    _out, err = process.communicate(timeout=30)
    assert process.returncode == code, err
    assert said in err and "Traceback" not in err
    assert "sources   | created" in err.replace("sources | created", "sources   | created") or "created" in err
    assert "re-run" in err or "run the same command again" in err
    kept = parts[0].stat().st_size
    assert kept > 100_000 and not sw.llvm.exists() and not sw.builds()

    faults.rate = None  # held once: the re-run gets the rest at once
    result = sw.setup()
    assert result.exit_code == 0, result.stderr
    resumed = [r for r in sw.server.requests_for(LLVM_PATH) if r.method == "GET"][-1]
    assert resumed.range == f"bytes={kept}-" and resumed.status == 206
    assert (sw.llvm / "bin" / "clang").is_file() and len(sw.builds()) == 1


def test_a_build_failure_is_diagnosed_and_exits_5(sw: SetupWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_BUILD_FAIL_LOG", str(FAILURE_LOGS / "out-of-memory.log"))
    result = sw.setup("--jobs", "8")
    assert result.exit_code == 5, result.stderr
    assert "cause: the compiler was killed for lack of memory" in result.stderr
    assert f"flagtree-cpu -w {sw.ws.root} build --jobs 4" in " ".join(result.stderr.split())  # with its workspace
    summary = result.stderr[result.stderr.index("setup of"):]
    for stage, status in (("sources", "created"), ("links", "created"), ("build", "failed"), ("validate", "not run")):
        line = next(line for line in summary.splitlines() if line.strip().startswith(stage))
        assert status in line, (stage, line)
    assert not (sw.ws.root / ".flagtree-cpu" / "last-validation.json").exists()

    # fixed: the re-run continues at the build (the clones and the download are not repeated)
    monkeypatch.delenv("FIXTURE_BUILD_FAIL_LOG")
    again = sw.setup("--json")
    assert again.exit_code == 0, again.stderr
    assert stages(result_of(again.stdout))["sources"] == "ok" and sw.gets() == 1


def test_json_report_of_a_failure_carries_the_stages_and_the_error(sw: SetupWorld,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_BUILD_FAIL_LOG", str(FAILURE_LOGS / "out-of-memory.log"))
    result = sw.setup("--json")
    assert result.exit_code == 5
    document = envelope_of(result.stdout)  # one document, not the report and an error after it
    report = document["result"]
    assert document["ok"] is False and document["error"] == report["error"]
    assert report["ok"] is False and report["error"]["code"] == "build" and report["error"]["exit_code"] == 5
    assert document["error"]["log"] and document["error"]["diagnosis"]["cause"]
    assert any("cause:" in line for line in report["error"]["details"])
    assert stages(report)["build"] == "failed" and stages(report)["validate"] == "not run"
    assert report["commits"]["flagtree"] == sw.ws.flagtree_commit


def test_github_actions_gets_a_group_per_stage_and_an_error_annotation(sw: SetupWorld,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("FIXTURE_BUILD_FAIL_LOG", str(FAILURE_LOGS / "out-of-memory.log"))
    result = sw.setup()
    assert result.exit_code == 5
    for stage in ("preflight", "sources", "links", "python", "build"):
        assert f"::group::flagtree-cpu setup: {stage}" in result.stdout
    assert result.stdout.count("::group::") == result.stdout.count("::endgroup::")
    annotation = next(line for line in result.stdout.splitlines() if line.startswith("::error "))
    assert annotation.startswith("::error title=flagtree-cpu setup%3A build failed::the build failed")
    assert "cause: the compiler was killed for lack of memory" in annotation and "%0A" in annotation


def test_dry_run_shows_the_plan_with_reasons_and_changes_nothing(sw: SetupWorld) -> None:
    result = sw.setup("--dry-run")
    assert result.exit_code == 0, result.stderr
    out = result.stderr
    assert f"clone flagtree @{sw.ws.flagtree_commit[:7]}" in out and "missing" in out
    assert "download llvm" in out and "not cached" in out
    assert f"download: {len(sw.tarball.data) / 1000:.0f} KB" in out  # the size from a HEAD request
    assert "create 12 links" in out and "no previous build" in out and "never validated" in out
    assert "nothing was changed (--dry-run)" in out
    assert not sw.ws.root.exists() and not (Path.home() / ".triton").exists()
    assert sw.gets() == 0

    plan = result_of(sw.setup("--dry-run", "--json").stdout)
    assert plan["schema"] == "flagtree-cpu/setup-plan/v1" and plan["download_bytes"] == len(sw.tarball.data)
    actions = {i["area"]: i["action"] for i in plan["items"]}
    assert actions["build"] == "build" and actions["links"] == "create 12 links"


def test_dry_run_after_a_setup_says_what_a_new_pin_would_change(sw: SetupWorld) -> None:
    assert sw.setup("--skip-validate").exit_code == 0
    tip = sw.world["flagtree"].commits["tip"]
    assert sw.setup("--dry-run", "--skip-validate").stderr.count("nothing to do") == 1
    result = sw.setup("--dry-run", "--skip-validate", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 0, result.stderr
    assert f"move flagtree {sw.ws.flagtree_commit[:7]} -> {tip[:7]}" in result.stderr
    assert f"flagtree moves {sw.ws.flagtree_commit[:7]} -> {tip[:7]}" in result.stderr  # why the build reruns
    assert sw.ws.head(sw.ws.flagtree) == sw.ws.flagtree_commit


def test_status_compares_the_workspace_with_the_recipe(sw: SetupWorld) -> None:
    before = result_of(sw.ws.run("status", "--json", "--python", str(sw.python)).stdout)
    assert before["current"] is False
    assert {i["area"]: i["state"] for i in before["items"]}["sources"] == "missing"
    assert sw.setup().exit_code == 0
    after = sw.ws.run("status", "--python", str(sw.python))
    assert after.exit_code == 0, after.stderr
    # the table is the listing (stdout); the verdict is a summary (stderr)
    assert "everything is current" in after.stderr and "passed for this build" in after.stdout
    (sw.ws.flagtree / "README.md").write_text("local edit\n")
    document = result_of(sw.ws.run("status", "--json", "--python", str(sw.python)).stdout)
    flagtree = next(i for i in document["items"] if i["subject"] == "flagtree")
    assert flagtree["modified_files"] == 1 and "1 modified tracked file" in flagtree["detail"]
    build = next(i for i in document["items"] if i["area"] == "build")
    assert build["state"] == "stale" and "local_changes" in " ".join(build["reasons"])


def test_a_second_setup_on_the_same_workspace_exits_8_or_waits(sw: SetupWorld) -> None:
    lock = sw.ws.root / ".flagtree-cpu" / "workspace.lock"
    with exclusive(lock, note="build"):
        result = sw.setup("--skip-build")
        assert result.exit_code == 8, result.stderr
        assert "in use by another flagtree-cpu run (build, pid" in result.stderr and "--wait" in result.stderr
        assert not sw.ws.flagtree.exists()  # nothing was started
        for command in (["sync"], ["fetch"], ["link"], ["build", "--ignore-host"]):
            assert sw.ws.run(*command).exit_code == 8, command
        assert sw.ws.run("status").exit_code == 0  # reading is always fine
        assert sw.ws.run("link", "--dry-run").exit_code != 8

    # a real second process: the first holds the workspace while the server holds its download (a gate), until
    # a third run, started with --wait, says it is waiting
    faults = Faults(hold_after=100_000)
    sw.server.serve(LLVM_PATH, sw.tarball.data, faults)
    first = sw.ws.process("setup", "--skip-build", "--ignore-host")
    try:
        wait_for(lambda: lock.read_text().strip() == f"{first.pid} setup", 60, "the first run's lock")
        busy = sw.setup("--skip-build")
        waiter = sw.ws.process("--wait", "setup", "--skip-build", "--ignore-host")
        said = ServerOutput(waiter, waiter.stderr, keep=None)
        assert said.wait_for("waiting for another flagtree-cpu process", 120), said.text()
    finally:
        faults.release()
    _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert busy.exit_code == 8 and "(setup, pid" in busy.stderr
    assert waiter.wait(timeout=120) == 0, said.text(timeout_s=10)
    assert sw.gets() == 1  # the waiting run found everything done


def test_skip_build_makes_sources_llvm_and_links_only(sw: SetupWorld) -> None:
    result = sw.ws.run("setup", "--skip-build", "--ignore-host", "--json")
    assert result.exit_code == 0, result.stderr
    report = result_of(result.stdout)
    assert stages(report) == {"preflight": "ok", "sources": "created", "artifacts": "created", "links": "created",
                              "python": "skipped", "build": "skipped", "validate": "skipped"}
    assert not (sw.ws.root / ".venv").exists() and not sw.builds()


def test_offline_with_nothing_here_lists_what_is_missing(sw: SetupWorld) -> None:
    sw.world.stop()
    result = sw.setup("--offline")
    assert result.exit_code in (3, 4), result.stderr
    assert "--offline" in result.stderr
    assert sw.gets() == 0


# --- a bare host: the venv, the Python prerequisites, the system packages ---------------------------


@pytest.mark.parametrize("validating", [True, False], ids=["kernels-run", "skip-validate"])
def test_a_bare_host_gets_a_venv_and_the_prerequisites_from_their_indexes(
        sw: SetupWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validating: bool) -> None:
    """The run-time prerequisites (torch, from the recipe's own index) are installed only when the kernels
    will run; with --skip-validate nothing would use them, so the index is not even asked."""
    default_index = simple_index(sw.server, "/pypi", tiny_wheel(tmp_path / "a", "fixture-build-tool", "1.0"))
    torch_index = simple_index(sw.server, "/whl/cpu", tiny_wheel(tmp_path / "b", "fixture-torch", "2.0"))
    monkeypatch.setenv("PIP_INDEX_URL", default_index)  # pip's default index; torch's comes from the recipe
    flags = () if validating else ("--skip-validate",)
    result = sw.ws.run("setup", "--ignore-host", *flags, sets=(
        "python.build=[fixture-build-tool]",
        f'python.runtime=[{{requirement: "fixture-torch==2.0", index_url: "{torch_index}"}}]',
        'build.argv=["{python}", -c, "print(42)"]', "checks=[]"))
    assert result.exit_code == 0, result.stderr
    venv_python = sw.ws.root / ".venv" / "bin" / "python"
    assert venv_python.is_file()
    python_row = next(line for line in result.stderr.splitlines() if line.strip().startswith("python "))
    assert "created" in python_row, python_row
    assert sw.server.requests_for("/pypi/fixture-build-tool/")
    imports = "import fixture_build_tool, fixture_torch" if validating else "import fixture_build_tool"
    assert subprocess.run([str(venv_python), "-c", imports], check=False).returncode == 0
    if validating:
        assert sw.server.requests_for("/whl/cpu/fixture-torch/"), "torch was not asked of the recipe's index"
    else:
        assert not sw.server.requests_for("/whl/cpu/fixture-torch/"), "--skip-validate still installed torch"
        assert "run-time prerequisites skipped (--skip-validate" in python_row.replace("\n", " "), result.stderr


def fake_apt_get(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int = 0) -> Path:
    """An apt-get first on PATH that records its argv and environment."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    record = tmp_path / "apt-get.json"
    script = bin_dir / "apt-get"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                      f"open({str(record)!r}, 'w').write(json.dumps({{'argv': sys.argv[1:], "
                      f"'frontend': os.environ.get('DEBIAN_FRONTEND')}}))\nsys.exit({status})\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return record


@pytest.mark.skipif(not Path("/var/lib/dpkg/status").is_file() or os.geteuid() != 0,
                    reason="needs a dpkg system, run as root (elsewhere the command would be sudo apt-get)")
def test_install_system_packages_runs_one_apt_get_line(sw: SetupWorld, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    record = fake_apt_get(tmp_path, monkeypatch)
    missing = ("system_packages.apt=[git, flagtree-cpu-fixture-a, flagtree-cpu-fixture-b]",)
    shown = sw.ws.run("setup", "--skip-build", "--ignore-host", sets=missing)
    assert shown.exit_code == 0 and not record.exists()  # never by default
    assert "flagtree-cpu-fixture-a" not in shown.stderr  # nor named: only the build needs them
    result = sw.ws.run("setup", "--skip-build", "--ignore-host", "--install-system-packages", sets=missing)
    assert result.exit_code == 0, result.stderr
    ran = json.loads(record.read_text())
    assert ran == {"argv": ["install", "-y", "flagtree-cpu-fixture-a", "flagtree-cpu-fixture-b"],
                   "frontend": "noninteractive"}
    assert "+ apt-get install -y flagtree-cpu-fixture-a flagtree-cpu-fixture-b" in result.stderr


@pytest.mark.skipif(not Path("/var/lib/dpkg/status").is_file(), reason="needs a dpkg system")
def test_a_failing_apt_get_stops_setup_before_anything_changes(sw: SetupWorld, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fake_apt_get(tmp_path, monkeypatch, status=100)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fake-bin'}{os.pathsep}{os.environ['PATH']}")
    if os.geteuid() != 0:  # sudo would ask for a password: stand in for it as well
        (tmp_path / "fake-bin" / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
        (tmp_path / "fake-bin" / "sudo").chmod(0o755)
    result = sw.ws.run("setup", "--skip-build", "--ignore-host", "--install-system-packages",
                       sets=("system_packages.apt=[flagtree-cpu-fixture-a]",))
    assert result.exit_code == 7, result.stderr
    assert "apt-get install -y flagtree-cpu-fixture-a` failed (exit status 100)" in result.stderr
    assert not sw.ws.flagtree.exists() and sw.gets() == 0


def test_frozen_without_a_lock_stops_at_the_sources_and_changes_nothing(sw: SetupWorld) -> None:
    result = sw.ws.run("setup", "--frozen", "--skip-build", "--ignore-host")
    assert result.exit_code == 3, result.stderr
    assert "--frozen" in result.stderr and not sw.ws.flagtree.exists()
    assert not sw.ws.lock_file.exists()
