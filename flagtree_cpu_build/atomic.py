"""Replacing a file or a symlink in one step: a reader sees the old one or the new one, never half.

One temporary-name scheme for everything the tool writes this way: ``.NAME.tmp-PID`` in the same
folder (the same file system, so the final ``os.replace`` is a rename; hidden, so listings and
globs of the folder skip it; the pid tells whose it was — and, off the main thread, the thread
too: setup writes from two threads). The temporary is removed on any failure, Ctrl-C included,
so an interrupted write leaves the old file and nothing else; what a killed writer (SIGKILL, a
power cut) left is removed by the next write of the same file, once its pid is not alive.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def temporary_name(path: Path) -> Path:
    """Where ``path``'s next version is written before it replaces ``path``."""
    owner = str(os.getpid())
    if threading.current_thread() is not threading.main_thread():
        owner += f"-{threading.get_native_id()}"  # two threads writing one file never share a temporary
    return path.with_name(f".{path.name}.tmp-{owner}")


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None, durable: bool = False) -> None:
    """Write ``data`` (text is UTF-8) to ``path`` atomically: a reader sees the old file or the new one.

    ``durable`` also fsyncs the temporary before it replaces the old file, so a power cut leaves one
    version or the other, whole: for what cannot be made again (the lock file a user commits). The
    rest (stamps, notes, reports) is rewritten by the next run, and an fsync right after a large
    unpack can wait for the whole tree's writeback.

    Without ``mode`` the file gets the permissions any new file of this user would (0666 less the
    umask); with it, exactly ``mode``."""
    with open_atomic(path, mode=mode, durable=durable) as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)


@contextlib.contextmanager
def open_atomic(path: Path, *, mode: int | None = None, durable: bool = False,
                create_mode: int = 0o666) -> Iterator[BinaryIO]:
    """A file to write ``path``'s next version into, streamed (a bundle of gigabytes): it replaces ``path``
    only when the ``with`` block ends normally; on any failure (Ctrl-C included) the temporary is removed and
    ``path`` is as it was. ``durable``, ``mode``: as for ``write_atomic``; ``create_mode`` before the umask."""
    tmp = temporary_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, create_mode)
        with os.fdopen(fd, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            yield out
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # a failed write() names no file: say which
            exc.filename = str(path)
        raise
    _sweep_dead_writers(path)


def replace_symlink(path: Path, target: str | os.PathLike[str]) -> None:
    """Make ``path`` a symlink to ``target`` (the link text, as given), replacing what is at ``path``
    in one step — there is never a moment without a link. Callers make sure ``path`` is not a folder
    (``os.replace`` refuses one) and not the user's file."""
    tmp = temporary_name(path)
    try:
        _remove(tmp)  # an earlier interrupted swap of this very process id
        os.symlink(target, tmp)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _sweep_dead_writers(path: Path) -> None:
    """Remove ``path``'s temporaries whose writer is gone (killed before it could clean up); a live one's stay."""
    prefix = f".{path.name}.tmp-"
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            owner = entry.name[len(prefix):].split("-", 1)[0] if entry.name.startswith(prefix) else ""
            if owner.isdigit() and int(owner) != os.getpid() and not _alive(int(owner)):
                _remove(Path(entry.path))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive, and not ours to judge
        return True
    return True


def _remove(tmp: Path) -> None:
    # cleaning up must never hide the failure being handled (a full disk, Ctrl-C)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
