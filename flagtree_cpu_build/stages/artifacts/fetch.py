"""The fetch stage: every recipe artifact downloaded (or reused), verified, and published
where the build — and FlagTree's own setup.py — will look for it.

The run acts on the artifacts' plan (``stages/artifacts/plan``, computed for the same options): an
item the plan found current has nothing to do (no network, no reading the tree) but its
version file mended. For the others the plan's item carries the digests the file must have,
where a download comes from (mirrors first), the download cache, and what is at the
destination. The tarball comes from ``--from``, the download cache, a tarball lying next to
the destination (the guide's ``wget`` leaves one), or a download (``stream``); it is verified
against every digest the recipe states (sha256, md5, sha512) and the lock's sha256, or —
trust on first use, only when no digest is known at all — recorded in the lock with a
warning. sha256 is always computed: it keys the download cache and the lock, whatever the
recipe states. How each kind (tarball, zip, plain file) is unpacked is ``artifact_kinds``'
table; ``root.find`` and ``after_unpack`` are ``artifact_tree``'s.

Bytes become the artifact's remembered identity (a cache blob, its notes, the lock entry)
only once their tarball has unpacked: a damaged, truncated or hostile file is dropped
entirely — the cache is as if it had never been downloaded — and the message says to run
again. A tarball that hits an unpack limit or a full disk is kept for the next run.

A tree at the destination that we did not publish is verified against the tarball by
listing and adopted, or left alone with a message: never clobbered. The destination is
looked at again under the publish lock, so a tree unpacked there after the plan is treated
the same way. Nothing else under ``~/.triton/llvm`` is touched, except our own half-made
folders whose process is gone (``partials``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...archive import TarballProblem, limits_for
from ...artifact_cache import ArtifactCache, url_key
from ...artifact_kinds import kind_of
from ...artifact_tree import finish
from ...digest import hash_file_all, mismatches
from ...diskspace import require_free, tree_hint
from ...errors import ArtifactError, SourceError, UsageError
from ...extract import read_stamp, write_markers
from ...invocation import elsewhere
from ...lockfile import ArtifactLock, Lock, locked_artifact, read_lock, update_lock
from ...partials import PartialFolder, sweep
from ...probes import artifact_pin_failures
from ...progress import human_bytes
from ...recipe import Artifact
from ...source_reads import read_locks
from ...stagekit.plan import PlanItem
from ...stagekit.stage import Action, RunOptions, StageContext, StageResult
from .adopt import adopt, foreign_tree_error, is_foreign
from .failures import all_failures
from .ownership import Owner, record_user, refusal
from .plan import FetchFacts, is_current, keep_served_from, other_digests, stamp_layout
from .stream import Tarball, download_and_unpack, retry_fix


@dataclass(frozen=True)
class _Outcome:
    action: Action
    lock: ArtifactLock | None
    warning: str | None = None


def run_fetch(ctx: StageContext, options: RunOptions, plan: Sequence[PlanItem]) -> StageResult:
    """Publish what ``plan`` (``stages/artifacts/plan.plan_artifacts`` for the same options) says is not current, with
    the digests, URLs, cache and destination its items carry; a current item only has its version file mended."""
    start = time.monotonic()
    ws, recipe = ctx.workspace, ctx.recipe
    _check_named_files(options)
    # a source not checked out yet (setup clones it meanwhile) is judged by sync's probes later
    pin_failures = artifact_pin_failures(recipe, ws, missing_ok=True)
    if pin_failures:  # the source is here and disagrees: stop before downloading the wrong LLVM
        raise ArtifactError("the recipe's artifacts do not match its sources", details=tuple(pin_failures),
                            fix="pin compatible versions, or update the artifact url and digest")
    _refuse_unread(plan)
    work = [(item, recipe.artifacts[item.subject], FetchFacts.of(item)) for item in plan if item.area == "artifacts"]
    lock = read_lock(ws.lock_file)
    for item, artifact, facts in work:
        _check_hash_rules(item.subject, artifact, facts, lock, options)
    caches = {facts.cache: ArtifactCache(Path(facts.cache), ctx.ui) for _, _, facts in work}
    for cache in caches.values():
        cache.sweep()
    missing_offline: list[str] = []
    outcomes: dict[str, _Outcome] = {}
    failures: list[tuple[str, ArtifactError]] = []
    published = {Path(item.data["path"]).name for item, _, _ in work}
    us = Owner.of(recipe, ws.root)
    for item, artifact, facts in work:
        sweep(Path(item.data["path"]).parent, ctx.ui.info, ctx.ui.warn, published=published)
        try:  # one artifact that fails does not stop the others: every failure is reported at the end
            outcome = (_published(item, artifact, facts, us) if item.current else
                       _fetch_one(item, artifact, facts, caches[facts.cache], ctx, options, missing_offline, us))
        except ArtifactError as error:
            failures.append((item.subject, error))
            continue
        if outcome is not None:
            outcomes[item.subject] = outcome
    if missing_offline:
        failures.append(("--offline", ArtifactError(
            f"{len(missing_offline)} artifact(s) are not in the download cache "
            f"({', '.join(caches)}) and --offline forbids downloading", details=tuple(missing_offline),
            fix=f"on a connected machine run `{elsewhere('fetch', '--cache-dir', 'DIR')}` and copy DIR here (then "
            "--cache-dir DIR), or download each URL and import it: flagtree-cpu fetch --offline --from NAME=FILE")))
    if outcomes or not failures:  # a run where nothing was published writes no lock (a refused tarball: none)
        _record(ctx, options, outcomes)
    if failures:
        raise all_failures(failures, len(work))
    warnings = tuple(o.warning for o in outcomes.values() if o.warning)
    return StageResult("fetch", tuple(o.action for o in outcomes.values()), warnings, time.monotonic() - start)


def _record(ctx: StageContext, options: RunOptions, outcomes: dict[str, _Outcome]) -> None:
    """The lock entries of what was published, also when another artifact failed."""
    ws, recipe = ctx.workspace, ctx.recipe
    new_entries = {name: o.lock for name, o in outcomes.items() if o.lock is not None}
    if not options.frozen:
        update_lock(ws.lock_file, recipe.name, recipe.digest,
                    lambda base: replace(base, artifacts={**base.artifacts, **{
                        name: keep_served_from(base, name, entry) for name, entry in new_entries.items()}},
                        reads={**base.reads, **read_locks(recipe, ws.root, base)}),  # the values it went by
                    variant=recipe.variant)


def _refuse_unread(plan: Sequence[PlanItem]) -> None:
    """An artifact whose url or path is still to be read from a source's file cannot be fetched: which file it
    needs, or why its value cannot be used (exit 3 and 4, as the plan said)."""
    stops = [i for i in plan if i.area == "artifacts" and "reads" in i.data and i.will == "stop"]
    if not stops:
        return
    if any(i.stop is ArtifactError for i in stops):
        raise ArtifactError("the recipe's artifacts cannot read their values from its sources",
                            details=tuple(f"{i.subject}: {i.detail}" for i in stops),
                            fix="correct the artifact's matches rule, or pin the source to a commit whose file has it")
    many = len(stops) > 1
    raise SourceError(f"{len(stops)} artifact{'s read their' if many else ' reads its'} url and path from a source "
                      "that is not checked out yet",
                      details=tuple(f"{i.subject}: {i.reason}" for i in stops),
                      fix="flagtree-cpu sync, then fetch again (flagtree-cpu setup does both, in that order)")


def _check_named_files(options: RunOptions) -> None:
    """A file named on the command line must exist, whatever is published: a typo is not success.
    A usage error (exit 2), like any other wrong argument, found before anything is done."""
    for name, path in options.fetch.from_files.items():
        source = path.expanduser()
        if not source.is_file():
            what = "is a folder, not a file" if source.is_dir() else "does not exist"
            raise UsageError(f"--from {name}={source}: {what}",
                             fix="give the path of the tarball you downloaded (e.g. ~/Downloads/llvm-....tar.gz)")


def _check_hash_rules(name: str, artifact: Artifact, facts: FetchFacts, lock: Lock | None,
                      options: RunOptions) -> None:
    """--frozen and --require-hashes, held against the digests the plan expects (empty: trust on first use)."""
    stated = artifact.expected_digests()
    if stated:  # a stated digest counts for --require-hashes, whichever algorithm it is
        entry = locked_artifact(lock, name, artifact.url)
        if options.frozen and (entry is None or not entry.agrees_with(stated)):
            recorded = _shown({**entry.digest, "sha256": entry.sha256}) if entry else "nothing"
            raise ArtifactError(f"--frozen: the lock records {recorded} for artifact {name}, the recipe says "
                                f"{_shown(stated)}", fix="run `flagtree-cpu fetch` without --frozen and commit the "
                                "updated lock file")
    elif not facts.expected and (options.require_hashes or options.frozen):
        flag = "--require-hashes" if options.require_hashes else "--frozen"
        raise ArtifactError(f"{flag}: artifact {name} has no sha256 (nor md5 or sha512) in the recipe or the lock "
                            f"file, so its download could not be verified ({artifact.url})",
                            fix=f"add `sha256:` to artifacts.{name} (sha256sum of the file; or `digest: {{md5: ...}}` "
                            "with the digest its publisher lists), or run `flagtree-cpu fetch` once without it to "
                            "record the digest in the lock file")


def _shown(digests: dict[str, str]) -> str:
    return ", ".join(f"{algorithm} {value.lower()}" for algorithm, value in sorted(digests.items()))


def _published(item: PlanItem, artifact: Artifact, facts: FetchFacts, us: Owner) -> _Outcome:
    """A tree the plan found current: its version file mended, its stamp's facts recorded in the lock, and this
    workspace recorded as a user of a tree another one published."""
    dest = Path(item.data["path"])
    _repair_version_file(dest, artifact)
    owner = Owner.read(item.data.get("owner"))
    if owner is not None and not owner.same_place(us):  # under the lock fetch publishes with: one stamp writer
        with ArtifactCache(Path(facts.cache), None).locked(f"publish-{url_key(str(dest))}"):
            record_user(dest, us)
    sha = item.data["sha256"]
    lock = ArtifactLock(url=artifact.url, sha256=sha, size=facts.size, digest=facts.digest)
    return _Outcome(Action(item.subject, "ok", f"published at {dest}", {"sha256": sha, "path": str(dest)}), lock)


def _fetch_one(item: PlanItem, artifact: Artifact, facts: FetchFacts, cache: ArtifactCache, ctx: StageContext,
               options: RunOptions, missing_offline: list[str], us: Owner) -> _Outcome | None:
    """A tree the plan found missing, different or foreign: its bytes from a local file or a download."""
    name, dest, expected = item.subject, Path(item.data["path"]), facts.expected
    refused = refusal(name, artifact, dest, read_stamp(dest), us, options.fetch.replace)
    if refused is not None:  # before any download: the tree is another's (looked at again before publishing)
        raise refused
    refuse = kind_of(artifact).refuse_unreadable
    if refuse is not None:
        refuse(name, artifact.url)
    with cache.locked(url_key(artifact.url)):
        got = _local_tarball(name, artifact, facts, cache)  # under the lock: another process may have cached it
        if got is None:
            if facts.tree == "foreign":
                raise foreign_tree_error(name, dest, artifact)
            if options.offline:
                known = _shown(expected) if expected else "sha256 unknown (trusted on first use)"
                missing_offline.append(f"{name}: {artifact.url} ({known})")
                return None
            got = download_and_unpack(name, artifact, expected, cache, ctx, facts.candidates, dest)
        try:
            return _install(name, artifact, dest, got, expected, cache, ctx, _Publisher(us, options.fetch.replace))
        finally:
            got.release()


@dataclass(frozen=True)
class _Publisher:
    us: Owner  # recorded as the tree's owner
    replace: tuple[str, ...]  # --replace: trees of another recipe or workspace the user lets us replace


def _install(name: str, artifact: Artifact, dest: Path, got: Tarball, expected: dict[str, str],
             cache: ArtifactCache, ctx: StageContext, publisher: _Publisher) -> _Outcome:
    warning = None if expected else (f"artifact {name}: no digest in the recipe; trusting it on first use and "
                                     f"recording sha256 {got.sha} in the lock file")
    size = got.path.stat().st_size
    others = other_digests(artifact, got.digests)
    lock = ArtifactLock(url=artifact.url, sha256=got.sha, size=size, served_from=got.origin, digest=others)
    data: dict[str, Any] = {"sha256": got.sha, "path": str(dest), "served_from": got.origin, **others}
    # Under the publish lock the destination is looked at again: since the plan, another process may have
    # published these very bytes, or someone may have unpacked a tree there, which must not be replaced.
    with cache.locked(f"publish-{url_key(str(dest))}"):
        stamp = read_stamp(dest)
        if is_current(stamp, {**others, "sha256": got.sha}, artifact.url, artifact):
            _keep(got, cache, artifact)  # another process published these very bytes meanwhile
            record_user(dest, publisher.us)
            return _Outcome(Action(name, "ok", f"published at {dest}", data), lock, warning)
        refused = refusal(name, artifact, dest, stamp, publisher.us, publisher.replace)  # published since the plan?
        if refused is not None:
            _keep(got, cache, artifact)
            raise refused
        owner = publisher.us.to_stamp(artifact.publish)
        try:
            if is_foreign(dest):  # what the plan foresaw ("foreign"), or a tree unpacked since: checked, adopted
                adopt(name, dest, got, artifact, ctx, owner)
                _keep(got, cache, artifact)
                return _Outcome(Action(name, "updated", f"existing tree at {dest} matches the tarball; adopted",
                                       data), lock, warning)
            folder = got.tree or _unpack_file(name, artifact, dest, got, ctx)
        except TarballProblem as problem:
            raise _forget(problem, got, cache, artifact, name) from None
        got.tree = folder  # released (removed) if anything below fails
        _keep(got, cache, artifact)  # the bytes unpacked: a root.find or clean-up the recipe gets wrong keeps them
        finish(folder.tree, artifact, label=name, ui=ctx.ui)
        write_markers(folder.tree, url=artifact.url, sha256=got.sha, size=size, version_file=artifact.version_file,
                      digests=others, layout={**stamp_layout(artifact), "owner": owner})
        status = "updated" if os.path.lexists(dest) else "created"
        folder.publish(dest)
    return _Outcome(Action(name, status, f"{got.sha[:12]} published at {dest}", data), lock, warning)


def _unpack_file(name: str, artifact: Artifact, dest: Path, got: Tarball, ctx: StageContext) -> PartialFolder:
    """Unpack a tarball already on disk (the cache, an import, a download that had to start over)."""
    needed = artifact.unpacked_size or got.path.stat().st_size  # at least the archive's own size
    require_free(dest.parent, needed, f"unpacking {name} ({human_bytes(needed)}"
                 + (")" if artifact.unpacked_size else " at least)"), hint=tree_hint(dest.parent))
    folder = PartialFolder.create(dest)
    try:
        with folder.writing():
            kind_of(artifact).unpack(artifact, got.path, folder.tree, ui=ctx.ui, label=name, stop=folder.stop,
                                     limits=limits_for(name, artifact.unpacked_size, artifact.unpacked_entries))
    except BaseException:
        folder.remove()
        raise
    return folder


def _keep(got: Tarball, cache: ArtifactCache, artifact: Artifact) -> None:
    """The tarball unpacked: now, and only now, it becomes the cache's blob for this URL."""
    if got.kind != "cache":
        got.path = cache.add(got.path, got.sha, artifact.url, served_from=got.origin)
        got.kind = "cache"
    else:
        cache.mend_notes(got.sha, artifact.url, served_from=got.origin)


