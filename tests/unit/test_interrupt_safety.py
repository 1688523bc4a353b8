"""A Ctrl-C in the download's thread, at any point CPython can deliver it, never wedges the unpacker's thread:
``GrowingFile``'s lock is never left held (the stall a SIGINT'd `fetch` once showed in CI), a ``Latch`` set by a
worker is always seen, and ``interrupts_deferred`` takes a signal at the end of its block, once.

Threads only (a unit test starts no process); the interrupt is a real SIGINT raised in the main thread at each
checkpoint in turn (``tests.support.interrupt_points``).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

import flagtree_cpu_build.growing as growing
import flagtree_cpu_build.interrupts as interrupts
from flagtree_cpu_build.growing import GrowingFile, StreamAborted
from flagtree_cpu_build.interrupts import Latch, interrupts_deferred
from tests.support.interrupt_points import InterruptPoints, files_of


class Reader(threading.Thread):
    """The unpacker's side: reads the growing file to its end, or until told the download stopped."""

    def __init__(self, growing_file: GrowingFile):
        super().__init__(daemon=True)
        self.growing_file, self.outcome = growing_file, ""

    def run(self) -> None:
        try:
            while self.growing_file.read(100):
                pass
            self.outcome = "end"
        except StreamAborted:
            self.outcome = "aborted"


def download_side(growing_file: GrowingFile, part: Path) -> None:
    """What the download's thread tells the reader for a file written in three chunks."""
    growing_file.follow(part)
    for _ in range(3):
        with open(part, "ab") as out:
            out.write(b"x" * 1000)
        growing_file.grew()
    growing_file.complete()


def run_interrupted_at(at: int | None, part: Path) -> tuple[InterruptPoints, Reader]:
    part.unlink(missing_ok=True)
    growing_file = GrowingFile()
    reader = Reader(growing_file)
    reader.start()
    with InterruptPoints(files_of(growing, threading), at=at).armed() as point:
        try:
            download_side(growing_file, part)
        except KeyboardInterrupt:
            growing_file.abort()  # as download_and_unpack does on the way out
    return point, reader


@pytest.mark.timeout(300)
def test_ctrl_c_at_any_point_of_the_download_side_leaves_the_reader_free_to_end(tmp_path: Path) -> None:
    part = tmp_path / "llvm.part"
    count, reader = run_interrupted_at(None, part)
    reader.join(timeout=30)
    assert reader.outcome == "end" and count.count > 20
    stuck = []
    for at in range(count.count):
        point, reader = run_interrupted_at(at, part)
        reader.join(timeout=10)  # it reads in steps of 0.5 s at most: only a lock it cannot take keeps it
        if reader.is_alive():  # a daemon thread: it goes with the test process
            stuck.append(point.where)
    assert not stuck, f"the reader could not end after a Ctrl-C at: {stuck}"


class Worker(threading.Thread):
    def __init__(self, latch: Latch, go: threading.Semaphore):
        super().__init__(daemon=True)
        self.latch, self.go = latch, go

    def run(self) -> None:
        self.go.acquire()
        self.latch.set()


@pytest.mark.timeout(120)
def test_ctrl_c_at_any_point_of_waiting_on_a_latch_never_wedges_the_worker_or_a_later_wait() -> None:
    for at in range(40):
        latch, go = Latch(), threading.Semaphore(0)
        worker = Worker(latch, go)
        worker.start()
        go.release()
        with InterruptPoints(files_of(interrupts, threading), at=at).armed():
            try:
                latch.wait()
            except KeyboardInterrupt:
                pass
        assert latch.wait(timeout=10), f"the latch was never seen set (interrupt at point {at})"
        worker.join(timeout=10)
        assert not worker.is_alive(), f"the worker could not set the latch (interrupt at point {at})"


def test_a_latch_wait_times_out_while_nobody_sets_it_and_returns_at_once_after() -> None:
    latch = Latch()
    assert latch.wait(timeout=0.01) is False and not latch.is_set()
    latch.set()
    latch.set()  # a second set is harmless
    assert latch.wait() is True and latch.wait(timeout=0) is True


def test_a_signal_inside_a_deferred_block_is_raised_once_as_the_block_ends() -> None:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    reached = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                signal.raise_signal(signal.SIGINT)
                reached.append("after the signal")
        assert reached == ["after the signal"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
        with interrupts_deferred():
            reached.append("a quiet block")
        assert reached[-1] == "a quiet block"
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_deferred_block_in_a_worker_thread_changes_no_handler() -> None:
    seen: list[object] = []

    def work() -> None:
        with interrupts_deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    worker = threading.Thread(target=work)
    worker.start()
    worker.join(timeout=10)
    assert seen == [before]


def _mask_seen_by(start: object) -> set[int]:
    seen: set[int] = set()
    worker = threading.Thread(target=lambda: seen.update(signal.pthread_sigmask(signal.SIG_BLOCK, [])), daemon=True)
    start(worker)  # type: ignore[operator]
    worker.join(10)
    return seen


def test_a_worker_started_by_the_tool_leaves_every_interrupt_to_the_main_thread() -> None:
    """A signal the kernel hands to a worker never wakes the main thread's blocking call (a download's recv from a
    server holding its answer: a SIGINT'd fetch sat there in a stress run): workers must block them."""
    wanted = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    assert wanted <= _mask_seen_by(interrupts.start_thread)
    assert not wanted & _mask_seen_by(threading.Thread.start), "the test's own thread already blocks them"
    assert not wanted & signal.pthread_sigmask(signal.SIG_BLOCK, []), "the main thread was left blocking them"


def test_an_executors_worker_blocks_interrupts_from_its_first_line() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, initializer=interrupts.block_interrupts) as pool:
        mask = pool.submit(lambda: signal.pthread_sigmask(signal.SIG_BLOCK, [])).result(10)
    assert {signal.SIGINT, signal.SIGTERM, signal.SIGHUP} <= mask


def test_an_interrupt_a_finalizer_dropped_is_delivered_again_in_ordinary_code() -> None:
    """A signal handled while a weakref callback runs raises there, and Python drops ("ignores") that exception;
    under load a SIGTERM'd fetch lost its stop that way inside importlib's module-lock callback."""
    import gc
    import sys
    import time
    import weakref

    class Thing:
        pass

    def callback(_ref: object) -> None:
        signal.raise_signal(signal.SIGINT)  # handled at the callback's next check: inside the finalizer

    previous_hook, previous_handler = sys.unraisablehook, signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupts.keep_interrupts_from_finalizers()
        thing = Thing()
        ref = weakref.ref(thing, callback)
        with pytest.raises(KeyboardInterrupt):
            del thing
            gc.collect()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # ordinary code: where the delivered-again interrupt lands
                pass
        assert ref() is None
    finally:
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous_handler)


def test_a_second_stop_waits_for_the_first_unless_a_finalizer_dropped_it() -> None:
    interrupts._Stops.raised, interrupts._Stops.dropped = None, False
    try:
        assert interrupts.first_stop(signal.SIGTERM)
        assert not interrupts.first_stop(signal.SIGTERM), "a second SIGTERM would cut the cleanup short"
        interrupts._Stops.dropped = True
        assert interrupts.first_stop(signal.SIGTERM), "a dropped stop must raise again"
    finally:
        interrupts._Stops.raised, interrupts._Stops.dropped = None, False
