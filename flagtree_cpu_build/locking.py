"""Advisory file locks (fcntl) for things several flagtree-cpu processes share.

A git mirror in the cache, a download in the artifact cache, a workspace: two runs
touching the same one at once must take turns, never interleave. The lock file sits
beside the thing it protects and records the holder's pid for the waiting message.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


class Held(Exception):
    """The lock is held by another process (``wait=False``)."""

    def __init__(self, holder: str):
        super().__init__(holder)
        self.holder = holder


@contextmanager
def exclusive(lock_path: Path, *, on_wait: Callable[[str], None] | None = None,
              timeout: float | None = None, wait: bool = True, note: str = "") -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path``; wait (telling ``on_wait`` once) while another holds it.

    Raises TimeoutError after ``timeout`` seconds of waiting, and ``Held`` at once when ``wait`` is
    False. The holder's pid (and ``note``: what it is doing) is written into the file for others.
    """
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").strip() or "?"
            if not wait:
                raise Held(holder) from None
            if on_wait:
                on_wait(f"waiting for another flagtree-cpu process (pid {holder}) holding {lock_path}")
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() > deadline:
                        raise TimeoutError(f"{lock_path} is held by pid {holder}") from None
                    time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {note}".strip().encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock
