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

from .errors import UsageError


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
    deadline = None if timeout is None else time.monotonic() + timeout
    told = False
    while True:
        fd = _open(lock_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            if not wait:
                raise Held(holder) from None
            if on_wait and not told:
                on_wait(f"waiting for another flagtree-cpu process (pid {holder}) holding {lock_path}")
                told = True
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{lock_path} is held by pid {holder}") from None
            time.sleep(0.1)
            continue
        if _still_at(fd, lock_path):
            break
        os.close(fd)  # the file was removed or replaced while we waited: lock the one there now
    try:
        os.ftruncate(fd, 0)
        try:
            os.pwrite(fd, f"{os.getpid()} {note}".strip().encode(), 0)
        except OSError:  # a full disk: the lock holds without its note (who holds it), and the work itself
            pass  # says what it cannot write
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _open(lock_path: Path) -> int:
    """The lock file's descriptor; a lock path that is damaged (a folder, under a file) is a clear error."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except IsADirectoryError:
        raise UsageError(f"{lock_path} is a folder where flagtree-cpu keeps a lock file (it holds only a pid)",
                         fix=f"move it away (mv {lock_path} {lock_path}.damaged); the lock file is made again on "
                         "the next run") from None
    except (NotADirectoryError, FileExistsError):
        raise UsageError(f"cannot make the lock file {lock_path}: something in its path is a file, not a folder",
                         fix=f"check {lock_path.parent} and move the file that is in the way") from None
    except PermissionError:
        raise UsageError(f"cannot open the lock file {lock_path}: permission denied",
                         fix="run as the user who owns it, or fix its owner (chown) and permissions") from None


def _still_at(fd: int, lock_path: Path) -> bool:
    """Whether the locked file is still the one at ``lock_path`` (it may be unlinked once released, and a
    lock on a file no longer there protects nothing)."""
    try:
        here = os.stat(lock_path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)
