"""`flagtree-cpu sync` under the faults of a fault campaign, each injected for real: a checkout
interrupted half way (Ctrl-C, SIGTERM), a git server frozen before or during a transfer, a
signal sent to the tool alone while git works, the tool's patch state damaged."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import result_of
from tests.support.gitdaemon import GitDaemon
from tests.support.gitworld import GitWorld, git
from tests.support.interrupt import (
    alive,
    arm_busy_filter,
    arm_interrupting_filter,
    descendants,
    processes_in_group,
    send,
    wait_until,
)
from tests.support.patched import CMAKE, patched_workspace, recipe_folder, write_patch
from tests.support.tcpproxy import ThrottledProxy

SLEEF = "third_party/sleef"
FLAGTREE_PATH = "flagos-ai/FlagTree.git"


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path) -> Workspace:
    return new_workspace(world, tmp_path / "ws")


@pytest.fixture
def daemon(world: GitWorld) -> Iterator[GitDaemon]:
    served = GitDaemon(world.root / "bare", env=world.env)
    yield served
    served.close()


def commit_upstream(world: GitWorld, tmp_path: Path, files: dict[str, bytes], branch: str = "triton_v3.3.x",
                    push_to: str | None = None) -> str:
    """A new FlagTree commit on ``branch`` changing several files (pushed to ``push_to`` or ``branch``)."""
    work = tmp_path / f"upstream-{len(list(tmp_path.glob('upstream-*')))}"
    git("clone", "--quiet", "--branch", branch, world["flagtree"].url, work, env=world.env)
    for path, data in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_bytes(data)
    git("add", "-A", cwd=work, env=world.env)
    git("commit", "--quiet", "-m", "upstream change", cwd=work, env=world.env)
    git("push", "--quiet", "origin", f"HEAD:refs/heads/{push_to or branch}", cwd=work, env=world.env)
    return git("rev-parse", "HEAD", cwd=work, env=world.env)


def big_commit(world: GitWorld, tmp_path: Path, megabytes: int = 3) -> str:
    """FlagTree plus a few MB of incompressible data (branch ``big``): a transfer that takes a while."""
    return commit_upstream(world, tmp_path, {"blobs/random.bin": os.urandom(megabytes << 20)}, push_to="big")


def run_interrupted(ws: Workspace, *args: str, sets: tuple[str, ...] = ()) -> tuple[int, str]:
    process = ws.process("sync", *args, sets=sets)
    _out, err = process.communicate(timeout=120)
    return process.returncode, err


def status(repo: Path, world: GitWorld) -> str:
    return git("status", "--porcelain", "--untracked-files=all", cwd=repo, env=world.env)


def assert_left_nothing_running(filter_pid: int, filter_group: int) -> None:
    wait_until(lambda: not alive(filter_pid) and not processes_in_group(filter_group), 10,
               "the interrupted checkout's git and smudge filter to be gone")


# --- 1. a checkout interrupted half way is finished by the next sync ---------------------------------


@pytest.mark.parametrize(("signal_name", "exit_code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_submodule_checkout_interrupted_half_way_is_finished_by_the_next_sync(
        ws: Workspace, tmp_path: Path, signal_name: str, exit_code: int) -> None:
    sleef = ws.flagtree_cpu / SLEEF
    trap = arm_interrupting_filter(Path(os.environ["GIT_CONFIG_GLOBAL"]), tmp_path / "trap", "sleef", 2,
                                   signal_name)
    code, err = run_interrupted(ws)
    assert trap.fired and code == exit_code, err
    assert_left_nothing_running(*trap.filter_pid_and_group)
    # half done: two of sleef's three files written, the third missing, HEAD not at the gitlink
    assert (sleef / "CMakeLists.txt").is_file() and not (sleef / "src/sleef.c").exists()
    assert status(sleef, ws.world)

    result = ws.run("sync", "--json")
    assert result.exit_code == 0, result.stderr
    assert ws.head(sleef) == ws.world["sleef"].commits["first"]
    assert status(sleef, ws.world) == ""
    assert (sleef / "src/sleef.c").is_file()
    [action] = [a for a in result_of(result.stdout)["actions"] if a["subject"] == "flagtree-cpu"]
    assert action["status"] == "updated" and f"the interrupted checkout of {SLEEF} finished" in action["detail"]


def test_interrupted_submodule_checkout_with_a_user_edit_is_refused_naming_the_file(
        ws: Workspace, tmp_path: Path) -> None:
    sleef = ws.flagtree_cpu / SLEEF
    trap = arm_interrupting_filter(Path(os.environ["GIT_CONFIG_GLOBAL"]), tmp_path / "trap", "sleef", 2, "SIGTERM")
    code, err = run_interrupted(ws)
    assert trap.fired and code == 143, err
    (sleef / "README.md").write_text("my notes about sleef\n")  # the user edits a half-written file

    result = ws.run("sync")
    assert result.exit_code == 3
    assert "left half checked out by a flagtree-cpu run that was interrupted" in result.stderr
    assert "README.md" in result.stderr and "CMakeLists.txt" not in result.stderr  # only the user's file
    assert (sleef / "README.md").read_text() == "my notes about sleef\n"
    assert ws.head(sleef) != ws.world["sleef"].commits["first"]  # nothing was moved over it


def test_half_checked_out_submodule_does_not_block_moving_its_parent(ws: Workspace, tmp_path: Path) -> None:
    trap = arm_interrupting_filter(Path(os.environ["GIT_CONFIG_GLOBAL"]), tmp_path / "trap", "sleef", 2, "SIGTERM")
    code, err = run_interrupted(ws)
    assert trap.fired and code == 143, err
    newer = ws.world.advance("flagtree-cpu", "main", "README.md", "main moved on\n")

    result = ws.run("sync", "--update")  # flagtree-cpu moves to the new tip, then sleef is finished
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree_cpu) == newer
    assert ws.head(ws.flagtree_cpu / SLEEF) == ws.world["sleef"].commits["first"]
    assert status(ws.flagtree_cpu / SLEEF, ws.world) == ""


MOVED_FILES = {"README.md": b"# FlagTree fixture\n\nmoved upstream\n", "docs/a.md": b"a\n", "docs/b.md": b"b\n",
               "docs/c.md": b"c\n"}  # checked out in this order: the trap stops it after README.md and docs/a.md


def test_move_to_a_new_pin_interrupted_half_way_is_finished_by_the_next_sync(ws: Workspace, tmp_path: Path) -> None:
    assert ws.run("sync").exit_code == 0
    old = ws.head(ws.flagtree)
    new = commit_upstream(ws.world, tmp_path, MOVED_FILES)
    trap = arm_interrupting_filter(Path(os.environ["GIT_CONFIG_GLOBAL"]), tmp_path / "trap", "FlagTree", 2,
                                   "SIGTERM")
    code, err = run_interrupted(ws, sets=(f"sources.flagtree.commit={new}",))
    assert trap.fired and code == 143, err
    assert_left_nothing_running(*trap.filter_pid_and_group)
    assert ws.head(ws.flagtree) == old and (ws.flagtree / "docs/a.md").is_file()
    assert not (ws.flagtree / "docs/b.md").exists()

    result = ws.run("sync", sets=(f"sources.flagtree.commit={new}",))
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree) == new
    assert git("status", "--porcelain", "--untracked-files=no", cwd=ws.flagtree, env=ws.world.env) == ""
    assert (ws.flagtree / "docs/c.md").read_text() == "c\n"
    assert "an interrupted checkout finished" in result.stderr


def test_interrupted_move_never_overwrites_a_file_the_user_put_in_its_way(ws: Workspace, tmp_path: Path) -> None:
    assert ws.run("sync").exit_code == 0
    old = ws.head(ws.flagtree)
    new = commit_upstream(ws.world, tmp_path, MOVED_FILES)
    trap = arm_interrupting_filter(Path(os.environ["GIT_CONFIG_GLOBAL"]), tmp_path / "trap", "FlagTree", 2, "SIGINT")
    code, err = run_interrupted(ws, sets=(f"sources.flagtree.commit={new}",))
    assert trap.fired and code == 130, err
    # untracked, where the interrupted checkout had not written yet: a forced checkout would overwrite it
    (ws.flagtree / "docs/c.md").write_text("my own notes\n")

    result = ws.run("sync", sets=(f"sources.flagtree.commit={new}",))
    assert result.exit_code == 3
    assert "docs/c.md" in result.stderr and "docs/a.md" not in result.stderr
    assert (ws.flagtree / "docs/c.md").read_text() == "my own notes\n"
    assert ws.head(ws.flagtree) == old


def test_checkout_git_refused_is_not_taken_for_an_interrupted_one(ws: Workspace) -> None:
    assert ws.run("sync").exit_code == 0
    readme = ws.flagtree / "README.md"  # the tip commit changes README.md too
    readme.write_text("conflicting local edit\n")
    tip = ws.world["flagtree"].commits["tip"]
    refused = ws.run("sync", "--allow-dirty", sets=(f"sources.flagtree.commit={tip}",))
    assert refused.exit_code == 3 and "git refused to move" in refused.stderr
    again = ws.run("sync", sets=(f"sources.flagtree.commit={tip}",))
    assert again.exit_code == 3
    assert "has changes to 1 tracked file" in again.stderr and "interrupted" not in again.stderr
    assert readme.read_text() == "conflicting local edit\n"


# --- 2. a stalled server is stopped, named, and the next sync succeeds ------------------------------------


# A stalled transfer that is never stopped would hang the run: the timeout mark bounds it (only a hang reaches it;
# no test asserts how fast the stop came, a loaded machine stretches it).
@pytest.mark.timeout(120)
def test_server_frozen_before_the_first_byte_is_exit_3_naming_the_url(
        ws: Workspace, daemon: GitDaemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAGTREE_CPU_STALL_TIMEOUT", "2")
    url = daemon.url(FLAGTREE_PATH)
    daemon.freeze()
    result = ws.run("sync", sets=(f"sources.flagtree.url={url}",))
    assert result.exit_code == 3, result.stderr
    assert f"no data from {url} for 2 s; the server stalled" in result.stderr
    assert "FLAGTREE_CPU_STALL_TIMEOUT" in result.stderr and "Traceback" not in result.stderr
    assert not ws.flagtree.exists() and not list(ws.root.glob(".*partial"))

    daemon.thaw()
    again = ws.run("sync", sets=(f"sources.flagtree.url={url}",))
    assert again.exit_code == 0, again.stderr


@pytest.mark.timeout(120)
def test_transfer_frozen_mid_clone_is_stopped_and_the_next_sync_succeeds(
        ws: Workspace, daemon: GitDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = big_commit(ws.world, tmp_path)
    proxy = ThrottledProxy(daemon.port, hold_after=400_000)  # the pack flows, then the link freezes mid-way
    url = proxy.url(FLAGTREE_PATH)
    sets = (f"sources.flagtree.url={url}", f"sources.flagtree.commit={big}")
    monkeypatch.setenv("FLAGTREE_CPU_STALL_TIMEOUT", "2")
    process = ws.process("sync", sets=sets)
    try:
        assert proxy.holding.wait(60), f"only {proxy.bytes_to_client} bytes relayed"
        _out, err = process.communicate(timeout=60)
        assert process.returncode == 3, err
        assert f"no data from {url} for 2 s; the server stalled" in err
        assert not list(ws.root.glob(".*partial")) and not ws.flagtree.exists()

        proxy.thaw()
        result = ws.run("sync", sets=sets)
        assert result.exit_code == 0, result.stderr
        assert ws.head(ws.flagtree) == big
    finally:
        process.kill()
        proxy.close()


@pytest.mark.timeout(120)
def test_stalled_fetch_of_a_new_pin_is_stopped(ws: Workspace, daemon: GitDaemon, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    url = daemon.url(FLAGTREE_PATH)
    assert ws.run("sync", sets=(f"sources.flagtree.url={url}",)).exit_code == 0
    new = commit_upstream(ws.world, tmp_path, {"docs/new.md": b"new\n"})
    monkeypatch.setenv("FLAGTREE_CPU_STALL_TIMEOUT", "2")
    daemon.freeze()
    result = ws.run("sync", sets=(f"sources.flagtree.url={url}", f"sources.flagtree.commit={new}"))
    assert result.exit_code == 3, result.stderr
    assert f"no data from {url} for 2 s" in result.stderr
    daemon.thaw()
    again = ws.run("sync", sets=(f"sources.flagtree.url={url}", f"sources.flagtree.commit={new}"))
    assert again.exit_code == 0, again.stderr
    assert ws.head(ws.flagtree) == new


@pytest.mark.timeout(120)
def test_stalled_submodule_clone_is_stopped_and_the_next_sync_finishes_it(
        ws: Workspace, daemon: GitDaemon, monkeypatch: pytest.MonkeyPatch) -> None:
    # sleef alone through the daemon: the more specific insteadOf rule wins
    with open(os.environ["GIT_CONFIG_GLOBAL"], "a") as config:
        config.write(f'[url "git://127.0.0.1:{daemon.port}/shibatch/"]\n\tinsteadOf = https://github.com/shibatch/\n')
    monkeypatch.setenv("FLAGTREE_CPU_STALL_TIMEOUT", "2")
    daemon.freeze()
    result = ws.run("sync")
    assert result.exit_code == 3, result.stderr
    assert "no data from https://github.com/shibatch/sleef for 2 s" in result.stderr
    daemon.thaw()
    again = ws.run("sync")
    assert again.exit_code == 0, again.stderr
    assert ws.head(ws.flagtree_cpu / SLEEF) == ws.world["sleef"].commits["first"]


def test_quiet_but_busy_submodule_checkout_is_not_taken_for_a_stall(
        ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arm_busy_filter(Path(os.environ["GIT_CONFIG_GLOBAL"]), tmp_path / "busy", "sleef", 1.0)
    monkeypatch.setenv("FLAGTREE_CPU_STALL_TIMEOUT", "1")  # sleef's 3 files take 3 s without a word from git
    result = ws.run("sync")
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree_cpu / SLEEF) == ws.world["sleef"].commits["first"]


# --- 3. a signal to the tool alone stops its git too ----------------------------------------------------


@pytest.mark.parametrize(("signal_name", "exit_code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_signal_to_the_tool_alone_stops_its_git_and_removes_the_partial_clone(
        ws: Workspace, daemon: GitDaemon, tmp_path: Path, signal_name: str, exit_code: int) -> None:
    big = big_commit(ws.world, tmp_path)
    proxy = ThrottledProxy(daemon.port, hold_after=200_000)  # a clone caught mid-way, writing into the partial folder
    sets = (f"sources.flagtree.url={proxy.url(FLAGTREE_PATH)}", f"sources.flagtree.commit={big}")
    process = ws.process("sync", sets=sets)
    try:
        assert proxy.holding.wait(60), f"only {proxy.bytes_to_client} bytes relayed"
        gits = [(pid, group) for pid, group, name in descendants(process.pid) if name.startswith("git")]
        assert gits and [p for p in ws.root.glob(".FlagTree.flagtree-cpu-partial-*") if (p / "owner.json").is_file()]
        send(process.pid, signal_name)  # the tool alone, as CI runners and `timeout` do
        _out, err = process.communicate(timeout=30)
        assert process.returncode == exit_code, err
        for pid, group in gits:
            assert not alive(pid) and not processes_in_group(group), f"git {pid} outlived the tool"
        assert not list(ws.root.glob(".FlagTree.flagtree-cpu-partial*")) and not ws.flagtree.exists()
    finally:
        process.kill()
        proxy.close()
    resumed = (f"sources.flagtree.url={daemon.url(FLAGTREE_PATH)}", f"sources.flagtree.commit={big}")
    result = ws.run("sync", sets=resumed)
    assert result.exit_code == 0, result.stderr


# --- 4. damaged patch state is named, or rebuilt where the lock proves it ---------------------------------


@pytest.fixture
def patched(world: GitWorld, tmp_path: Path) -> Workspace:
    folder = recipe_folder(tmp_path / "recipes")
    write_patch(world, tmp_path / "patch-work", folder, "cmake.patch", "add_subdirectory(Triton)\n# patched\n")
    ws = patched_workspace(world, tmp_path / "ws", folder, "cmake.patch")
    ws.recipe_folder = folder  # type: ignore[attr-defined]
    assert ws.run("sync").exit_code == 0
    return ws


def patch_copy(ws: Workspace) -> Path:
    return ws.root / ".flagtree-cpu/patches/flagtree/cmake.patch"


def test_truncated_patch_copy_is_rebuilt_when_the_lock_proves_its_text(patched: Workspace) -> None:
    copy = patch_copy(patched)
    text = copy.read_bytes()
    copy.write_bytes(text[: len(text) // 2])
    tip = patched.world["flagtree"].commits["tip"]
    result = patched.run("sync", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 0, result.stderr  # reverted, moved, applied again: not "dirty"
    assert patched.head(patched.flagtree) == tip
    assert (patched.flagtree / CMAKE).read_text() == "add_subdirectory(Triton)\n# patched\n"
    assert copy.read_bytes() == text


def test_truncated_copy_of_a_patch_the_lock_cannot_vouch_for_is_named(patched: Workspace, world: GitWorld,
                                                                      tmp_path: Path) -> None:
    copy = patch_copy(patched)
    copy.write_bytes(copy.read_bytes()[:60])
    # the recipe's patch has changed since: which text was applied cannot be proven
    write_patch(world, tmp_path / "patch-work-2", patched.recipe_folder, "cmake.patch",  # type: ignore[attr-defined]
                "add_subdirectory(Triton)\n# version 2\n")
    result = patched.run("sync")
    assert result.exit_code == 3
    assert f"the patch state of source flagtree is damaged: {copy} is truncated or changed" in result.stderr
    assert "git -C" in result.stderr and "Traceback" not in result.stderr


def test_patch_copy_replaced_by_a_folder_is_named_not_a_crash(patched: Workspace) -> None:
    copy = patch_copy(patched)
    copy.unlink()
    copy.mkdir()
    (copy / "something").write_text("not ours to delete\n")
    result = patched.run("sync")
    assert result.exit_code == 3, result.stderr
    assert f"{copy} is a folder" in result.stderr and "rm -r" in result.stderr
    assert (copy / "something").read_text() == "not ours to delete\n"


def test_patch_state_folder_replaced_by_a_file_is_named_not_a_crash(patched: Workspace) -> None:
    state = patch_copy(patched).parent
    for child in state.iterdir():
        child.unlink()
    state.rmdir()
    state.write_text("a file where a folder belongs\n")
    result = patched.run("sync")
    assert result.exit_code == 3, result.stderr
    assert f"{state} is not a folder" in result.stderr
    assert state.read_text() == "a file where a folder belongs\n"
