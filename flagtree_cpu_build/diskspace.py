"""Free space: checked before a download or an unpack starts, and a full disk reported as such.

An LLVM prebuilt is ~800 MB to download and several GB unpacked; running out of space
half-way is common on small boards and CI runners. The sizes are known up front (the
server's Content-Length, the recipe's ``size`` and ``unpacked_size``), so a run that cannot
fit stops before writing, and one that fills the disk anyway (another process wrote, or a
size was unknown) stops with the file system, the space needed and what to free — never as
"an unexpected error". A partial download is always kept for the next run to resume.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from .errors import ArtifactError
from .progress import human_bytes

_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(ArtifactError):
    """Not enough space (or quota) for a download or an unpack; nothing about the bytes is wrong."""


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _FULL


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def mount_point(path: Path) -> Path:
    """The mount point of the file system holding ``path`` (or its nearest existing parent)."""
    path = _existing(path.resolve())
    device = path.stat().st_dev
    while path != path.parent and path.parent.stat().st_dev == device:
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(_existing(path)).free


def same_file_system(a: Path, b: Path) -> bool:
    return _existing(a).stat().st_dev == _existing(b).stat().st_dev


def require_free(path: Path, needed: int, what: str, *, keep_note: str = "", hint: str = "") -> None:
    """Stop before writing when the file system holding ``path`` has less than ``needed`` bytes free."""
    free = free_bytes(path)
    if needed > free:
        raise disk_full(path, needed, what, None, free=free, keep_note=keep_note, hint=hint)


def disk_full(path: Path, needed: int | None, what: str, size: int | None, *, free: int | None = None,
              keep_note: str = "", hint: str = "") -> DiskFull:
    """The error for a file system that is (or would be) full. ``needed`` is what the step needs in all;
    ``size`` a known size to quote when ``needed`` is not known."""
    mount = mount_point(path)
    free = free_bytes(path) if free is None else free
    if needed is not None:
        amount = f"needs {human_bytes(needed)}, {human_bytes(free)} free"
        to_free = f"free at least {human_bytes(needed - free)} on {mount}"
    else:
        amount = f"ran out of space ({human_bytes(free)} free)" + (
            f"; the tarball is {human_bytes(size)} and unpacks to more (the recipe's unpacked_size says how much)"
            if size else "")
        to_free = f"free space on {mount}"
    return DiskFull(f"not enough disk space for {what}: the file system at {mount} (holding {path}) {amount}",
                    details=(keep_note,) if keep_note else (),
                    fix=f"{to_free}{hint}, then run the same command again")


def cache_hint(cache_root: Path) -> str:
    return (f" (downloads in {cache_root / 'blobs'} that no workspace uses any more can be deleted), or move the "
            "download cache to a larger disk with --cache-dir DIR or FLAGTREE_CPU_CACHE_DIR")


def tree_hint(parent: Path) -> str:
    return f" (e.g. trees in {parent} you no longer use), or publish on a larger disk by setting TRITON_HOME"


def both_hint(parent: Path, cache_root: Path) -> str:
    return (f" (trees in {parent} you no longer use, downloads in {cache_root / 'blobs'} no workspace uses any "
            "more), or put the download cache (--cache-dir DIR) or the tree (TRITON_HOME) on a larger disk")
