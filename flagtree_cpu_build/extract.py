"""Safe extraction and atomic publication of a downloaded toolchain tree.

A tarball is unpacked member by member into ``.<name>.flagtree-cpu-partial`` beside the
destination, then renamed into place, so Triton never sees half a tree (FlagTree's
setup.py stream-extracts straight into ``~/.triton/llvm`` and an interrupt leaves one).
Every member is checked *before* anything is written for it: absolute paths, ``..``,
symlinks or hard links that lead outside the tree, and device files are refused with the
member's name; real paths are checked too, so a chain of in-tree symlinks cannot be used
to climb out. Exec bits and internal symlinks are kept; ownership and setuid bits are not.

The published tree carries ``version.txt`` holding the URL exactly as FlagTree's setup.py
expects, and our stamp with the sha256, which is how a re-run knows the tree is current
without reading it.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from . import __version__
from .errors import ArtifactError
from .ui import UI, ProgressTask

STAMP_NAME = ".flagtree-cpu-artifact.json"
_READ_SIZE = 1 << 20


def read_stamp(tree: Path) -> dict[str, Any] | None:
    try:
        return json.loads((tree / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None


def write_markers(tree: Path, *, url: str, sha256: str, size: int, version_file: str | None) -> None:
    if version_file:
        (tree / version_file).write_text(url)  # exactly the URL, no newline: setup.py compares with ==
    stamp = {"url": url, "sha256": sha256, "size": size, "published_at": time.time(),
             "tool": f"flagtree-cpu {__version__}"}
    (tree / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n")


class _Unsafe(Exception):
    pass


class _CountingReader:
    """A file object that reports how much of the compressed tarball has been read."""

    def __init__(self, raw: Any, task: ProgressTask, total: int | None):
        self.raw, self.task, self.total, self.done = raw, task, total, 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.done += len(data)
        self.task.update(self.done, self.total)
        return data


class _Extractor:
    def __init__(self, root: Path, strip: int):
        self.root = root
        self.real_root = os.path.realpath(root)
        self.strip = strip

    def relative(self, name: str) -> str | None:
        """The member's path inside the tree after strip_components; None for stripped folders."""
        if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
            raise _Unsafe("has an absolute path")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise _Unsafe("climbs out with '..'")
        parts = parts[self.strip:]
        return "/".join(parts) if parts else None

    def inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real == self.real_root or real.startswith(self.real_root + os.sep)

    def parent_of(self, rel: str) -> str:
        parent = os.path.join(self.root, os.path.dirname(rel))
        probe = parent
        while not os.path.lexists(probe):
            probe = os.path.dirname(probe)
        if not self.inside(probe):
            raise _Unsafe("would be written through a link that leads outside the tree")
        os.makedirs(parent, exist_ok=True)
        if not self.inside(parent):
            raise _Unsafe("would be written through a link that leads outside the tree")
        return parent

    def extract(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        rel = self.relative(member.name)
        if rel is None:
            return
        path = os.path.join(self.root, rel)
        if member.isdir():
            self.parent_of(rel)
            if os.path.lexists(path) and not os.path.isdir(path):
                raise _Unsafe("is a folder where the archive already put something else")
            os.makedirs(path, exist_ok=True)
            return
        if not (member.isreg() or member.issym() or member.islnk()):
            raise _Unsafe("is a device file, FIFO or other special file")
        parent = self.parent_of(rel)
        if member.issym():
            if os.path.isabs(member.linkname):
                raise _Unsafe(f"is a symlink to the absolute path {member.linkname}")
            if not self.inside(os.path.join(parent, member.linkname)):
                raise _Unsafe(f"is a symlink to {member.linkname}, outside the tree")
        if member.islnk():
            source_rel = self.relative(member.linkname)
            source = os.path.join(self.root, source_rel) if source_rel else ""
            if not source_rel or not os.path.isfile(source) or os.path.islink(source) or not self.inside(source):
                raise _Unsafe(f"is a hard link to {member.linkname}, which is not a file extracted in the tree")
        if os.path.lexists(path):
            if os.path.isdir(path) and not os.path.islink(path):
                raise _Unsafe("is a file where the archive already put a folder")
            os.unlink(path)  # a later member replaces an earlier one, as tar does
        if member.issym():
            os.symlink(member.linkname, path)
        elif member.islnk():
            os.link(source, path)
        else:
            source_file = tar.extractfile(member)
            assert source_file is not None
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(source_file, out, _READ_SIZE)
            # keep the exec bits; never setuid/setgid, never group/other write
            os.chmod(path, (member.mode & 0o755) | 0o600)
        os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)


