"""Reading a download while it is written, so the tarball is unpacked as it arrives.

The ``.part`` file grows in one thread (the download) and is read in another (the unpacker):
``curl | tar -xz``, but resumable and without trusting anything read until the whole file's
sha256 is verified. Each side tells the other what it needs to know: the download which file
it writes (a mirror that failed is followed by the next URL's file), the file's size once the
server says it, that it started the file again, finished, or failed; the unpacker that it gave
up (then the rest need not be downloaded).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


class StreamStale(Exception):
    """The .part file was started again after the reader had read from it: what it read is void."""


class StreamAborted(Exception):
    """The download failed or was stopped; the reader's consumer must give up."""


class ConsumerFailed(Exception):
    """The unpacking of the bytes failed: downloading the rest is pointless."""


class GrowingFile:
    """A reader of the ``.part`` file while the download writes it, so the tarball can be unpacked as it
    arrives (``curl | tar -xz``, with resume): at the end of the bytes written so far it waits for more,
    until the download says it is complete (then end of file) or failed. If the download has to start the
    file again (or moves to another URL's file) after bytes were read, reading raises StreamStale and the
    caller unpacks the finished file instead. Nothing read this way is trusted until the whole file's
    sha256 is verified. ``stops``: events that end the wait (Ctrl-C in another thread, the exit hook)."""

    def __init__(self, stops: Sequence[threading.Event] = ()):
        self.path: Path | None = None
        self.total: int | None = None  # the file's size once the server said it
        self.consumed = 0
        self._stops = tuple(stops)
        self._file: Any = None
        # entered as ``with self._lock`` (C code), never ``with self._cond``: Condition's Python-level __enter__
        # and __exit__ let a Ctrl-C in the download's thread leave the lock held, and the unpacker then waits
        # for it forever (see interrupts.py); the Condition is only for wait/notify
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._complete = self._aborted = self._stale = self._failed = False

    # the download's side
    def follow(self, path: Path) -> None:
        """The download now writes ``path`` (the first candidate, or the next one after a failure)."""
        with self._lock:
            if path != self.path:
                self._switch(path)
            self._cond.notify_all()

    def sized(self, total: int | None) -> None:
        if total:
            self.total = total

    def grew(self) -> None:
        with self._lock:
            if self._failed:
                raise ConsumerFailed("the unpacking failed")
            self._cond.notify_all()

    def restarted(self) -> None:
        with self._lock:
            self._switch(self.path)
            self._cond.notify_all()

    def _switch(self, path: Path | None) -> None:
        if self.consumed:
            self._stale = True
        elif self._file is not None:  # nothing read yet: follow the new file instead
            self._file.close()
            self._file = None
        self.path = path

    def complete(self) -> None:
        with self._lock:
            self._complete = True
            self._cond.notify_all()

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            self._cond.notify_all()

    # the unpacker's side
    def fail(self) -> None:
        """The unpacking gave up: the download stops at its next chunk."""
        with self._lock:
            self._failed = True

    def read(self, size: int = -1) -> bytes:
        with self._lock:
            while True:
                if any(stop.is_set() for stop in self._stops):
                    raise KeyboardInterrupt
                if self._stale:
                    raise StreamStale(f"{self.path} was started again")
                if self._aborted:
                    raise StreamAborted(f"the download into {self.path} stopped")
                if self._file is None and self.path is not None:
                    try:
                        self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()
                    except FileNotFoundError:
                        pass  # not written yet, or started again this moment: wait for the download to say
                if self._file is not None:
                    data = self._file.read(size if size and size > 0 else CHUNK)
                    if data:
                        self.consumed += len(data)
                        return data
                if self._complete:
                    return b""
                self._cond.wait(0.5)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
