"""What an interrupted checkout leaves inside files and git's own state, and the next sync's judgement of it:
a file git was stopped in the middle of writing (empty, or a byte-prefix of its blob) is the tool's own
debris and is repaired without asking, while a user's edit is still protected; git's ``index.lock`` left by a
git that was killed outright is cleared in a checkout the tool was moving, and a live git holding it is
waited for or named. Real git, real signals, real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld, git
from tests.support.interrupt import arm_cutting_filter, arm_interrupting_filter, wait_until

SLEEF = "third_party/sleef"


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path) -> Workspace:
    return new_workspace(world, tmp_path / "ws")


def gitconfig() -> Path:
    return Path(os.environ["GIT_CONFIG_GLOBAL"])


def run_process(ws: Workspace, *args: str, sets: tuple[str, ...] = ()) -> tuple[int, str]:
    process = ws.process("sync", *args, sets=sets)
    _out, err = process.communicate(timeout=120)
    return process.returncode, err


def blob(world: GitWorld, repo: str, label: str, path: str) -> bytes:
    """The bytes of ``path`` at a commit of a repository of the world."""
    return subprocess.run(["git", "cat-file", "blob", f"{world[repo].commits[label]}:{path}"], cwd=world[repo].bare,
                          env=world.env, capture_output=True, check=True).stdout


def clean(repo: Path, world: GitWorld) -> bool:
    return git("status", "--porcelain", "--untracked-files=no", cwd=repo, env=world.env) == ""


# --- a file git was stopped in the middle of writing ----------------------------------------------------------


@pytest.mark.parametrize("cut", [0, 7], ids=["empty", "prefix"])
def test_ctrl_c_inside_a_file_git_was_writing_is_repaired_by_the_next_sync(
        ws: Workspace, tmp_path: Path, cut: int) -> None:
    sleef = ws.flagtree_cpu / SLEEF
    trap = arm_cutting_filter(gitconfig(), tmp_path / "trap", "sleef", 1, cut, "SIGINT")
    code, err = run_process(ws)
    assert trap.fired and code in (130, 3), err  # 3 when the tool saw git fail before the Ctrl-C
    cut_file = sleef / trap.cut_path
    assert cut_file.read_bytes() == blob(ws.world, "sleef", "first", trap.cut_path)[:cut]  # git's own half write

    result = ws.run("sync", "--json")
    assert result.exit_code == 0, result.stderr
    assert ws.head(sleef) == ws.world["sleef"].commits["first"] and clean(sleef, ws.world)
    assert cut_file.read_bytes() == blob(ws.world, "sleef", "first", trap.cut_path)
    [action] = [a for a in result_of(result.stdout)["actions"] if a["subject"] == "flagtree-cpu"]
    assert f"the interrupted checkout of {SLEEF} finished" in action["detail"]


def test_a_user_edit_of_a_file_git_was_cut_off_writing_is_still_refused(ws: Workspace, tmp_path: Path) -> None:
    sleef = ws.flagtree_cpu / SLEEF
    trap = arm_cutting_filter(gitconfig(), tmp_path / "trap", "sleef", 1, 0, "SIGINT")
    code, err = run_process(ws)
    assert trap.fired and code in (130, 3), err
    (sleef / trap.cut_path).write_text("my notes about sleef\n")  # not a prefix of what git was writing

    result = ws.run("sync")
    assert result.exit_code == 3
    assert "changes that did not come from it" in result.stderr and trap.cut_path in result.stderr
    assert (sleef / trap.cut_path).read_text() == "my notes about sleef\n"


def test_a_prefix_of_a_file_in_a_checkout_the_tool_was_not_moving_is_the_users(ws: Workspace) -> None:
    assert ws.run("sync").exit_code == 0
    readme = ws.flagtree / "README.md"
    readme.write_bytes(readme.read_bytes()[:5])  # the user cut it: no checkout of the tool's was under way
    tip = ws.world["flagtree"].commits["tip"]
    result = ws.run("sync", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 3 and "has changes to 1 tracked file" in result.stderr
    assert len(readme.read_bytes()) == 5


# --- git's index.lock --------------------------------------------------------------------------------------


@pytest.mark.parametrize("repo_name", ["FlagTree", "sleef"])
def test_a_git_killed_outright_mid_checkout_leaves_a_lock_the_next_sync_clears(
        ws: Workspace, tmp_path: Path, repo_name: str) -> None:
    sets: tuple[str, ...] = ()
    if repo_name == "FlagTree":  # a move to a new pin
        assert ws.run("sync").exit_code == 0
        sets = (f"sources.flagtree.commit={ws.world['flagtree'].commits['tip']}",)
    repo = ws.flagtree if repo_name == "FlagTree" else ws.flagtree_cpu / SLEEF
    trap = arm_interrupting_filter(gitconfig(), tmp_path / "trap", repo_name, 0, "SIGKILL", target="git", hold_s=0)
    code, err = run_process(ws, sets=sets)
    assert trap.fired and code == 3, err  # git died of SIGKILL (the OOM killer, say): a failed command
    lock = Path(git("rev-parse", "--absolute-git-dir", cwd=repo, env=ws.world.env)) / "index.lock"
    assert lock.is_file()  # git had no chance to remove it

    result = ws.run("sync", sets=sets)
    assert result.exit_code == 0, result.stderr
    assert not lock.exists() and clean(repo, ws.world)
    assert "an interrupted checkout finished" in result.stderr or "interrupted checkout of" in result.stderr


HOLD_THE_LOCK = ("import sys, time; f = open(sys.argv[1], 'x'); print('held', flush=True); "
                 "time.sleep(float(sys.argv[2]))")


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for holder in started:
        holder.kill()
        holder.wait()


def hold(holders: list[subprocess.Popen], lock: Path, seconds: float) -> subprocess.Popen:
    """A process holding ``lock`` open, as a git working in that repository does."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(lock), str(seconds)], stdout=subprocess.PIPE,
                              text=True)
    holders.append(holder)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_git_still_working_in_a_checkout_is_named_not_raced(ws: Workspace, holders) -> None:
    assert ws.run("sync").exit_code == 0
    lock = ws.flagtree / ".git/index.lock"
    holder = hold(holders, lock, 3600)
    tip = ws.world["flagtree"].commits["tip"]
    result = ws.run("sync", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 8, result.stderr
    assert f"is still being written by pid {holder.pid} (" in result.stderr and f"kill {holder.pid}" in result.stderr
    assert holder.poll() is None and lock.exists()  # its lock is not ours to take


def test_a_git_that_finishes_its_work_in_a_checkout_is_waited_for(ws: Workspace, holders) -> None:
    assert ws.run("sync").exit_code == 0
    lock = ws.flagtree / ".git/index.lock"
    holder = hold(holders, lock, 2)
    wait_until(lambda: lock.exists(), 10, "the lock")

    def release_after_exit() -> None:  # git removes its lock as it leaves
        holder.wait()
        lock.unlink()

    threading.Thread(target=release_after_exit, daemon=True).start()
    tip = ws.world["flagtree"].commits["tip"]
    result = ws.run("sync", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 0, result.stderr
    assert f"waiting for pid {holder.pid} (" in result.stderr
    assert ws.head(ws.flagtree) == tip
