"""SIGKILL to the tool's whole process group, at several points of a `sync` and of a `build`: nothing the
tool started (git, its helpers, a smudge filter, pip, the build's compilers) outlives it, and the next
run succeeds on what it left. Real processes, real signals: the tool runs in a session of its own (as
under a CI runner or `timeout -s KILL`), with a marker in its environment that everything it starts
inherits, so a scan of /proc finds what is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.cli import Workspace, new_workspace, ready_to_build
from tests.support.gitdaemon import GitDaemon
from tests.support.gitworld import GitWorld, git
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.interrupt import alive, arm_interrupting_filter, marked_processes, wait_until
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.tcpproxy import ThrottledProxy
from tests.support.venvs import TOOLS, build_venv

MARKER = "KILL_POINTS_TEST_TREE"  # not FLAGTREE_*: the build environment drops those
FLAGTREE_PATH = "flagos-ai/FlagTree.git"
SLEEF = "third_party/sleef"
HOLD_S = 300  # a trapped checkout waits this long unless the tool's git is stopped: longer than any wait here


class KilledRun:
    """The tool as a real process in a session of its own, marked, to be killed with its group."""

    def __init__(self, argv: list[str], stderr: Path):
        self.marker = uuid.uuid4().hex
        self.stderr = stderr
        with open(stderr, "w") as err:  # a file: a pipe nobody reads would block a talkative run
            self.process = subprocess.Popen([sys.executable, "-m", "flagtree_cpu_build", *argv],
                                            env={**os.environ, MARKER: self.marker}, stdout=subprocess.DEVNULL,
                                            stderr=err, start_new_session=True)

    def kill_group(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)

    def wait_killed(self, timeout: float = 60) -> None:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            raise AssertionError("the tool was not killed") from None
        assert self.process.returncode == -signal.SIGKILL, self.stderr.read_text()

    def left(self) -> list[tuple[int, str]]:
        return marked_processes(MARKER, self.marker)

    def assert_nothing_left(self, timeout: float = 30) -> None:
        """Every process of the tool's tree gone within ``timeout`` (a stopped git needs milliseconds; the
        trapped ones would hold for HOLD_S)."""
        try:
            wait_until(lambda: not self.left(), timeout, "every process the killed tool started to end")
        except AssertionError:
            left = self.left()
            for pid, _ in left:
                try:
                    os.kill(pid, signal.SIGKILL)  # the test leaves nothing behind either
                except ProcessLookupError:
                    pass
            raise AssertionError(f"outlived the tool: {left}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill_group()
            self.process.wait()
        for pid, _ in self.left():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path) -> Workspace:
    return new_workspace(world, tmp_path / "ws")


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Callable[..., KilledRun]]:
    started: list[KilledRun] = []

    def start(ws: Workspace, *args: str, sets: tuple[str, ...] = ()) -> KilledRun:
        run = KilledRun(ws.argv(*args, sets=sets), tmp_path / f"stderr-{len(started)}.txt")
        started.append(run)
        return run

    yield start
    for run in started:
        run.close()


def gitconfig() -> Path:
    return Path(os.environ["GIT_CONFIG_GLOBAL"])


def assert_synced(ws: Workspace, sets: tuple[str, ...] = (), flagtree: str | None = None) -> None:
    """The next sync exits 0 and leaves every checkout at its pin, clean, with no half-made folder."""
    result = ws.run("sync", sets=sets)
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree) == (flagtree or ws.flagtree_commit)
    assert ws.head(ws.flagtree_cpu / SLEEF) == ws.world["sleef"].commits["first"]
    for repo in (ws.flagtree, ws.flagtree_cpu, ws.flagtree_cpu / SLEEF):
        assert git("status", "--porcelain", "--untracked-files=no", cwd=repo, env=ws.world.env) == "", repo
    assert not [p for p in ws.root.rglob(".*flagtree-cpu-*")], "a half-made folder is left"


# --- sync: a trapped checkout, the tool's group killed from inside it -------------------------------------


# a first clone is checked out in its half-made folder (.FlagTree.flagtree-cpu-partial-<pid>/FlagTree), so the
# trap on "FlagTree" (or "triton-cpu") fires there; sleef's checkout is a submodule update in the published clone
@pytest.mark.parametrize("checkout", ["FlagTree", "triton-cpu", "sleef"])
def test_sigkill_to_the_group_during_a_checkout_leaves_no_process_and_the_next_sync_succeeds(
        ws: Workspace, runs, tmp_path: Path, checkout: str) -> None:
    trap = arm_interrupting_filter(gitconfig(), tmp_path / "trap", checkout, 1, "SIGKILL", target="group",
                                   hold_s=HOLD_S)
    run = runs(ws, "sync")
    run.wait_killed()
    assert trap.fired
    run.assert_nothing_left()
    assert_synced(ws)


def test_sigkill_to_the_group_while_moving_to_a_new_pin(ws: Workspace, runs, tmp_path: Path) -> None:
    assert ws.run("sync").exit_code == 0
    tip = ws.world["flagtree"].commits["tip"]
    trap = arm_interrupting_filter(gitconfig(), tmp_path / "trap", "FlagTree", 0, "SIGKILL", target="group",
                                   hold_s=HOLD_S)
    sets = (f"sources.flagtree.commit={tip}",)
    run = runs(ws, "sync", sets=sets)
    run.wait_killed()
    assert trap.fired
    run.assert_nothing_left()
    assert_synced(ws, sets, flagtree=tip)


# --- sync: the group killed while git transfers -------------------------------------------------------------


@pytest.fixture
def slow_flagtree(world: GitWorld, tmp_path: Path) -> Iterator[tuple[ThrottledProxy, str]]:
    """FlagTree plus 3 MB of incompressible data behind a relay that freezes after 200 KB: a clone caught mid-way."""
    work = tmp_path / "upstream"
    git("clone", "--quiet", "--branch", "triton_v3.3.x", world["flagtree"].url, work, env=world.env)
    (work / "blobs").mkdir()
    (work / "blobs/random.bin").write_bytes(os.urandom(3 << 20))
    git("add", "-A", cwd=work, env=world.env)
    git("commit", "--quiet", "-m", "big", cwd=work, env=world.env)
    git("push", "--quiet", "origin", "HEAD:refs/heads/big", cwd=work, env=world.env)
    daemon = GitDaemon(world.root / "bare", env=world.env)
    proxy = ThrottledProxy(daemon.port, hold_after=200_000)
    yield proxy, git("rev-parse", "HEAD", cwd=work, env=world.env)
    proxy.close()
    daemon.close()


@pytest.mark.parametrize("through_cache", [False, True], ids=["clone", "git-cache-mirror"])
def test_sigkill_to_the_group_mid_transfer_leaves_no_git_and_the_next_sync_succeeds(
        ws: Workspace, runs, tmp_path: Path, slow_flagtree: tuple[ThrottledProxy, str], through_cache: bool) -> None:
    proxy, big = slow_flagtree
    sets = (f"sources.flagtree.url={proxy.url(FLAGTREE_PATH)}", f"sources.flagtree.commit={big}")
    cache = ("--git-cache", str(tmp_path / "git-cache")) if through_cache else ()
    run = runs(ws, "sync", *cache, sets=sets)
    assert proxy.holding.wait(60), (f"only {proxy.bytes_to_client} bytes relayed; exit {run.process.poll()}, "
                                    f"{run.stderr.read_text()}")
    run.kill_group()
    run.wait_killed()
    run.assert_nothing_left()
    proxy.thaw()
    result = ws.run("sync", *cache, sets=sets)
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree) == big
    assert not [p for p in ws.root.rglob(".*flagtree-cpu-*")]
    if through_cache:
        assert not list((tmp_path / "git-cache").glob("*partial*"))  # the killed run's mirror is gone too


# --- build: the group killed while pip runs the fixture build ---------------------------------------------


def test_sigkill_to_the_group_mid_build_leaves_no_pip_or_compiler_and_the_next_build_succeeds(
        world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, runs,
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    ws = ready_to_build(world, tmp_path / "ws", url)
    python = build_venv(tmp_path / "venv", TOOLS)
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(tmp_path / "build-record.jsonl"))
    monkeypatch.setenv("FIXTURE_BUILD_STEPS", "50")
    monkeypatch.setenv("FIXTURE_BUILD_STEP_SECONDS", "2")  # a build that would take 100 s
    run = runs(ws, "build", "--ignore-host", "--python", str(python))
    record = tmp_path / "build-record.jsonl"

    def building() -> bool:  # setup.py records its argv first: pip runs it for metadata, then to build
        # whole lines only: the one setup.py is still writing may be cut anywhere (a line is several KB)
        lines = (record.read_text() if record.exists() else "").split("\n")[:-1]
        return any({"develop", "editable_wheel"} & set(json.loads(line)["argv"]) for line in lines)

    wait_until(building, 120, "the build to start")
    assert any("pip" in command for _, command in run.left())
    run.kill_group()
    run.wait_killed()
    run.assert_nothing_left()

    monkeypatch.delenv("FIXTURE_BUILD_STEP_SECONDS")
    monkeypatch.setenv("FIXTURE_BUILD_STEPS", "2")
    result = ws.run("build", "--ignore-host", "--python", str(python))
    assert result.exit_code == 0, result.stderr


# --- the watcher follows the tool's process, not the thread that started a command ---------------------------

_THREAD_STARTS_A_COMMAND = """
import sys, threading, time
from flagtree_cpu_build.proc import start_piped
started = []
worker = threading.Thread(target=lambda: started.append(start_piped(["sleep", "300"], cwd=None, env={})))
worker.start()
worker.join()  # the thread that started the command is gone; the tool is not
print(started[0].pid, flush=True)
time.sleep(300)
"""


def test_a_command_outlives_the_thread_that_started_it_but_not_the_tool(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    tool = subprocess.Popen([sys.executable, "-c", _THREAD_STARTS_A_COMMAND], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, MARKER: marker}, start_new_session=True)
    try:
        assert tool.stdout is not None
        child = int(tool.stdout.readline())
        time.sleep(1)  # PR_SET_PDEATHSIG would have fired by now: the starting thread has ended
        assert alive(child), "the command died with the thread that started it"
        os.killpg(tool.pid, signal.SIGKILL)
        tool.wait(timeout=30)
        wait_until(lambda: not alive(child), 30, "the command to end with the tool")
        wait_until(lambda: not marked_processes(MARKER, marker), 30, "the watcher to leave")
    finally:
        if tool.poll() is None:
            os.killpg(tool.pid, signal.SIGKILL)
            tool.wait()
