"""What becomes an artifact's published tree besides a tarball's members: zip archives, plain files,
``root.find`` (publish the folder that holds an entry) and ``after_unpack`` clean-ups. Which of these a
kind uses is ``artifact_kinds``' table.

A zip is read member by member under the tarball's rules (``extract``): no absolute paths, no
``..``, no link that leads outside the tree, nothing special; bytes and entries are counted against
the same limits. Its table of contents is at its end, so a zip is unpacked once downloaded, not
while it arrives. A plain file (``kind: file``) is put inside the published folder under its URL's
file name, with the same stamp and version file as a tree.

``finish`` runs after unpacking, before publishing: ``root.find`` replaces the tree by its
shallowest folder holding the entry (a link that would then lead outside is refused), and each
``after_unpack`` glob is deleted, never through a link that leads outside the tree.
"""

from __future__ import annotations

import errno
import glob
import lzma
import os
import shutil
import stat
import threading
import time
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlparse

from .archive import TarballProblem, UnpackLimits
from .diskspace import is_disk_full
from .errors import ArtifactError
from .extract import _Extractor, _refusal, _Unsafe, check_links, unpacking_errors

if TYPE_CHECKING:
    from .ui import UI


class Artifact(Protocol):
    """What unpacking reads of a recipe's artifact (``recipe.Artifact`` has all of it). Named by shape, not
    imported: the recipe's model reads ``artifact_kinds``, which calls in here, so an import back (even for
    types only) would close a circle between the recipe and the stages below it."""

    @property
    def url(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def root(self) -> Any: ...  # recipe.ArtifactRoot: strip, find
    @property
    def after_unpack(self) -> Any: ...
    @property
    def unpacked_size(self) -> int | None: ...
    @property
    def unpacked_entries(self) -> int | None: ...

_CHUNK = 1 << 20
_MAX_LINK_TARGET = 4096  # PATH_MAX: a zip "symlink" holding more is not one
_MAX_FIND_DEPTH = 8  # root.find looks this deep: a release's tools are near its top
_ZIP = "zip archive"


def file_name(url: str) -> str:
    """The file name a plain-file artifact is published under: the last part of its URL's path."""
    path = urlparse(url).path if "://" in url else url
    name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
    return name if name not in ("", ".", "..") else "download"


def place_file(source: Path, tree: Path, name: str, *, label: str) -> None:
    """A copy (the cache keeps its blob: an edit of the published file must not change it), readable by all."""
    tree.mkdir(parents=True)
    with unpacking_errors(tree, label, lambda: source.stat().st_size):
        shutil.copyfile(source, tree / name)
        os.chmod(tree / name, 0o644)


# --- zip ---------------------------------------------------------------------------------------------


def unpack_zip(source: Path, tree: Path, *, strip: int, ui: UI, label: str, limits: UnpackLimits,
               stop: threading.Event | None = None) -> None:
    """Extract the zip ``source`` into the new folder ``tree``. Raises TarballProblem (damaged or hostile: the
    bytes must not be kept), archive.LimitExceeded, diskspace.DiskFull; the caller removes ``tree``."""
    tree.mkdir(parents=True)
    extractor = _Extractor(tree, strip)
    size = source.stat().st_size
    with unpacking_errors(tree, label, lambda: size):
        try:
            archive = zipfile.ZipFile(source)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
            raise _damaged(label, f"it is not a readable zip archive ({exc})") from None
        with archive, ui.progress(f"unpacking {label}", total=size, unit="bytes") as task:
            infos = archive.infolist()
            if len(infos) > limits.max_entries:  # the table of contents says so before anything is written
                raise limits.too_many(limits.max_entries + 1, label)
            budget = _Budget(limits, size, label)
            done = 0
            for info in infos:
                if stop is not None and stop.is_set():
                    raise KeyboardInterrupt
                _extract_zip_member(extractor, archive, info, budget, label, source)
                done += info.compress_size
                task.update(min(done, size), size)
        check_links(extractor, label, source, _ZIP)


class _Budget:
    """Unpacked bytes counted as they are written (a zip's stated sizes are not trusted)."""

    def __init__(self, limits: UnpackLimits, compressed: int, label: str):
        self.limits, self.compressed, self.label = limits, compressed, label
        self.limit = limits.byte_limit(compressed)
        self.written = 0

    def add(self, count: int) -> None:
        self.written += count
        if self.limit is not None and self.written > self.limit:
            raise self.limits.too_big(self.written, self.compressed, self.label)


def _extract_zip_member(extractor: _Extractor, archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: _Budget,
                        label: str, source: Path) -> None:
    try:
        rel = extractor.relative(info.filename)
        if rel is None:
            return
        path = os.path.join(extractor.folder_for(rel), os.path.basename(rel))
        mode = info.external_attr >> 16 if info.create_system == 3 else 0  # unix modes only from unix zips
        mtime = _mtime(info)
        if info.is_dir() or stat.S_ISDIR(mode):
            extractor.make_folder(rel, path)
        elif stat.S_ISLNK(mode):
            if info.file_size > _MAX_LINK_TARGET:
                raise _Unsafe("is a symlink whose target is implausibly long")
            target = archive.read(info).decode("utf-8", "surrogateescape")
            extractor.make_symlink(rel, path, target, info.filename, mtime)
        elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):
            raise _Unsafe("is a device file, FIFO or other special file")
        else:
            extractor._clear(path)
            _write(archive, info, path, mode, mtime, budget)
    except _Unsafe as exc:
        raise _refusal(label, info.filename, str(exc), source, _ZIP) from None
    except (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, NotImplementedError) as exc:
        raise _damaged(label, f"member {info.filename!r} cannot be read ({exc})") from None
    except OSError as exc:
        if is_disk_full(exc) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise  # the machine's problem, not the archive's
        if exc.errno is None:  # raised by a decompressor (bz2: "Invalid data stream"), not by the file system
            raise _damaged(label, f"member {info.filename!r} cannot be read ({exc})") from None
        raise _refusal(label, info.filename, f"cannot be unpacked ({exc.strerror})", source, _ZIP) from None