def _forget(problem: TarballProblem, got: Tarball, cache: ArtifactCache, artifact: Artifact,
            name: str) -> TarballProblem:
    """Bytes that do not unpack are dropped wherever they were kept; the message says how to get good ones."""
    if got.kind == "cache":
        cache.forget(got.sha, artifact.url)
        problem.name_source(f"{artifact.url}, as kept in the download cache at {got.path}")
        problem.fix = (f"it was removed from the download cache: run the same command again to download "
                       f"{artifact.url} again; if that fails the same way, the server serves a broken file: try a "
                       f"mirror (--mirror), or download it yourself and import it (--from {name}=FILE)")
    elif got.kind == "download":
        cache.drop_part(got.url)
        problem.name_source(f"downloaded from {got.url}")
        problem.fix = retry_fix(name, artifact)
    else:
        problem.name_source(f"{got.origin}, a copy of {artifact.url}")
        problem.fix = f"{got.origin} is not a usable copy of {artifact.url}: download it again, then import it"
    return problem


def _local_tarball(name: str, artifact: Artifact, facts: FetchFacts, cache: ArtifactCache) -> Tarball | None:
    """The tarball without the network: --from, the cache, or one left next to the destination."""
    expected = facts.expected
    if facts.from_file is not None:
        source = Path(facts.from_file).expanduser()
        return _imported(cache, source, artifact, expected, f"--from {source}")
    sha = expected.get("sha256") or cache.sha_seen_at(artifact.url)
    if sha and (blob := cache.blob(sha)) and (digests := _verified(blob, sha, expected)) is not None:
        return Tarball(sha, blob, "download cache", "cache", digests=digests)
    beside = Path(facts.beside)
    if beside.is_file():  # the install guide's `wget` into ~/.triton/llvm leaves the tarball there
        return _imported(cache, beside, artifact, expected, f"tarball found at {beside}")
    return None