def unpack(tarball: Path, dest: Path, *, strip: int, ui: UI, label: str, reader: Any = None,
           partial: Path | None = None) -> Path:
    """Extract ``tarball`` into a partial folder beside ``dest``; return that folder.

    With ``reader`` (a GrowingFile over the download in progress) the bytes come from it instead,
    as they arrive; ``partial`` then names a folder of this process's own."""
    partial = partial or dest.with_name(f".{dest.name}.flagtree-cpu-partial")
    if partial.exists():
        shutil.rmtree(partial)  # our own interrupted extraction (the name is ours)
    partial.mkdir(parents=True)
    extractor = _Extractor(partial, strip)
    try:
        total = None if reader is not None else tarball.stat().st_size
        source = nullcontext(reader) if reader is not None else open(tarball, "rb")  # noqa: SIM115
        with ui.progress(f"unpacking {label}", total=total, unit="bytes") as task, source as raw, \
                tarfile.open(fileobj=_CountingReader(raw, task, total), mode="r|*", bufsize=_READ_SIZE) as tar:
            for member in tar:
                try:
                    extractor.extract(tar, member)
                except _Unsafe as exc:
                    raise ArtifactError(
                        f"refusing to unpack {label}: member {member.name!r} {exc}; nothing was written outside "
                        f"{partial.name}, which is removed",
                        details=(f"tarball: {tarball}",),
                        fix="the tarball is damaged or hostile: check where it came from (mirror, --from FILE); "
                        "delete it from the cache and fetch again") from None
    except tarfile.TarError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise ArtifactError(f"{tarball} is not a readable tarball: {exc}",
                            fix="delete it from the cache and fetch again") from exc
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return partial


def publish(partial: Path, dest: Path) -> None:
    """Rename the finished tree into place; an older tree *we* published there is replaced."""
    if dest.exists() or dest.is_symlink():
        old = dest.with_name(f".{dest.name}.flagtree-cpu-old")
        if old.exists():
            shutil.rmtree(old)
        os.rename(dest, old)
        os.rename(partial, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(partial, dest)


def differences_from(tarball: Path, tree: Path, *, strip: int, limit: int = 20) -> list[str]:
    """How ``tree`` differs from what ``tarball`` would unpack (names, types, sizes, link targets)."""
    found: list[str] = []
    extractor = _Extractor(tree, strip)
    with tarfile.open(tarball, mode="r|*", bufsize=_READ_SIZE) as tar:
        for member in tar:
            try:
                rel = extractor.relative(member.name)
            except _Unsafe:
                found.append(f"{member.name}: unsafe member in the tarball")
                continue
            if rel is None:
                continue
            path = tree / rel
            if member.isdir():
                problem = None if path.is_dir() else "folder missing"
            elif member.issym():
                problem = None if path.is_symlink() and os.readlink(path) == member.linkname else "symlink differs"
            elif not path.is_file():
                problem = "file missing"
            elif member.isreg() and path.stat().st_size != member.size:
                problem = f"size {path.stat().st_size}, the tarball has {member.size}"
            else:
                problem = None
            if problem:
                found.append(f"{rel}: {problem}")
                if len(found) >= limit:
                    break
    return found
