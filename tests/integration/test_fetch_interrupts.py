"""Half-unpacked trees: a run stopped while it unpacks (Ctrl-C, SIGTERM — in `fetch` and in `setup`, whose
download runs in a worker thread — or SIGKILL) must not leave its partial folder under ~/.triton/llvm for
good. Real processes, real signals, a download the server holds half-way (a gate) so the signal lands
mid-unpack; and folders that look like ours but are not provably abandoned are left alone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import new_workspace
from tests.support.fetching import (
    URL_PATH,
    dest,
    fetch,
    fetch_process,
    partial_folders,
    stacks_of_hung,
    triton_llvm,
    unpacked_files,
    wait_for,
)
from tests.support.gitworld import GitWorld
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.tarballs import TOP, Tarball, llvm_tarball


def held_halfway() -> Faults:
    """The first half of the 787 KB tarball, then nothing until the server closes: a run is caught unpacking."""
    return Faults(hold_after=400_000)


@pytest.fixture
def tarball() -> Tarball:
    return llvm_tarball()


def trickle(faults: Faults) -> None:
    """Open the gate to a trickle: setup's download runs in a worker thread that stops at its next progress update,
    which an answer held shut would not give it (setup would wait out its 15 s grace for the worker); at 32 KB/s
    the rest takes 12 s, so the signal is handled long before the last byte."""
    faults.release(rate=32 * 1024)


def stop_while_unpacking(process: subprocess.Popen, sig: signal.Signals,
                         also: Callable[[], object] = lambda: True,
                         then: Callable[[], object] = lambda: None) -> tuple[int, str]:
    try:
        wait_for(lambda: unpacked_files() and also(), 30, "the first unpacked file")
    except AssertionError:
        process.kill()
        raise
    process.send_signal(sig)
    then()
    try:
        _out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        raise stacks_of_hung(process, 60) from None
    return process.returncode, err


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_fetch_stopped_while_unpacking_leaves_no_partial_folder(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball, sig: signal.Signals, code: int) -> None:
    url = http_server.serve(URL_PATH, tarball.data, held_halfway())
    returncode, err = stop_while_unpacking(fetch_process(tmp_path, url), sig)
    assert returncode == code, err
    assert "Traceback" not in err and partial_folders() == [] and not dest().exists()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_setup_stopped_while_unpacking_leaves_no_partial_folder(
        world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball,
        sig: signal.Signals, code: int) -> None:
    faults = held_halfway()
    url = http_server.serve(URL_PATH, tarball.data, faults)
    ws = new_workspace(world, tmp_path / "ws", always_set=(f"artifacts.llvm.url={url}",))
    submodule = ws.flagtree_cpu / "third_party" / "sleef" / ".git"

    def sources_done() -> bool:  # the main thread now waits for the download's worker thread
        if submodule.exists():
            time.sleep(1.0)
            return True
        return False

    process = ws.process("setup", "--skip-build", "--ignore-host")
    returncode, err = stop_while_unpacking(process, sig, also=sources_done, then=lambda: trickle(faults))
    assert returncode == code, err
    assert "Traceback" not in err and partial_folders() == [] and not dest().exists()


def test_a_partial_folder_left_by_sigkill_is_removed_by_the_next_run(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data, held_halfway())  # held once: the next run gets it all
    process = fetch_process(tmp_path, url)
    returncode, _err = stop_while_unpacking(process, signal.SIGKILL)
    assert returncode == -signal.SIGKILL
    [left] = partial_folders()
    assert left.name.startswith(f".{TOP}.flagtree-cpu-partial-{process.pid}") and (left / "owner.json").is_file()

    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    assert f"removed {left}" in result.stderr and "no longer running" in result.stderr
    assert partial_folders() == [] and (dest() / "bin/clang").read_bytes() == tarball.member("bin/clang")


OWNER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from flagtree_cpu_build.partials import PartialFolder
    folder = PartialFolder.create(Path(sys.argv[1]))
    (folder.path / "tree").mkdir()
    (folder.path / "tree" / "half-written").write_text("x")
    print(folder.path, flush=True)
    time.sleep(120)
""")


def test_a_partial_folder_of_a_live_process_is_left_alone_until_it_is_gone(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    # another flagtree-cpu run unpacking into the same ~/.triton/llvm (another workspace, another artifact)
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(triton_llvm() / "llvm-other-build")],
                             stdout=subprocess.PIPE, text=True)
    try:
        theirs = Path(owner.stdout.readline().strip())
        url = http_server.serve(URL_PATH, tarball.data)
        result = fetch(tmp_path, url)
        assert result.exit_code == 0, result.stderr
        assert (theirs / "tree" / "half-written").is_file() and str(theirs) not in result.stderr
    finally:
        owner.kill()
        owner.wait()
    again = fetch(tmp_path, url)  # its owner is gone now
    assert again.exit_code == 0 and f"removed {theirs}" in again.stderr, again.stderr
    assert not theirs.exists()


def record(pid: int, **changes: object) -> str:
    from flagtree_cpu_build.partials import identity

    return json.dumps({**identity(pid), **changes})


def test_folders_that_are_not_provably_abandoned_partials_of_ours_are_left_alone(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that is not running any more
    llvm = triton_llvm()
    folders = {
        "no record": llvm / f".{TOP}.flagtree-cpu-partial-{dead.pid}",
        "no leading dot": llvm / f"{TOP}.flagtree-cpu-partial-{dead.pid}",
        "another machine": llvm / f".llvm-x.flagtree-cpu-partial-{dead.pid}",
        "not our record": llvm / f".llvm-y.flagtree-cpu-partial-{dead.pid}",
        "live process": llvm / f".llvm-z.flagtree-cpu-partial-{os.getpid()}",
        "user backup": llvm / f".{TOP}.flagtree-cpu-old-mine",
    }
    for path in folders.values():
        (path / "tree").mkdir(parents=True)
        (path / "tree" / "keep-me").write_text("user data\n")
    (folders["another machine"] / "owner.json").write_text(record(dead.pid, host=socket.gethostname() + "-other"))
    (folders["not our record"] / "owner.json").write_text(json.dumps({"pid": dead.pid}))
    # a record of this test's own process (running, same start time), its lock not held: still alive
    (folders["live process"] / "owner.json").write_text(record(os.getpid()))
    url = http_server.serve(URL_PATH, tarball.data)
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    for what, path in folders.items():
        assert (path / "tree" / "keep-me").read_text() == "user data\n", what
    # the one an older flagtree-cpu left (no record, beside our tree) is named with the command to remove it
    assert f"rm -rf {folders['no record']}" in result.stderr


def test_a_record_whose_pid_now_belongs_to_another_process_counts_as_gone(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    folder = triton_llvm() / f".{TOP}.flagtree-cpu-partial-{os.getpid()}"
    (folder / "tree").mkdir(parents=True)
    # our pid, but a start time it never had: the process that wrote this is gone, the pid reused (by us)
    (folder / "owner.json").write_text(record(os.getpid(), start=1))
    url = http_server.serve(URL_PATH, tarball.data)
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    assert not folder.exists() and f"removed {folder}" in result.stderr


def test_a_replaced_tree_an_older_version_left_is_removed(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                         tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    assert fetch(tmp_path, url).exit_code == 0
    old = triton_llvm() / f".{TOP}.flagtree-cpu-old"  # older versions renamed the tree here to replace it
    os.rename(dest(), old)
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    assert not old.exists() and f"removed {old}" in result.stderr and partial_folders() == []
