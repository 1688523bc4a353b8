"""Ctrl-C at every point where CPython can deliver it, inside a `fetch` that unpacks its download as it arrives
(two threads: the download in the main thread, the unpacker in another): the run ends with exit 130, leaves no
half-made folder and no thread, and never waits out its grace for an unpacker that cannot stop.

A fetch once took more than 30 s to stop in CI: a KeyboardInterrupt that lands right after a lock is acquired
inside ``threading.Condition.__enter__`` (or ``Event.wait``, or ``Thread.start``) leaves the lock held by the main
thread, and the unpacker, which needs it, never ends. A real signal cannot be aimed at that moment from outside;
``tests.support.interrupt_points`` raises SIGINT in the thread at each checkpoint in turn (see its docstring), in
the code of the stream (``growing``, ``stream``, ``interrupts``) and the parts of ``threading`` it calls.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

import flagtree_cpu_build.growing as growing
import flagtree_cpu_build.interrupts as interrupts
import flagtree_cpu_build.stages.artifacts.stream as stream
from tests.support.fetching import cache_root, fetch, partial_folders, triton_llvm
from tests.support.interrupt_points import InterruptPoints, files_of
from tests.support.tarballs import llvm_tarball

STREAM_FILES = files_of(growing, stream, interrupts, threading)


def unpackers_left(before: set[threading.Thread], timeout: float = 10) -> list[str]:
    """This run's unpacker threads still there after ``timeout`` (listed while starting, running or stranded);
    ``before``: the threads from before the run (another test's, in this worker process), not this run's."""
    deadline = time.monotonic() + timeout
    while (left := [t.name for t in threading.enumerate() if t.name.startswith("unpack ") and t not in before]) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def fresh(tmp_path: Path) -> None:
    """As before the first fetch: nothing published, nothing downloaded."""
    for folder in (triton_llvm(), cache_root(), tmp_path / "ws"):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(900)  # 150-odd points, well under a second each; an unpacker wedged per point reaches it
def test_ctrl_c_at_any_point_of_a_streamed_fetch_ends_it_with_130_leaving_no_folder_and_no_thread(
        tmp_path: Path) -> None:
    tarball = tmp_path / "llvm.tar.gz"
    tarball.write_bytes(llvm_tarball(size_kb=64).data)
    url = tarball.as_uri()  # a local file goes through the same stream: the main thread copies, another unpacks
    with InterruptPoints(STREAM_FILES).armed() as count:
        assert fetch(tmp_path, url).exit_code == 0
    assert count.count > 50, "the stream's code was not reached"
    problems = []
    for at in range(count.count):
        fresh(tmp_path)
        before = set(threading.enumerate())
        with InterruptPoints(STREAM_FILES, at=at).armed() as point:
            result = fetch(tmp_path, url)
        if point.where is None:  # this run had fewer points than the first (threads interleave differently)
            continue
        stuck = unpackers_left(before)
        found = {"exit": result.exit_code if result.exit_code != 130 else None,
                 "unpacker still there": stuck or None,
                 "half-made folders": [p.name for p in partial_folders()] or None,
                 "waited out its grace": "did not stop within" in result.stderr or None}
        if any(found.values()):
            problems.append(f"interrupted at {point.where}: " + ", ".join(f"{k} {v}" for k, v in found.items() if v)
                            + ("\n" + result.stderr[-600:] if result.exit_code not in (0, 130) else ""))
        if stuck:
            break  # a wedged thread holds the stream's lock: every later point would wait for it too
    assert not problems, "\n".join(problems)
