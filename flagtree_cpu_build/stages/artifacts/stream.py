"""A download unpacked as it arrives: the network and the disk work at the same time.

The download writes the ``.part`` file in this thread; another thread unpacks it through a
``GrowingFile`` into a folder of our own (``partials``), so unpacking ~800 MB no longer waits
for the last byte. Nothing is published or remembered until the whole file's digests are
verified (``fetch``). Either side can stop the other: a failed unpack stops the download (a
damaged or hostile file is dropped, a limit or a full disk keeps the ``.part`` for the next
run); a failed or interrupted download stops the unpacker; if the file had to start over
after bytes were unpacked, the finished file is unpacked instead.

Before any body is written, the free space is checked for the rest of the download and the
unpacked tree (the server's Content-Length, the recipe's ``unpacked_size``).

Only the kinds whose ``artifact_kinds`` entry has an ``unpack_stream`` (tarballs) are unpacked as they
arrive: a zip's table of contents is at its end, and a plain file has nothing to unpack, so those are
downloaded first and handled by ``fetch``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ...archive import LimitExceeded, TarballProblem, limits_for
from ...artifact_cache import ArtifactCache
from ...artifact_kinds import Unpack, kind_of
from ...diskspace import DiskFull, both_hint, cache_hint, require_free, same_file_system, tree_hint
from ...download import Downloaded, Downloader, discard_part
from ...growing import ConsumerFailed, GrowingFile, StreamAborted, StreamStale
from ...interrupts import Latch, interrupts_deferred
from ...partials import PartialFolder
from ...progress import human_bytes
from ...recipe import Artifact
from ...stagekit.stage import StageContext


@dataclass
class Tarball:
    """An artifact's bytes in hand: not yet the remembered identity unless ``kind`` is "cache"."""

    sha: str
    path: Path
    origin: str  # the URL or file that served the bytes (the lock's served_from)
    kind: Literal["cache", "download", "import"]
    url: str = ""  # for a download: the candidate URL whose .part holds the bytes
    tree: PartialFolder | None = None  # unpacked while it downloaded, not yet published
    holder: PartialFolder | None = None  # an import's copy lives in this folder until kept
    digests: dict[str, str] = field(default_factory=dict)  # sha256 and the other algorithms computed (md5, sha512)

    def __post_init__(self) -> None:
        self.digests = {**self.digests, "sha256": self.sha}

    def release(self) -> None:
        """Whatever was not published or kept goes (idempotent)."""
        for folder in (self.tree, self.holder):
            if folder is not None:
                folder.remove()


def retry_fix(name: str, artifact: Artifact) -> str:
    """How to get good bytes after a download turned out broken (and was dropped)."""
    return (f"nothing of this download was kept: run the same command again to download it again; if it fails the "
            f"same way, the server or mirror serves a broken file: try another mirror (--mirror), or download "
            f"{artifact.url} yourself and import it (--from {name}=FILE)")


STOP_GRACE_S = 30.0  # how long a stopped download waits for its unpacker to let go of the folder


class _Unpacker(threading.Thread):
    """Unpacks the growing file into a folder of its own; its outcome is read after ``done`` (a Latch: a join
    interrupted by Ctrl-C would not wait, and an Event can be left locked by one, see interrupts.py)."""

    def __init__(self, name: str, artifact: Artifact, unpack: Unpack, folder: PartialFolder, growing: GrowingFile,
                 ctx: StageContext):
        super().__init__(name=f"unpack {name}", daemon=True)
        self.label, self.artifact, self.folder, self.growing, self.ctx = name, artifact, folder, growing, ctx
        self.unpack = unpack
        self.error: BaseException | None = None
        self.done = Latch()

    @classmethod
    def started(cls, name: str, artifact: Artifact, unpack: Unpack, dest: Path, ctx: StageContext) -> _Unpacker:
        """Its folder beside ``dest``, the reader of the download, and the thread, running. Called with interrupts
        deferred: a Ctrl-C during Thread.start (which waits on an Event) can strand the thread before it runs."""
        folder = PartialFolder.create(dest)
        unpacker = cls(name, artifact, unpack, folder, GrowingFile(stops=(folder.stop, ctx.ui.cancel)), ctx)
        unpacker.start()
        return unpacker

    def run(self) -> None:
        try:
            with self.folder.writing():
                self.unpack(self.artifact, self.growing, self.folder.tree, ui=self.ctx.ui, label=self.label,
                            stop=self.folder.stop,
                            limits=limits_for(self.label, self.artifact.unpacked_size, self.artifact.unpacked_entries))
        except BaseException as exc:  # noqa: BLE001 - judged by the downloading thread
            self.error = exc
            if not isinstance(exc, (StreamStale, StreamAborted)):
                self.growing.fail()  # no use downloading the rest
        finally:
            self.done.set()

    def stop(self) -> None:
        """The download ended early (failed, or Ctrl-C): the unpacker gives up at its next read; its folder goes."""
        self.growing.abort()
        if not self.done.wait(timeout=STOP_GRACE_S):  # a thread stuck in a write is left behind: said, not waited on
            self.ctx.ui.warn(f"{self.label}: the unpacking did not stop within {STOP_GRACE_S:g} s of the download's "
                             f"end; its half-made folder {self.folder.path} is removed anyway")
        self.growing.close()
        self.folder.remove()


