"""`clean`: give back the disk the tool's own caches take — never anything it did not make.

Like `brew cleanup` and `spack clean`, in three scopes:

* always: half-made folders whose maker is provably gone (a SIGKILLed unpack or clone), beside the
  published trees, in the download cache, beside the recipe's checkouts and in the workspace's own
  git caches (bundle import's and bundle create's) — also the half-made clones and mirrors older
  versions left (``.<name>.flagtree-cpu-partial``, ``<mirror>.partial``), under the workspace's or
  the mirror's lock their makers held. One that a process still writes into is left alone, named;
* ``--downloads``: the download cache — verified tarballs, partial downloads, their notes — and the
  workspace's unfinished wheel downloads from a wheelhouse. The published trees stay, so nothing
  breaks; an offline re-setup would need the tarball again;
* ``--trees``: the toolchain trees flagtree-cpu published (they carry its stamp) beside the
  recipe's, that the recipe does not use — older LLVM versions after a pin moved. A tree without
  the stamp (unpacked by hand, or by FlagTree's setup.py) is never touched, only listed.

Anything another run holds (its download or publish lock) is left alone and said so. ``--dry-run``
lists the same plan, with sizes, and removes nothing. The workspace itself is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .artifact_cache import url_key
from .bundle.sources import bundle_cache
from .download import source_note
from .extract import read_stamp
from .gitcache import bundle_git_cache
from .halfmade import discard, users
from .locking import Held, exclusive
from .partials import abandoned, leftovers, leftovers_in
from .stagekit.stage import StageContext
from .stages.artifacts.ownership import Owner, is_shared, owner_of, users_of
from .stages.build.prebuilt import downloads_dir, partial_downloads
from .workspace import user_cache_dir

CLEAN_SCHEMA = "flagtree-cpu/clean/v1"


@dataclass(frozen=True)
class CleanOptions:
    downloads: bool = False
    trees: bool = False
    dry_run: bool = False
    cache_dir: Path | None = None  # the per-user cache root; downloads live in <root>/downloads


@dataclass(frozen=True)
class CleanItem:
    kind: str  # "half-made folder", "download", "partial download", "tree"
    path: Path
    size: int  # bytes on disk
    removed: bool  # removed (or, in a dry run, would be)
    reason: str
    lock: Path | None = None  # held while removing: another run using it makes us leave it

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path), "bytes": self.size, "removed": self.removed,
                "reason": self.reason}


@dataclass(frozen=True)
class CleanReport:
    items: tuple[CleanItem, ...]
    dry_run: bool

    @property
    def freed(self) -> int:
        return sum(i.size for i in self.items if i.removed)

    def to_json(self) -> dict[str, Any]:
        return {"schema": CLEAN_SCHEMA, "dry_run": self.dry_run, "freed_bytes": self.freed,
                "items": [i.to_json() for i in self.items]}


def run_clean(ctx: StageContext, options: CleanOptions) -> CleanReport:
    downloads = (options.cache_dir or user_cache_dir(os.environ)) / "downloads"
    planned = [*_half_made(ctx, downloads)]
    if options.downloads:
        planned += [*_downloads(downloads), *_wheelhouse_parts(ctx)]
    if options.trees:
        planned += _trees(ctx, downloads)
    if options.dry_run:
        return CleanReport(tuple(planned), True)
    report = CleanReport(tuple(_remove(item) for item in planned), False)
    with contextlib.suppress(OSError):  # the wheelhouse's download folder, once empty
        downloads_dir(ctx.workspace).rmdir()
    return report


# --- what there is -----------------------------------------------------------------------------------


def _half_made(ctx: StageContext, downloads: Path) -> Iterator[CleanItem]:
    folders = {Path(a.path).parent for a in ctx.recipe.artifacts.values()} | {downloads / "partial"}
    found = {path: (pid, None) for parent in sorted(folders) for path, pid in abandoned(parent)}
    ws = ctx.workspace
    for name in ctx.recipe.sources:  # clones: an old-named one was made under the workspace's lock
        for path, pid in leftovers(ws.root / ctx.recipe.source_path(name), kind="clone"):
            found[path] = (pid, ws.busy_lock)
    for root in (bundle_git_cache(ws), bundle_cache([ctx])):  # mirrors: an old-named one under the mirror's
        for path, pid, mirror in leftovers_in(root, kind="mirror"):
            found[path] = (pid, mirror.with_suffix(".lock"))
    for path, (pid, lock) in sorted(found.items()):
        why = (f"left by flagtree-cpu pid {pid}, which is no longer running" if pid is not None else
               "left half made by an interrupted run of an older flagtree-cpu")
        yield CleanItem("half-made folder", path, disk_usage(path), True, why, None if pid is not None else lock)


def _downloads(root: Path) -> Iterator[CleanItem]:
    blobs, partial = root / "blobs", root / "partial"
    for blob in sorted(blobs.glob("*")) if blobs.is_dir() else ():
        if blob.suffix == ".json" or not blob.is_file():
            continue
        url = _blob_url(blob)
        lock = root / "locks" / f"{url_key(url)}.lock" if url else None
        yield CleanItem("download", blob, disk_usage(blob) + disk_usage(blob.with_name(blob.name + ".json")),
                        True, f"verified tarball of {url or 'an unknown URL'} (the published tree stays)", lock)
    for part in sorted(partial.glob("*.part")) if partial.is_dir() else ():
        lock = root / "locks" / f"{part.stem}.lock"
        yield CleanItem("partial download", part, disk_usage(part) + disk_usage(source_note(part)), True,
                        "an unfinished download (a later fetch starts it again)", lock)


def _wheelhouse_parts(ctx: StageContext) -> Iterator[CleanItem]:
    """A wheel download from a wheelhouse that stalled or was interrupted; the workspace's lock guards it (only a
    command holding the workspace downloads into it)."""
    for part in partial_downloads(ctx.workspace):
        yield CleanItem("partial download", part, disk_usage(part) + disk_usage(source_note(part)), True,
                        "an unfinished wheel download from a wheelhouse (a later build that takes that wheel "
                        "downloads it again)", ctx.workspace.busy_lock)


def _trees(ctx: StageContext, downloads: Path) -> Iterator[CleanItem]:
    used = {Path(a.path) for a in ctx.recipe.artifacts.values()}
    for parent in sorted({p.parent for p in used}):
        try:
            entries = sorted(os.scandir(parent), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue  # our half-made folders are above; links (setup.py's llvm-<suffix>) are not trees
            if path in used:
                yield CleanItem("tree", path, 0, False, f"used by recipe {ctx.recipe.name}")
            elif read_stamp(path) is None:
                yield CleanItem("tree", path, 0, False, "not published by flagtree-cpu: left alone")
            else:
                yield _published_tree(ctx, path, downloads)


def _published_tree(ctx: StageContext, path: Path, downloads: Path) -> CleanItem:
    """A tree flagtree-cpu published that this recipe does not use: removed only when this recipe in this
    workspace published it, it is not shared, and no other workspace recorded using it (``ownership``)."""
    stamp = read_stamp(path) or {}
    us = Owner.of(ctx.recipe, ctx.workspace.root)
    owner, users = owner_of(stamp), [u for u in users_of(stamp) if not u.same_place(us)]
    why = ("published by an older flagtree-cpu that did not record for which workspace: left alone (remove it "
           f"by hand when no workspace uses it: rm -r {path})" if owner is None else
           f"shared, published by {owner.words()}: a shared tree is never removed" if is_shared(stamp) else
           f"published by {owner.words()}: left alone (clean it from there)" if not owner.same_place(us) else
           f"also used by {users[0].words()}: left alone" if users else None)
    if why is not None:
        return CleanItem("tree", path, 0, False, why)
    lock = downloads / "locks" / f"publish-{url_key(str(path))}.lock"  # as fetch publishes
    return CleanItem("tree", path, disk_usage(path), True, f"published by flagtree-cpu from {stamp.get('url', '?')}; "
                     f"recipe {ctx.recipe.name} does not use it", lock)


def _blob_url(blob: Path) -> str | None:
    try:
        meta = json.loads(blob.with_name(blob.name + ".json").read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return meta.get("url") if isinstance(meta, dict) and isinstance(meta.get("url"), str) else None


# --- removing ---------------------------------------------------------------------------------------------


def _remove(item: CleanItem) -> CleanItem:
    if not item.removed:
        return item
    writers = users(item.path) if item.kind == "half-made folder" else []
    if writers:  # a git a killed run left behind: removing would race it
        return CleanItem(item.kind, item.path, item.size, False, f"still being written by pid {writers[0].pid} "
                         f"({writers[0].command}): left alone; stop it (kill {writers[0].pid}) and clean again")
    if item.lock is None or not item.lock.parent.is_dir():
        _delete(item)
        return item
    try:
        with exclusive(item.lock, wait=False, note="clean"):
            _delete(item)
    except Held as held:
        return CleanItem(item.kind, item.path, item.size, False,
                         f"in use by flagtree-cpu pid {held.holder.split()[0]}: left alone")
    return item


def _delete(item: CleanItem) -> None:
    path = item.path
    if item.kind == "download":  # its notes go with it: the URL's note would point at nothing
        url = _blob_url(path)
        note = path.parent.parent / "urls" / url_key(url) if url else None
        if note is not None and note.is_file() and note.read_text().strip() == path.name:
            note.unlink()
        path.with_name(path.name + ".json").unlink(missing_ok=True)
    elif item.kind == "partial download":
        source_note(path).unlink(missing_ok=True)
    elif item.kind == "half-made folder":
        discard(path)  # renamed aside first: a half-removed folder never keeps its name
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def disk_usage(path: Path) -> int:
    """Bytes a file or folder takes on disk (what removing it frees); hard links counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            info = os.lstat(current)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        total += info.st_blocks * 512
        if stat.S_ISDIR(info.st_mode):
            try:
                stack.extend(Path(e.path) for e in os.scandir(current))
            except OSError:
                continue
    return total
