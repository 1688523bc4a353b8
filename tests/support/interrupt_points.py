"""Ctrl-C at every point where CPython could deliver it, inside chosen code.

A signal's Python handler does not run the instant the signal arrives: CPython notes it and runs the handler
(``KeyboardInterrupt`` for SIGINT) at its next check, which comes at a Python function's entry and right after a
C function returns (a lock's ``acquire``, a ``write``). ``sys.setprofile`` reports exactly those moments (the
``call`` and ``c_return`` events), so a hook that raises the real signal in the thread at the n-th of them
(``signal.raise_signal``: delivered to this thread, handled at once) interrupts the code as a Ctrl-C landing there
would, without mocking anything. Counting only events in the files named (the code under test and what it calls
of ``threading``) keeps a sweep over every point short. An event in a file of the standard library counts only when
the code under test is among its callers: a garbage collector's finalizer (urllib3 closing a pool through
``queue``/``threading``) runs at arbitrary moments, and an interrupt there lands in whatever code was running then
(once, in CI, in the recipe loader), not in the code under test.
"""

from __future__ import annotations

import signal
import sys
import sysconfig
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_CHECKPOINTS = ("call", "c_return")
_STDLIB = sysconfig.get_paths()["stdlib"]
_CALLERS_LOOKED_AT = 40


class InterruptPoints:
    """Counts the checkpoints of the calling thread in frames of ``files``; ``at``: raise SIGINT at that one."""

    def __init__(self, files: Iterable[str], at: int | None = None):
        self.files = frozenset(files)
        self.own = frozenset(f for f in self.files if not f.startswith(_STDLIB))
        self.at = at
        self.count = 0
        self.where: str | None = None  # the point interrupted: function and line

    def _hook(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event not in _CHECKPOINTS or frame.f_code.co_filename not in self.files:
            return
        if frame.f_code.co_filename not in self.own and not self._called_from_own(frame):
            return
        self.count += 1
        if self.count - 1 == self.at:
            self.where = f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno}, {event})"
            signal.raise_signal(signal.SIGINT)  # handled on the way out of this hook: raised at this point

    def _called_from_own(self, frame: FrameType) -> bool:
        caller = frame.f_back
        for _ in range(_CALLERS_LOOKED_AT):
            if caller is None:
                return False
            if caller.f_code.co_filename in self.own:
                return True
            caller = caller.f_back
        return False

    @contextmanager
    def armed(self) -> Iterator[InterruptPoints]:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.setprofile(self._hook)
        try:
            yield self
        finally:
            sys.setprofile(None)
            signal.signal(signal.SIGINT, previous)


def files_of(*objects: Callable[..., Any] | Any) -> list[str]:
    """The source files of modules, classes or functions."""
    import inspect

    return [inspect.getfile(o) for o in objects]