def download_and_unpack(name: str, artifact: Artifact, expected: Mapping[str, str], cache: ArtifactCache,
                        ctx: StageContext, candidates: Sequence[str], dest: Path) -> Tarball:
    """Download ``artifact`` from ``candidates`` (in order: mirrors first) while unpacking it beside ``dest``;
    every digest in ``expected`` must match. The Tarball's ``tree`` holds the unpacked tree, or is None when the
    file had to start over or its kind is not unpacked as it arrives (then fetch unpacks the finished file)."""
    unpack = kind_of(artifact).unpack_stream
    if unpack is None:
        downloader = Downloader(ctx.ui, on_size=_space_check(name, artifact, cache, dest))
        result = downloader.fetch(candidates, cache.part_path, label=name, expected=expected)
        return Tarball(result.sha256, result.part, result.url, "download", url=result.url, digests=result.digests)
    unpacker: _Unpacker | None = None
    try:
        with ctx.ui.concurrent():
            with interrupts_deferred():  # a Ctrl-C while these start is taken at the end, here in the try
                unpacker = _Unpacker.started(name, artifact, unpack, dest, ctx)
            downloader = Downloader(ctx.ui, watcher=unpacker.growing, on_size=_space_check(name, artifact, cache, dest))
            result = downloader.fetch(candidates, cache.part_path, label=name, expected=expected)
            unpacker.growing.complete()
            unpacker.done.wait()
        unpacker.growing.close()
        return _unpacked(result, unpacker, name, artifact, cache)
    except BaseException as exc:
        if unpacker is None:
            raise
        unpacker.stop()
        if isinstance(exc, ConsumerFailed) and unpacker.error is not None:
            growing = unpacker.growing
            url = next((u for u in candidates if cache.part_path(u) == growing.path), artifact.url)
            raise _unpack_failed(unpacker.error, name, artifact, cache, growing.path, url) from None
        raise


def _unpacked(result: Downloaded, unpacker: _Unpacker, name: str, artifact: Artifact, cache: ArtifactCache) -> Tarball:
    """The download is complete and verified, and the unpacker has finished: its tree, or why there is none."""
    error = unpacker.error
    if error is None:
        return Tarball(result.sha256, result.part, result.url, "download", url=result.url, tree=unpacker.folder,
                       digests=result.digests)
    unpacker.folder.remove()
    if isinstance(error, StreamStale):
        return Tarball(result.sha256, result.part, result.url, "download", url=result.url, digests=result.digests)
    raise _unpack_failed(error, name, artifact, cache, result.part, result.url)


def _unpack_failed(error: BaseException, name: str, artifact: Artifact, cache: ArtifactCache,
                   part: Path | None, url: str) -> BaseException:
    """What the unpacker's failure means for the download: bad bytes are dropped, the rest kept."""
    if isinstance(error, TarballProblem):
        if part is not None:
            discard_part(part)
        error.name_source(f"downloaded from {url}")
        error.fix = retry_fix(name, artifact)
    elif isinstance(error, (LimitExceeded, DiskFull)) and part is not None and part.is_file():
        error.details = (*error.details, f"the download so far ({human_bytes(part.stat().st_size)}, {part}) is "
                         "kept: the next run continues it")
    return error


def _space_check(name: str, artifact: Artifact, cache: ArtifactCache, dest: Path) -> Callable[[str, int | None, int],
                                                                                            None]:
    """Once the size is known, before the body: room for the rest of the download and the unpacked tree.
    Checked once per run: later attempts find the space taken by what this run already wrote."""
    checked: list[bool] = []

    def check(url: str, total: int | None, have: int) -> None:
        if total is None or checked:
            return
        checked.append(True)
        rest, tree = total - have, artifact.unpacked_size or total  # the tree is at least the archive's size
        at_least = "" if artifact.unpacked_size else " at least"
        keep = f"nothing of {name} was downloaded in this run" + (f"; the {human_bytes(have)} from an earlier run "
                                                                   "are kept" if have else "")
        partial = cache.root / "partial"
        if same_file_system(partial, dest.parent):
            require_free(partial, rest + tree, f"downloading {name} ({human_bytes(rest)}) and unpacking it "
                         f"({human_bytes(tree)}{at_least}) on one file system", keep_note=keep,
                         hint=both_hint(dest.parent, cache.root))
        else:
            require_free(partial, rest, f"downloading {name} ({human_bytes(rest)})", keep_note=keep,
                         hint=cache_hint(cache.root))
            require_free(dest.parent, tree, f"unpacking {name} ({human_bytes(tree)}{at_least})", keep_note=keep,
                         hint=tree_hint(dest.parent))

    return check
