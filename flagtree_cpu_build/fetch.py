"""The fetch stage: every recipe artifact downloaded (or reused), verified, and published
where the build — and FlagTree's own setup.py — will look for it.

For each artifact: if our stamp in the published tree says it is the expected file,
there is nothing to do (no network, no reading the tree). Otherwise the tarball comes
from ``--from``, the download cache, a tarball lying next to the destination (the guide's
``wget`` leaves one), or a download (mirrors first); it is verified against the recipe's
sha256, the lock's, or — trust on first use — recorded in the lock with a warning. A
tree at the destination that we did not publish is verified against the tarball by
listing and adopted, or left alone with a message: never clobbered. Nothing else under
``~/.triton/llvm`` is touched.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .artifact_cache import ArtifactCache, url_key
from .errors import ArtifactError
from .extract import differences_from, publish, read_stamp, unpack, write_markers
from .lockfile import ArtifactLock, Lock, locked_artifact, read_lock, update_lock
from .mirrors import MirrorRule, candidate_urls
from .probes import artifact_pin_failures
from .recipe import Artifact
from .stages import Action, StageContext, StageResult
from .workspace import user_cache_dir


@dataclass(frozen=True)
class FetchOptions:
    offline: bool = False
    require_hashes: bool = False
    frozen: bool = False
    cache_dir: Path | None = None  # the per-user cache root; downloads live in <root>/downloads
    mirrors: Sequence[MirrorRule] = ()
    from_files: Mapping[str, Path] = field(default_factory=dict)  # artifact name -> a file the user downloaded


@dataclass(frozen=True)
class _Outcome:
    action: Action
    lock: ArtifactLock | None
    warning: str | None = None


def run_fetch(ctx: StageContext, options: FetchOptions) -> StageResult:
    start = time.monotonic()
    ws, recipe = ctx.workspace, ctx.recipe
    pin_failures = [f for f in artifact_pin_failures(recipe, ws) if "has no" not in f]
    if pin_failures:  # the source is here and disagrees: stop before downloading the wrong LLVM
        raise ArtifactError("the recipe's artifacts do not match its sources", details=tuple(pin_failures),
                            fix="pin compatible versions, or update the artifact url and sha256")
    lock = read_lock(ws.lock_file)
    expected = {name: _expected_sha(name, artifact, lock, options) for name, artifact in recipe.artifacts.items()}
    cache = ArtifactCache((options.cache_dir or user_cache_dir(os.environ)) / "downloads", ctx.ui)
    missing_offline: list[str] = []
    outcomes: dict[str, _Outcome] = {}
    for name, artifact in recipe.artifacts.items():
        outcome = _fetch_one(name, artifact, expected[name], cache, ctx, options, missing_offline)
        if outcome is not None:
            outcomes[name] = outcome
    if missing_offline:
        raise ArtifactError(
            f"{len(missing_offline)} artifact(s) are not in the download cache ({cache.root}) and --offline "
            "forbids downloading", details=tuple(missing_offline),
            fix="on a connected machine run `flagtree-cpu fetch --cache-dir DIR` and copy DIR here (then "
            "--cache-dir DIR), or download each URL and import it: flagtree-cpu fetch --offline --from NAME=FILE")
    new_entries = {name: o.lock for name, o in outcomes.items() if o.lock is not None}
    if not options.frozen:
        update_lock(ws.lock_file, recipe.name, recipe.digest,
                    lambda base: replace(base, artifacts={**base.artifacts, **new_entries}))
    warnings = tuple(o.warning for o in outcomes.values() if o.warning)
    return StageResult("fetch", tuple(o.action for o in outcomes.values()), warnings, time.monotonic() - start)


def _expected_sha(name: str, artifact: Artifact, lock: Lock | None, options: FetchOptions) -> str | None:
    entry = locked_artifact(lock, name, artifact.url)
    locked = entry.sha256 if entry else None
    if artifact.sha256:
        if options.frozen and locked != artifact.sha256.lower():
            raise ArtifactError(f"--frozen: the lock records {locked or 'nothing'} for artifact {name}, the recipe "
                                f"says {artifact.sha256.lower()}", fix="run `flagtree-cpu fetch` without --frozen "
                                "and commit the updated lock file")
        return artifact.sha256.lower()
    if locked:
        return locked
    if options.require_hashes or options.frozen:
        flag = "--require-hashes" if options.require_hashes else "--frozen"
        raise ArtifactError(f"{flag}: artifact {name} has no sha256 in the recipe or the lock file, so its "
                            f"download could not be verified ({artifact.url})",
                            fix=f"add `sha256:` to artifacts.{name} (sha256sum of the tarball), or run "
                            "`flagtree-cpu fetch` once without it to record the digest in the lock file")
    return None


def _fetch_one(name: str, artifact: Artifact, expected: str | None, cache: ArtifactCache, ctx: StageContext,
               options: FetchOptions, missing_offline: list[str]) -> _Outcome | None:
    dest = Path(artifact.path)
    stamp = read_stamp(dest)
    if stamp and (stamp.get("sha256") == expected or (expected is None and stamp.get("url") == artifact.url)):
        _repair_version_file(dest, artifact)
        lock = ArtifactLock(url=artifact.url, sha256=stamp["sha256"], size=stamp.get("size"))
        return _Outcome(Action(name, "ok", f"published at {dest}", {"sha256": stamp["sha256"], "path": str(dest)}),
                        lock)
    streamed: Path | None = None  # the tree, unpacked while it downloaded (not yet published)
    with cache.locked(url_key(artifact.url)):
        found = _local_tarball(name, artifact, expected, cache, options, dest)
        if found is None:
            if _is_foreign(dest):
                raise _foreign_tree_error(name, dest, artifact)
            if options.offline:
                sha = expected or "unknown (trusted on first use)"
                missing_offline.append(f"{name}: {artifact.url} (sha256 {sha})")
                return None
            found, streamed = _download(name, artifact, expected, cache, ctx, options)
    try:
        return _publish(name, artifact, dest, found, expected, streamed, cache, ctx)
    finally:
        if streamed is not None and streamed.exists():  # another process published first, or publishing failed
            shutil.rmtree(streamed, ignore_errors=True)


def _publish(name: str, artifact: Artifact, dest: Path, found: tuple[str, Path, str], expected: str | None,
             streamed: Path | None, cache: ArtifactCache, ctx: StageContext) -> _Outcome:
    sha, blob, served_from = found
    warning = None if expected else (f"artifact {name}: no sha256 in the recipe; trusting it on first use and "
                                     f"recording sha256 {sha} in the lock file")
    lock = ArtifactLock(url=artifact.url, sha256=sha, size=blob.stat().st_size, served_from=served_from)
    with cache.locked(f"publish-{url_key(str(dest))}"):
        stamp = read_stamp(dest)
        if stamp and stamp.get("sha256") == sha:  # another process published it meanwhile
            return _Outcome(Action(name, "ok", f"published at {dest}", {"sha256": sha, "path": str(dest)}), lock,
                            warning)
        if _is_foreign(dest):
            return _adopt(name, dest, blob, artifact, sha, lock, warning)
        partial = streamed or unpack(blob, dest, strip=artifact.strip_components, ui=ctx.ui, label=name)
        write_markers(partial, url=artifact.url, sha256=sha, size=blob.stat().st_size,
                      version_file=artifact.version_file)
        status = "updated" if dest.exists() else "created"
        publish(partial, dest)
    data = {"sha256": sha, "path": str(dest), "served_from": served_from}
    return _Outcome(Action(name, status, f"{sha[:12]} published at {dest}", data), lock, warning)


def _local_tarball(name: str, artifact: Artifact, expected: str | None, cache: ArtifactCache,
                   options: FetchOptions, dest: Path) -> tuple[str, Path, str] | None:
    """The tarball without the network: --from, the cache, or one left next to the destination."""
    if name in options.from_files:
        source = options.from_files[name].expanduser()
        if not source.is_file():
            raise ArtifactError(f"--from {name}={source}: no such file", fix="give the path of the downloaded tarball")
        return _imported(cache, source, artifact, expected, f"--from {source}")
    if expected and (blob := cache.blob(expected)):
        return expected, blob, "download cache"
    if not expected and (seen := cache.sha_seen_at(artifact.url)) and (blob := cache.blob(seen)):
        return seen, blob, "download cache"
    beside = dest.parent / artifact.url.rstrip("/").rsplit("/", 1)[-1]
    if beside.is_file():  # the install guide's `wget` into ~/.triton/llvm leaves the tarball there
        return _imported(cache, beside, artifact, expected, f"tarball found at {beside}")
    return None


def _imported(cache: ArtifactCache, source: Path, artifact: Artifact, expected: str | None,
              origin: str) -> tuple[str, Path, str]:
    sha, blob = cache.import_file(source, artifact.url)
    if expected and sha != expected:
        raise ArtifactError(f"{source} is not the expected file: sha256 {sha}, expected {expected} "
                            f"({source.stat().st_size} bytes)",
                            fix=f"download it again from {artifact.url}, or check the recipe's sha256")
    return sha, blob, origin


def _download(name: str, artifact: Artifact, expected: str | None, cache: ArtifactCache, ctx: StageContext,
              options: FetchOptions) -> tuple[tuple[str, Path, str], Path | None]:
    """Download into the cache while another thread unpacks the bytes as they arrive (the unpacking of
    ~800 MB no longer waits for the last byte). The unpacked tree is published only after the sha256 of
    the whole file is verified; if the download had to start over, the finished file is unpacked instead."""
    from .download import Downloader, GrowingFile, StreamStale

    part = cache.part_path(artifact.url)
    urls = candidate_urls(artifact.url, options.mirrors)
    dest = Path(artifact.path)
    growing = GrowingFile(part)
    into = dest.with_name(f".{dest.name}.flagtree-cpu-partial-{os.getpid()}")
    unpacked: dict[str, Any] = {}

    def unpack_as_it_arrives() -> None:
        try:
            unpacked["tree"] = unpack(part, dest, strip=artifact.strip_components, ui=ctx.ui, label=name,
                                      reader=growing, partial=into)
        except BaseException as exc:  # noqa: BLE001 - judged by the downloading thread below
            unpacked["error"] = exc

    unpacker = threading.Thread(target=unpack_as_it_arrives, name=f"unpack {name}", daemon=True)
    with ctx.ui.concurrent():
        unpacker.start()
        try:
            result = Downloader(ctx.ui, watcher=growing).fetch(urls, part, label=name, expected_sha=expected)
        except BaseException:
            growing.abort()
            unpacker.join(timeout=30)
            growing.close()
            shutil.rmtree(into, ignore_errors=True)
            raise
        growing.complete()
        unpacker.join()
    growing.close()
    blob = cache.add(result.part, result.sha256, artifact.url, served_from=result.url)
    error = unpacked.get("error")
    if error is not None and not isinstance(error, StreamStale):
        raise error  # a hostile or broken tarball: as when unpacking the cached file
    return (result.sha256, blob, result.url), unpacked.get("tree")


def _is_foreign(dest: Path) -> bool:
    return (dest.exists() or dest.is_symlink()) and read_stamp(dest) is None


def _foreign_tree_error(name: str, dest: Path, artifact: Artifact) -> ArtifactError:
    return ArtifactError(
        f"{dest} already exists and was not published by flagtree-cpu; without the tarball it cannot be verified, "
        "so it is left alone",
        fix=f"verify it against the tarball by listing (no re-extraction): flagtree-cpu fetch --from {name}=FILE; "
        f"or move it away (mv {dest} {dest}.manual) to let flagtree-cpu download {artifact.url} and publish it")


def _adopt(name: str, dest: Path, blob: Path, artifact: Artifact, sha: str, lock: ArtifactLock,
           warning: str | None) -> _Outcome:
    """A tree someone else unpacked: keep it if it matches the tarball, else leave it alone and say so."""
    differences = differences_from(blob, dest, strip=artifact.strip_components)
    version = dest / artifact.version_file if artifact.version_file else None
    if version is not None and version.is_file() and version.read_text() != artifact.url:
        differences.append(f"{artifact.version_file} names {version.read_text()!r}, not {artifact.url}")
    if differences:
        raise ArtifactError(
            f"{dest} was not published by flagtree-cpu and differs from the verified tarball; it is left alone",
            details=tuple(differences),
            fix=f"move it away (mv {dest} {dest}.manual) so flagtree-cpu can publish the verified tree there")
    write_markers(dest, url=artifact.url, sha256=sha, size=blob.stat().st_size, version_file=artifact.version_file)
    data: dict[str, Any] = {"sha256": sha, "path": str(dest)}
    return _Outcome(Action(name, "updated", f"existing tree at {dest} matches the tarball; adopted", data),
                    lock, warning)


def _repair_version_file(dest: Path, artifact: Artifact) -> None:
    """Our tree lost its version.txt (someone cleaned up): without it setup.py would wipe ~/.triton/llvm."""
    if artifact.version_file:
        version = dest / artifact.version_file
        if not version.is_file() or version.read_text() != artifact.url:
            version.write_text(artifact.url)
