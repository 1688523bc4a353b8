"""Reading a file someone else put there (a recipe, a file a recipe names, a lock, a wheelhouse's manifest, a
wheel in a shared folder): a regular file only, and never more of it than a cap.

``open()`` on a FIFO waits for a writer — forever, when nobody writes; a character device such as /dev/zero
never ends; a socket cannot be opened at all; some devices act when opened. So the file's kind is looked at
before it is opened (a device is never opened), it is opened without blocking (``O_NONBLOCK``: a FIFO put there
between the look and the open still opens at once), and its kind and identity are taken again from the open
descriptor (``fstat``: what is read is what was checked). A symbolic link to a regular file is followed (a
synced folder may hold them). Reading stops one byte past the cap, whatever the file's size says.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """A FIFO, a socket or a device where a file was expected; ``kind`` says which, in words."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(errno.EINVAL, f"it is {kind}, not a regular file", str(path))
        self.path, self.kind = Path(path), kind

    def __str__(self) -> str:
        return f"{self.path} is not a regular file ({self.kind})"


class FolderNotFile(NotRegularFile, IsADirectoryError):
    """A folder where a file was expected: both a ``NotRegularFile`` and the ``IsADirectoryError`` open raises."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, "a folder")
        self.errno, self.strerror = errno.EISDIR, "it is a folder, not a file"


class TooLarge(OSError):
    """``path`` holds more than ``limit`` bytes (only ``limit + 1`` were read)."""

    def __init__(self, path: str | os.PathLike[str], limit: int) -> None:
        super().__init__(errno.EFBIG, f"it has more than {limit} bytes", str(path))
        self.path, self.limit = Path(path), limit

    def __str__(self) -> str:
        return f"{self.path} has more than {self.limit} bytes"


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


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading (blocking, as usual), when it is or links to a regular file. A folder raises
    ``FolderNotFile``, a FIFO, socket or device ``NotRegularFile``, without opening it or waiting; a file swapped
    for another between the look and the open ``NotRegularFile`` too; anything else as ``open`` does."""
    seen = _stat(path)
    _refuse_special(path, seen.st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        opened = os.fstat(fd)
        _refuse_special(path, opened.st_mode)  # replaced since the look: still, no FIFO is read
        if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
            raise NotRegularFile(path, "a file replaced while it was being opened")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The first ``limit`` + 1 bytes of the regular file ``path`` at most (more than ``limit`` tells the caller it
    is too big without reading it all); refusals as ``open_regular``."""
    with open_regular(path) as file:
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = file.read(min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


def read_capped(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path``; ``TooLarge`` when it has more than ``limit`` (at most ``limit + 1``
    are ever read, so a huge or growing file costs no more than the limit)."""
    data = read_regular(path, limit)
    if len(data) > limit:
        raise TooLarge(path, limit)
    return data


def _stat(path: str | os.PathLike[str]) -> os.stat_result:
    if "\0" in os.fspath(path):  # os.stat would raise ValueError; no file can have such a name
        raise FileNotFoundError(errno.ENOENT, "no file name holds a NUL byte", str(path))
    return os.stat(path)


def _described(path: str | os.PathLike[str], mode: int) -> str | None:
    kind = kind_of(mode)
    if kind is None or not os.path.islink(path):
        return kind
    return f"a symlink to {os.path.realpath(path)}, which is {kind}"


def _refuse_special(path: str | os.PathLike[str], mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise FolderNotFile(path)
    raise NotRegularFile(path, _described(path, mode) or "a special file")
