"""Reading a file someone else put there (a wheelhouse's manifest, a wheel in a shared folder) without trusting
what it is.

Only a regular file is read. Anything else is refused before it is opened, from ``stat``: a FIFO blocks ``open``
until a writer comes (forever), ``/dev/zero`` never ends, and some devices act when opened. A symbolic link to a
regular file is followed (a synced folder may hold them); the descriptor is then checked with ``fstat`` to be the
file ``stat`` saw, so a swap between the two looks is refused too. ``O_NONBLOCK`` makes even that swapped-in FIFO
return at once instead of blocking. A size limit is applied while reading: at most ``limit + 1`` bytes are read,
whatever the file's size says.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


class NotRegularFile(OSError):
    """``path`` is a FIFO, a device, a socket or a folder (``kind`` says which, for the message)."""

    def __init__(self, path: Path, kind: str):
        super().__init__(f"{path} is not a regular file ({kind})")
        self.path, self.kind = path, kind


class TooLarge(OSError):
    """``path`` holds more than ``limit`` bytes (only ``limit + 1`` were read)."""

    def __init__(self, path: Path, limit: int):
        super().__init__(f"{path} has more than {limit} bytes")
        self.path, self.limit = path, limit


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, when it is (or links to) a regular file; else ``NotRegularFile``, without
    opening it. ``FileNotFoundError`` and the other ``OSError`` of ``stat``/``open`` pass through."""
    seen = os.stat(path)
    if not stat.S_ISREG(seen.st_mode):
        raise NotRegularFile(path, kind_of(seen.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
            raise NotRegularFile(path, kind_of(opened.st_mode) if not stat.S_ISREG(opened.st_mode) else
                                 "replaced while it was being opened")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``; ``TooLarge`` when it has more than ``limit`` (at most ``limit + 1``
    are ever read, so a huge or growing file costs no more than the limit)."""
    with open_regular(path) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(path, limit)
    return data
