"""Reading a file someone else put there (a recipe, a file a recipe names, a lock): a regular file only, and
never more of it than a cap.

``open()`` on a FIFO waits for a writer — forever, when nobody writes; a character device such as /dev/zero
never ends; a socket cannot be opened at all. So the file's kind is looked at before it is opened (a device is
never opened: opening some has effects), it is opened without blocking (``O_NONBLOCK``: a FIFO put there
between the look and the open still opens at once), its kind is taken again from the open descriptor
(``fstat``: what is read is what was checked), and it is read up to the cap.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """A FIFO, a socket or a device where a file was expected; ``strerror`` says which, in words."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(errno.EINVAL, f"it is {kind}, not a regular file", str(path))
        self.kind = kind


def kind_of(mode: int) -> str | None:
    """What a file of this ``st_mode`` is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it is not a regular file (through a symlink: what the link leads to, and that it is a
    link), else None. A path that does not exist (or a dangling link, or a name with a NUL byte) raises
    ``FileNotFoundError``; a name too long, a folder that cannot be searched, ``OSError`` as ``os.stat`` does."""
    return _described(path, _stat(path).st_mode)


def _stat(path: str | os.PathLike[str]) -> os.stat_result:
    if "\0" in os.fspath(path):  # os.stat would raise ValueError; no file can have such a name
        raise FileNotFoundError(errno.ENOENT, "no file name holds a NUL byte", str(path))
    return os.stat(path)


def _described(path: str | os.PathLike[str], mode: int) -> str | None:
    kind = kind_of(mode)
    if kind is None or not os.path.islink(path):
        return kind
    return f"a symlink to {os.path.realpath(path)}, which is {kind}"


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The first ``limit`` + 1 bytes of the regular file ``path`` at most (more than ``limit`` tells the caller it
    is too big without reading it all). A folder raises ``IsADirectoryError``; a FIFO, socket or device raises
    ``NotRegularFile`` without waiting; anything else as ``open`` does."""
    _refuse_special(path, _stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _refuse_special(path, os.fstat(fd).st_mode)  # replaced since the look: still, no FIFO is read
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _refuse_special(path: str | os.PathLike[str], mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "it is a folder, not a file", str(path))
    raise NotRegularFile(Path(path), _described(path, mode) or "a special file")