def _write(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str, mode: int, mtime: float,
           budget: _Budget) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out, archive.open(info) as data:  # zipfile checks the CRC at the end
        while chunk := data.read(_CHUNK):
            budget.add(len(chunk))
            out.write(chunk)
        out.flush()
        # keep the exec bits; never setuid/setgid, never group/other write
        os.fchmod(fd, ((mode & 0o755) | 0o600) if mode else 0o644)
        os.utime(fd, (mtime, mtime))


def _mtime(info: zipfile.ZipInfo) -> float:
    try:
        return time.mktime((*info.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return 0.0


def _damaged(label: str, why: str) -> TarballProblem:
    return TarballProblem(f"{label} is not a readable zip archive: {why}",
                          fix="nothing of it was kept; run the same command again to download it again")


# --- root.find and after_unpack --------------------------------------------------------------------------


def finish(tree: Path, artifact: Artifact, *, label: str, ui: UI) -> None:
    """Cut the unpacked ``tree`` to what the recipe publishes (root.find), then apply its clean-ups."""
    if artifact.root.find:
        _keep_folder_holding(tree, artifact.root.find, label)
    for step in artifact.after_unpack:
        removed = _remove(tree, step.remove, label)
        if not removed:
            ui.info(f"{label}: after_unpack `remove: {step.remove}` matched nothing (the archive may have changed "
                    "its layout)")


def _keep_folder_holding(tree: Path, entry: str, label: str) -> None:
    found = _shallowest_holding(tree, entry, label)
    if found is None:
        raise ArtifactError(
            f"root.find: no folder of {label} holds {entry!r} (looked {_MAX_FIND_DEPTH} levels deep); nothing "
            "was published", details=(f"its top levels: {', '.join(_top_levels(tree)) or 'nothing'}",),
            fix=f"set artifacts.{label}.root.find to an entry the archive has (e.g. bin), or use root.strip")
    if found == tree:
        return
    holder = tree.with_name("found")
    os.rename(found, holder)
    shutil.rmtree(tree)
    os.rename(holder, tree)
    checker = _Extractor(tree, 0)
    for folder, dirs, files in os.walk(tree):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, tree)
            if os.path.islink(path) and checker.resolve(rel) is None:
                raise ArtifactError(
                    f"root.find: in {label}, the folder holding {entry!r} has a link {rel} -> {os.readlink(path)} "
                    "that leads outside it; nothing was published",
                    fix=f"use root.strip (which keeps the whole archive) instead of root.find for artifacts.{label}")


def _shallowest_holding(tree: Path, entry: str, label: str) -> Path | None:
    level = [tree]
    for _depth in range(_MAX_FIND_DEPTH + 1):
        hits = [folder for folder in level if os.path.lexists(folder / entry)]
        if len(hits) > 1:
            names = ", ".join(str(h.relative_to(tree)) for h in hits[:5])
            raise ArtifactError(f"root.find: several folders of {label} hold {entry!r} at the same depth ({names}); "
                                "nothing was published",
                                fix=f"make artifacts.{label}.root.find name an entry only one of them has "
                                "(e.g. bin/clang)")
        if hits:
            return hits[0]
        level = sorted(Path(e.path) for folder in level for e in _scan(folder) if e.is_dir(follow_symlinks=False))
        if not level:
            break
    return None


def _scan(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def _top_levels(tree: Path, limit: int = 12) -> list[str]:
    shown = []
    for entry in sorted(_scan(tree), key=lambda e: e.name):
        is_dir = entry.is_dir(follow_symlinks=False)
        shown.append(entry.name + ("/" if is_dir else ""))
        if is_dir:
            shown += [f"{entry.name}/{c.name}" + ("/" if c.is_dir(follow_symlinks=False) else "")
                      for c in sorted(_scan(Path(entry.path)), key=lambda e: e.name)[:limit]]
    return shown[:limit] + (["..."] if len(shown) > limit else [])


def _remove(tree: Path, pattern: str, label: str) -> int:
    """Delete what ``pattern`` matches inside ``tree`` (files, links, folders); the count removed."""
    root = os.path.realpath(tree)
    count = 0
    for rel in sorted(glob.glob(pattern, root_dir=tree, recursive=True)):
        path = tree / rel
        if os.path.normpath(rel) in (".", "") or not os.path.lexists(path):
            continue  # the tree itself is never removed; a match inside an already removed folder is gone
        parent = os.path.realpath(path.parent)
        if os.path.commonpath([root, parent]) != root:
            raise ArtifactError(f"after_unpack `remove: {pattern}` in {label} reaches {rel} through a link that "
                                "leads outside the tree; nothing was removed there and nothing was published",
                                fix=f"narrow the glob in artifacts.{label}.after_unpack so it stays inside the tree")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        count += 1
    return count


# --- adopting a tree someone else unpacked -------------------------------------------------------------


def tree_differences(expected: Path, actual: Path, *, ignore: tuple[str, ...] = (), limit: int = 20) -> list[str]:
    """How ``actual`` differs from ``expected`` (names, types, sizes, link targets), ignoring the top-level names
    in ``ignore`` (our stamp and version file)."""
    want, have = _listing(expected, ignore), _listing(actual, ignore)
    found = []
    for rel in sorted(want.keys() | have.keys()):
        if want.get(rel) != have.get(rel):
            what = "missing" if rel not in have else "not in the archive" if rel not in want else \
                f"{have[rel]}, the archive has {want[rel]}"
            found.append(f"{rel}: {what}")
            if len(found) >= limit:
                break
    return found


def _listing(tree: Path, ignore: tuple[str, ...]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for folder, dirs, files in os.walk(tree):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, tree)
            if rel in ignore:
                continue
            if os.path.islink(path):
                found[rel] = f"a link to {os.readlink(path)}"
            elif os.path.isdir(path):
                found[rel] = "a folder"
            else:
                found[rel] = f"a file of {os.path.getsize(path)} bytes"
    return found