def _verified(blob: Path, sha: str, expected: dict[str, str]) -> dict[str, str] | None:
    """A cached file's digests when it is the expected file; None when it is another (the recipe now states an md5
    the file first seen at this URL does not have): then it is downloaded again, and verified as it comes."""
    if not expected.keys() - {"sha256"}:
        return {"sha256": sha} if expected.get("sha256", sha) == sha else None
    digests = hash_file_all(blob, expected)  # the cache is keyed by sha256 only: the others are computed
    return None if mismatches(expected, digests) else digests


def _imported(cache: ArtifactCache, source: Path, artifact: Artifact, expected: dict[str, str],
              origin: str) -> Tarball:
    digests, holder, copy = cache.import_file(source, expected)
    sha = digests["sha256"]
    wrong = mismatches(expected, digests)
    if wrong:
        holder.remove()
        algorithm, want, got = wrong[0]
        raise ArtifactError(f"{source} is not the expected file: {algorithm} {got}, expected {want} "
                            f"({source.stat().st_size} bytes)",
                            fix=f"download it again from {artifact.url}, or check the recipe's {algorithm}")
    if blob := cache.blob(sha):  # known already: the copy is not needed
        holder.remove()
        return Tarball(sha, blob, origin, "cache", digests=digests)
    return Tarball(sha, copy, origin, "import", holder=holder, digests=digests)


def _repair_version_file(dest: Path, artifact: Artifact) -> None:
    """Our tree lost its version.txt (someone cleaned up): without it setup.py would wipe ~/.triton/llvm."""
    if artifact.version_file:
        if not dest.is_dir():  # removed since the plan found it published
            raise ArtifactError(f"{dest} went away while fetch ran", fix="run the same command again to publish it")
        version = dest / artifact.version_file
        if version.is_dir() and not version.is_symlink():
            raise ArtifactError(f"{version} should hold the URL FlagTree's setup.py checks, but is a folder",
                                fix=f"remove it (rm -r {version}) and run the same command again")
        if not version.is_file() or version.read_text() != artifact.url:
            version.write_text(artifact.url)
