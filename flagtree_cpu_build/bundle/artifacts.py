"""The artifact part of a bundle: every artifact of a recipe stack, as the download cache keeps it (by sha256).

An artifact is taken from the download cache when the cache holds the file the recipe (or the lock) names;
otherwise it is downloaded as fetch downloads (``download.Downloader``: mirrors first, resumable, every stated
digest verified) — but not unpacked or published: the machine it is for does that. Bytes a stated digest
verified become the cache's blob at once (they are the file the recipe names). Bytes no digest was known for
(trust on first use) must first read as a whole archive (every member of a tarball read through, a zip's
checksums tested): the cache keeps no bytes that a server broke, and the lock must not pin them. The sha256 is
then recorded in the lock, as fetch records it, so the board's `fetch --offline` knows what to expect.
"""

from __future__ import annotations

import lzma
import os
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..archive import TarballProblem
from ..artifact_cache import ArtifactCache, url_key
from ..artifact_kinds import kind_of
from ..digest import hash_file_all, mismatches
from ..download import Downloader, discard_part
from ..errors import ArtifactError, SourceError
from ..lockfile import ArtifactLock, expected_digests, locked_artifact, read_lock, update_lock
from ..mirrors import candidate_urls
from ..probes import artifact_pin_failures
from ..recipe.reads import unread
from ..stages.artifacts.stream import retry_fix
from ..workspace import user_cache_dir

if TYPE_CHECKING:
    from ..mirrors import MirrorRule
    from ..recipe import Artifact
    from ..stagekit.stage import StageContext


@dataclass(frozen=True)
class BundledArtifact:
    path: Path  # the cache blob (or the finished download)
    sha256: str
    meta: dict[str, Any]  # {"recipe", "name", "url", "digest": {algorithm: hex}}
    served_from: str  # the URL that served the bytes, or "download cache"
    warnings: tuple[str, ...] = ()


def collect_artifacts(stack: Sequence[StageContext], cache_dir: Path | None,
                      mirrors: Sequence[MirrorRule] = ()) -> list[BundledArtifact]:
    """Every artifact of every recipe of the stack, in the download cache (or just downloaded)."""
    found = []
    for ctx in stack:
        recipe, ws = ctx.recipe, ctx.workspace
        waiting = [name for name, artifact in recipe.artifacts.items() if unread(artifact)]
        if waiting:  # its URL is read from a source's file: not known before the source is synced
            raise SourceError(f"the url of {', '.join(waiting)} ({recipe.name}) is read from a source that is not "
                              "checked out yet", fix="flagtree-cpu sync, then create the bundle again")
        failures = artifact_pin_failures(recipe, ws, missing_ok=True)
        if failures:  # the synced source disagrees with the artifact: the board would get the wrong LLVM
            raise ArtifactError(f"the artifacts of {recipe.name} do not match its sources", details=tuple(failures),
                                fix="pin compatible versions, or update the artifact url and digest")
        cache = ArtifactCache((cache_dir or user_cache_dir(os.environ)) / "downloads", ctx.ui)
        lock = read_lock(ws.lock_file)
        entries: dict[str, ArtifactLock] = {}
        for name, artifact in recipe.artifacts.items():
            got = _one(name, artifact, expected_digests(lock, name, artifact), cache, ctx, mirrors)
            found.append(replace(got, meta={"recipe": recipe.name, **got.meta}))
            entry = locked_artifact(lock, name, artifact.url)
            if entry is None or entry.sha256 != got.sha256:
                others = {k: v for k, v in got.meta["digest"].items() if k != "sha256"}
                entries[name] = ArtifactLock(url=artifact.url, sha256=got.sha256, size=got.path.stat().st_size,
                                             served_from=got.served_from, digest=others)
        if entries:  # as fetch records them: the board's fetch --offline then knows each file's sha256
            update_lock(ws.lock_file, recipe.name, recipe.digest,
                        lambda base, new=entries: replace(base, artifacts={**base.artifacts, **new}),
                        variant=recipe.variant)
    return found


def _one(name: str, artifact: Artifact, expected: dict[str, str], cache: ArtifactCache, ctx: StageContext,
         mirrors: Sequence[MirrorRule]) -> BundledArtifact:
    stated = sorted(artifact.expected_digests())
    with cache.locked(url_key(artifact.url)):
        sha = expected.get("sha256") or cache.sha_seen_at(artifact.url)
        blob = cache.blob(sha) if sha else None
        if blob is not None:
            digests = hash_file_all(blob, stated) if set(stated) - {"sha256"} else {"sha256": blob.name}
            if not mismatches(expected, digests):
                ctx.ui.info(f"artifact {name}: {blob.name[:12]} from the download cache")
                return BundledArtifact(blob, blob.name, _meta(name, artifact, digests), "download cache")
        result = Downloader(ctx.ui).fetch(candidate_urls(artifact.url, mirrors), cache.part_path, label=name,
                                          expected=expected)
        digests = {a: result.digests[a] for a in ("sha256", *stated) if a in result.digests}
        meta = _meta(name, artifact, digests)
        warnings: tuple[str, ...] = ()
        if not expected:  # nothing vouches for these bytes: they must at least be a whole archive
            _check_readable(name, artifact, result.part, result.url, ctx)
            warnings = (f"artifact {name}: no digest in the recipe or the lock; trusting it on first use and "
                        f"recording sha256 {result.sha256} in the lock file",)
        blob = cache.add(result.part, result.sha256, artifact.url, served_from=result.url)
        return BundledArtifact(blob, result.sha256, meta, result.url, warnings)


def _check_readable(name: str, artifact: Artifact, path: Path, url: str, ctx: StageContext) -> None:
    """Read the archive through without unpacking it; a damaged one is dropped (TarballProblem, exit 4)."""
    try:
        _read_through(name, artifact, path, ctx)
    except _ZIP_DAMAGE as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # the file system's failure, not the archive's
        discard_part(path)
        raise TarballProblem(f"{name} is not a readable zip: {exc}; the archive: downloaded from {url}",
                             fix=retry_fix(name, artifact)) from None
    except TarballProblem as problem:
        discard_part(path)
        problem.name_source(f"downloaded from {url}")
        problem.fix = retry_fix(name, artifact)
        raise


# what reading a damaged zip raises: its own errors, the decompressors' (bz2: an OSError without errno), EOFError
_ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, NotImplementedError, OSError)


def _read_through(name: str, artifact: Artifact, path: Path, ctx: StageContext) -> None:
    read_through = kind_of(artifact).read_through  # None: a plain file, whole once its bytes are
    with ctx.ui.progress(f"checking {name}", total=path.stat().st_size, unit="bytes") as task:
        if read_through is not None:
            read_through(artifact, path, label=name, progress=task.update)


def _meta(name: str, artifact: Artifact, digests: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "url": artifact.url, "digest": dict(sorted(digests.items()))}
