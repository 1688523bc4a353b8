"""Safe extraction of a downloaded toolchain tarball, and the stamp of a published tree.

A tarball is unpacked member by member into a folder of our own beside the destination
(``partials``), then swapped into place, so Triton never sees half a tree (FlagTree's
setup.py stream-extracts straight into ``~/.triton/llvm`` and an interrupt leaves one).
Every member is checked *before* anything is written for it: absolute paths, ``..``,
symlinks or hard links that lead outside the tree, and device files are refused with the
member's name. Paths are resolved through the tree's own links with ``..`` above the tree's
root counting as outside, so the answer does not depend on where the tree sits; once every
member is known, every link is resolved again, so a chain of links that each looked inside
when made cannot lead outside after publication. Exec bits, internal symlinks and hard
links are kept; ownership and setuid bits are not. Reading is ``archive``'s: bounded memory,
limits on size and entry count.

The published tree carries ``version.txt`` holding the URL exactly as FlagTree's setup.py
expects, and our stamp with the sha256 (and the md5 or sha512 the recipe stated and the file
matched) and the layout it was published with (kind, root, clean-ups), which is how a re-run
knows the tree is current without reading it. Zip and plain-file artifacts, ``root.find`` and
``after_unpack`` are ``artifact_tree``'s; they reuse the checks here.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import __version__
from .archive import Archive, TarballProblem, TarStream, UnpackLimits, members
from .atomic import write_atomic
from .diskspace import disk_full, is_disk_full, tree_hint
from .errors import ArtifactError
from .ui import UI

STAMP_NAME = ".flagtree-cpu-artifact.json"
_READ_SIZE = 1 << 20
_MAX_LINK_HOPS = 40  # as the kernel's ELOOP limit
_SHA256 = re.compile(r"[0-9a-f]{64}")


def read_stamp(tree: Path) -> dict[str, Any] | None:
    """Our stamp in ``tree``, or None when there is none or it is damaged (see ``stamp_problem``)."""
    try:
        stamp = json.loads((tree / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    valid = isinstance(stamp, dict) and isinstance(stamp.get("url"), str) \
        and isinstance(stamp.get("sha256"), str) and _SHA256.fullmatch(stamp["sha256"])
    return stamp if valid else None


def stamp_problem(tree: Path) -> str | None:
    """Why the stamp in ``tree`` cannot be read, when something stands at its name."""
    path = tree / STAMP_NAME
    if not os.path.lexists(path) or read_stamp(tree) is not None:
        return None
    return f"{path} is a folder" if path.is_dir() else f"{path} is damaged (not a flagtree-cpu stamp)"


def write_markers(tree: Path, *, url: str, sha256: str, size: int, version_file: str | None,
                  digests: Mapping[str, str] | None = None, layout: Mapping[str, Any] | None = None) -> None:
    """``digests``: the other digests verified (md5, sha512); ``layout``: how the tree was cut from the archive."""
    if version_file:
        _make_way_for_file(tree / version_file)
        (tree / version_file).write_text(url)  # exactly the URL, no newline: setup.py compares with ==
    others = {k: v for k, v in (digests or {}).items() if k != "sha256"}
    stamp = {"url": url, "sha256": sha256, **others, "size": size, **(layout or {}), "published_at": time.time(),
             "tool": f"flagtree-cpu {__version__}"}
    _make_way_for_file(tree / STAMP_NAME)
    write_atomic(tree / STAMP_NAME, json.dumps(stamp, indent=2) + "\n")  # a reader sees the old stamp or the new one


def _make_way_for_file(path: Path) -> None:
    """An empty folder where we keep a file is removed; anything else there is not ours to delete."""
    if path.is_dir() and not path.is_symlink():
        try:
            path.rmdir()
        except OSError:
            raise ArtifactError(f"{path} should be a file written by flagtree-cpu but is a folder with contents; "
                                "it is left alone", fix=f"look inside, then remove it: rm -r {path}") from None


class _Unsafe(Exception):
    pass


class _Extractor:
    def __init__(self, root: Path, strip: int):
        self.root = str(root)
        self.strip = strip
        # folders known to resolve inside: their path -> the real folder (forgotten when a link changes)
        self.safe_dirs: dict[str, str] = {"": self.root}
        self.links: dict[str, str] = {}  # every symlink made: its path -> the member that made it

    def relative(self, name: str) -> str | None:
        """The member's path inside the tree after strip_components; None for stripped folders."""
        if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
            raise _Unsafe("has an absolute path")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise _Unsafe("climbs out with '..'")
        parts = parts[self.strip:]
        return "/".join(parts) if parts else None

    def resolve(self, rel: str) -> str | None:
        """``rel`` with the tree's symlinks followed, as a path relative to the root; None when it leads
        outside (through '..' above the root, an absolute target, or a loop). Missing parts resolve
        by name, like realpath."""
        todo, done, hops = rel.split("/"), [], 0
        todo.reverse()
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if not done:
                    return None
                done.pop()
                continue
            here = os.path.join(self.root, *done, part)
            if os.path.islink(here):
                hops += 1
                target = os.readlink(here)
                if hops > _MAX_LINK_HOPS or target.startswith("/"):
                    return None
                todo.extend(reversed(target.split("/")))
            else:
                done.append(part)
        return "/".join(done)

    def folder_for(self, rel: str) -> str:
        """The real folder a member at ``rel`` goes into, made if missing; refused if outside. Bytes are
        written where the resolution says, not through the kernel's own reading of the links."""
        parent = os.path.dirname(rel)
        folder = self.safe_dirs.get(parent)
        if folder is None:
            resolved = self.resolve(parent)
            if resolved is None:
                raise _Unsafe("would be written through a link that leads outside the tree")
            folder = os.path.join(self.root, resolved)
            try:
                os.makedirs(folder, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise _Unsafe("would be written inside something the archive made that is not a folder") from None
            self.safe_dirs[parent] = folder
        return folder

    def extract(self, tar: Archive, member: tarfile.TarInfo) -> None:
        rel = self.relative(member.name)
        if rel is None:
            return
        path = os.path.join(self.folder_for(rel), os.path.basename(rel))
        if member.isdir():
            self.make_folder(rel, path)
            return
        if not (member.isreg() or member.issym() or member.islnk()):
            raise _Unsafe("is a device file, FIFO or other special file")
        source = self._link_source(member) if member.islnk() else None
        if member.issym():
            self.make_symlink(rel, path, member.linkname, member.name, member.mtime)
            return
        self._clear(path)
        if source is not None:
            os.link(source, path)
        else:
            self._write(tar, member, path)

    def make_folder(self, rel: str, path: str) -> None:
        if os.path.lexists(path) and not os.path.isdir(path):
            raise _Unsafe("is a folder where the archive already put something else")
        if self.resolve(rel) is None:
            raise _Unsafe("is a folder reached through a link that leads outside the tree")
        os.makedirs(path, exist_ok=True)

    def make_symlink(self, rel: str, path: str, target: str, name: str, mtime: float) -> None:
        self._check_symlink(rel, target)
        self._clear(path)
        os.symlink(target, path)
        self.links[rel] = name
        self.safe_dirs = {"": self.root}  # a new link can change where a known folder leads
        os.utime(path, (mtime, mtime), follow_symlinks=False)

    def _check_symlink(self, rel: str, target: str) -> None:
        if os.path.isabs(target):
            raise _Unsafe(f"is a symlink to the absolute path {target}")
        if self.resolve(f"{os.path.dirname(rel)}/{target}") is None:
            raise _Unsafe(f"is a symlink to {target}, outside the tree")

    def _link_source(self, member: tarfile.TarInfo) -> str:
        source_rel = self.relative(member.linkname)
        resolved = self.resolve(source_rel) if source_rel else None
        source = os.path.join(self.root, resolved) if resolved else ""
        if not resolved or not os.path.isfile(source) or os.path.islink(source):
            raise _Unsafe(f"is a hard link to {member.linkname}, which is not a file extracted in the tree")
        return source

    def _clear(self, path: str) -> None:
        if os.path.lexists(path):
            if os.path.isdir(path) and not os.path.islink(path):
                raise _Unsafe("is a file where the archive already put a folder")
            os.unlink(path)  # a later member replaces an earlier one, as tar does
            self.safe_dirs = {"": self.root}

    @staticmethod
    def _write(tar: Archive, member: tarfile.TarInfo, path: str) -> None:
        source_file = tar.extractfile(member)
        assert source_file is not None
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(source_file, out, _READ_SIZE)
            out.flush()
            # keep the exec bits; never setuid/setgid, never group/other write
            os.fchmod(fd, (member.mode & 0o755) | 0o600)
            os.utime(fd, (member.mtime, member.mtime))

    def escaping_links(self) -> list[tuple[str, str]]:
        """Links that, with every member in place, resolve outside the tree: (member, target)."""
        found = []
        for rel, name in self.links.items():
            path = os.path.join(self.root, rel)
            if os.path.islink(path) and self.resolve(rel) is None:
                found.append((name, os.readlink(path)))
        return found


def unpack(source: Path | None, tree: Path, *, strip: int, ui: UI, label: str, limits: UnpackLimits,
           reader: Any = None, stop: threading.Event | None = None) -> None:
    """Extract the tarball ``source`` into the new folder ``tree``.

    With ``reader`` (a GrowingFile over the download in progress; ``source`` None) the bytes come from
    it as they arrive, and its ``total`` gives the size once known. ``stop`` ends the work at the next member.
    Raises TarballProblem (damaged or hostile: the bytes must not be kept), archive.LimitExceeded,
    diskspace.DiskFull; the caller removes ``tree``.
    """
    tree.mkdir(parents=True)
    extractor = _Extractor(tree, strip)

    def total() -> int | None:
        return getattr(reader, "total", None) if reader is not None else size

    size = None if source is None else source.stat().st_size
    with unpacking_errors(tree, label, lambda: getattr(reader, "total", None) or size):
        with ui.progress(f"unpacking {label}", total=total(), unit="bytes") as task, \
                (_Borrowed(reader) if source is None else open(source, "rb")) as raw:
            stream = TarStream(raw, label, limits, total, lambda done, whole: task.update(done, whole))
            for tar, member in members(stream):
                if stop is not None and stop.is_set():
                    raise KeyboardInterrupt
                _extract_member(extractor, tar, member, label, source)
        check_links(extractor, label, source)


def check_links(extractor: _Extractor, label: str, source: Path | None, what: str = "tarball") -> None:
    """Once every member is in place: no link leads outside the tree."""
    escaping = extractor.escaping_links()
    if escaping:
        name, target = escaping[0]
        raise _refusal(label, name, f"is a symlink to {target}, which with the whole tree unpacked leads "
                       "outside it", source, what)


@contextmanager
def unpacking_errors(tree: Path, label: str, size: Any) -> Iterator[None]:
    """The machine's failures while unpacking into ``tree``: a full disk (named with the space needed, ``size()``)
    or a folder that cannot be written."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc):
            parent = tree.parent.parent  # beside the destination: what the user knows
            raise disk_full(parent, None, f"unpacking {label}", size(), hint=tree_hint(parent)) from None
        raise ArtifactError(f"could not unpack {label} into {tree}: {exc}",
                            fix="check that the folder is writable, then run the same command again") from exc


def _extract_member(extractor: _Extractor, tar: Archive, member: tarfile.TarInfo, label: str,
                    source: Path | None) -> None:
    try:
        extractor.extract(tar, member)
    except _Unsafe as exc:
        raise _refusal(label, member.name, str(exc), source) from None
    except OSError as exc:
        if is_disk_full(exc) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise  # the machine's problem, not the archive's
        raise _refusal(label, member.name, f"cannot be unpacked ({exc.strerror})", source) from None


def _refusal(label: str, member: str, why: str, source: Path | None, what: str = "tarball") -> TarballProblem:
    return TarballProblem(
        f"refusing to unpack {label}: member {member!r} {why}; nothing was written outside the unpacking folder, "
        "which is removed", details=(f"{what}: {source or 'the download in progress'}",),
        fix=f"the {what} is damaged or hostile and was not kept: check where it came from (the mirror, --from FILE)")


class _Borrowed:
    """A reader used as a context manager without being closed by it (its owner closes it)."""

    def __init__(self, reader: Any):
        self.reader = reader

    def __enter__(self) -> Any:
        return self.reader

    def __exit__(self, *exc: object) -> None:
        return None


def differences_from(tarball: Path, tree: Path, *, strip: int, limits: UnpackLimits, label: str,
                     limit: int = 20) -> list[str]:
    """How ``tree`` differs from what ``tarball`` would unpack (names, types, sizes, link targets)."""
    found: list[str] = []
    extractor = _Extractor(tree, strip)
    size = tarball.stat().st_size
    with open(tarball, "rb") as raw:
        for _tar, member in members(TarStream(raw, label, limits, lambda: size, lambda done, whole: None)):
            try:
                rel = extractor.relative(member.name)
            except _Unsafe:
                found.append(f"{member.name}: unsafe member in the tarball")
                continue
            problem = _difference(tree / rel, member) if rel is not None else None
            if problem:
                found.append(f"{rel}: {problem}")
                if len(found) >= limit:
                    break
    return found


def _difference(path: Path, member: tarfile.TarInfo) -> str | None:
    if member.isdir():
        return None if path.is_dir() else "folder missing"
    if member.issym():
        return None if path.is_symlink() and os.readlink(path) == member.linkname else "symlink differs"
    if not path.is_file():
        return "file missing"
    if member.isreg() and path.stat().st_size != member.size:
        return f"size {path.stat().st_size}, the tarball has {member.size}"
    return None
