"""Ctrl-C between two threads: the few lines a KeyboardInterrupt must not cut, and a "done" it cannot wedge.

CPython runs a signal's Python handler (Ctrl-C's KeyboardInterrupt, the CLI's SIGTERM handler) in the main thread
at its next check: a Python function's entry, or right after a C function returns. So the interrupt can land
right after a lock was acquired and before the code that releases it is in force. ``threading.Condition`` enters
and leaves its lock through Python-level ``__enter__``/``__exit__``: an interrupt there leaves the lock held by
the main thread. ``threading.Event`` is built on such a Condition, and ``Thread.start`` waits on one: after an
unlucky Ctrl-C the worker blocks for good in ``set()``, and the main thread's next ``wait()`` blocks on itself
(one run of `fetch` took more than 30 s to stop that way). Hence:

- ``Latch``: a worker's "done", set once, waited on by the main thread with nothing it must release afterwards;
- ``interrupts_deferred()``: around the lines that start a worker, so a Ctrl-C among them is taken right after
  them, when the caller's cleanup knows what exists;
- ``keep_interrupts_from_finalizers()``: a signal's handler runs at the main thread's next check, which may be
  inside a garbage collector's finalizer or a weakref callback (importlib's module-lock callback, urllib3 closing
  a pool); an exception raised there is "ignored" — printed and dropped — and the stop with it: a SIGTERM'd
  `fetch` then went on into a download's ``recv`` and waited for a server holding its answer (seen under load:
  "Exception ignored in: <function _get_module_lock.<locals>.cb>", Terminated: 15). The hook sees such a dropped
  interrupt and delivers it to the main thread again, at its next check in ordinary code; ``first_stop`` lets the
  CLI's SIGTERM handler raise once more for a stop that was dropped, and only then;
- ``start_thread()``: every worker is started that way, and so blocks SIGINT, SIGTERM and SIGHUP for good (a
  thread inherits the signal mask of the thread that starts it). The kernel gives a signal sent to the process to
  any thread that does not block it; one taken by a worker only sets Python's flag, and a main thread blocked in
  a system call (a download's ``recv`` from a server that holds its answer) is not woken by it: a SIGINT'd
  `fetch` sat there until the test gave up (seen under load, the stacks taken with faulthandler). With the
  workers blocking them, every such signal goes to the main thread and interrupts its system call.

Locks of our own are entered with ``with lock:`` on the C lock itself, whose ``__enter__``/``__exit__`` run no
Python code: the interrupt comes before the acquire or after the release, never between.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


class _Stops:
    """The stop asked by a signal whose exception is on its way out of the main thread (None: none yet), and
    whether a finalizer dropped it."""

    raised: int | None = None
    dropped = False
    in_hook = False  # the hook that delivers a dropped one again is still running in the main thread


def first_stop(signum: int) -> bool:
    """For a signal handler that raises: True for the first stop, and for a stop whose exception a finalizer
    dropped; False for a second signal while the first one's cleanup runs (it must not cut the cleanup short)."""
    if _Stops.raised is not None and not _Stops.dropped:
        return False
    _Stops.raised, _Stops.dropped = signum, False
    return True


def _deliver_again(signum: int) -> None:
    block_interrupts()
    deadline = time.monotonic() + 5
    while _Stops.in_hook and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.01)  # the hook's own return, and the finalizer's
    signal.pthread_kill(threading.main_thread().ident or 0, signum)


def keep_interrupts_from_finalizers() -> None:
    """Install the hook that delivers again, in the main thread, an interrupt a finalizer dropped (see above)."""
    previous = sys.unraisablehook
    if getattr(previous, "keeps_interrupts", False):
        return

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if not isinstance(exc, KeyboardInterrupt) or threading.current_thread() is not threading.main_thread():
            previous(unraisable)
            return
        _Stops.dropped, _Stops.in_hook = True, True
        # not from here: a signal raised now would be handled inside this hook, and dropped again; a worker sends
        # it to the main thread once the hook has returned (it also wakes a system call the main thread is in)
        threading.Thread(target=_deliver_again, args=(getattr(exc, "signum", signal.SIGINT),), daemon=True,
                         name="interrupt delivered again").start()
        _Stops.in_hook = False  # a plain store, then the return: no check comes between

    hook.keeps_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


# the signals whose handlers raise in the main thread: Ctrl-C, and the CLI's SIGTERM/SIGHUP (errors.Terminated)
_DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Latch:
    """Set once, by the one thread that finishes; waited on by another. Neither side can be wedged by an
    interrupt: the waiter takes a C lock the setter released and never has to give it back (an interrupt right
    after it took it changes nothing, as the flag is already true), and ``set`` never waits."""

    def __init__(self) -> None:
        self._flag = False
        self._gate = threading.Lock()
        self._gate.acquire()  # released by set(): the waiter's acquire returns then

    def set(self) -> None:
        if not self._flag:
            self._flag = True  # before the release: a waiter that gets the gate sees it
            self._gate.release()

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; False if ``timeout`` seconds passed first."""
        if not self._flag and self._gate.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            self._gate.release()  # for the next waiter
        return self._flag


class _Deferral:
    def __init__(self) -> None:
        self.active = True
        self.arrived: list[int] = []
        self.saved: dict[int, Any] = {}

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.active:
            self.arrived.append(signum)
        else:  # the section has ended but restoring the handlers was cut short: behave as they would
            self.saved[signum](signum, frame)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """In the main thread: SIGINT, SIGTERM and SIGHUP arriving inside the block are handled as it ends (the first
    one, by the handler it would have met). Elsewhere (a worker thread, which no signal handler raises in) a
    no-op. Keep the block short: it is a few lines of setup, never a wait."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    deferral = _Deferral()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)  # inherited by any thread started in the block
    try:
        for signum in _DEFERRED:
            if callable(signal.getsignal(signum)):  # SIG_IGN and SIG_DFL (no handler of Python's) stay as they are
                deferral.saved[signum] = signal.signal(signum, deferral.handler)
        yield
    finally:
        # unblocked first: a signal held pending meanwhile is delivered now and met by the deferral's handler
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        deferral.active = False  # a plain store: no interrupt can come between it and the block's end
        for signum, handler in deferral.saved.items():
            signal.signal(signum, handler)
        if deferral.arrived:
            signal.raise_signal(deferral.arrived[0])  # sent to this thread: its handler runs before this returns


def start_thread(thread: threading.Thread) -> None:
    """Start a worker that never takes SIGINT, SIGTERM or SIGHUP (they stay the main thread's: see above), with a
    Ctrl-C during the start taken right after it."""
    with interrupts_deferred():
        thread.start()


def block_interrupts() -> None:
    """For a worker the tool does not start itself (a ThreadPoolExecutor's ``initializer``): from its first line,
    SIGINT, SIGTERM and SIGHUP go to the main thread instead."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
