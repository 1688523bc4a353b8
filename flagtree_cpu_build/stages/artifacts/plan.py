"""Whether each artifact's tree is published and verified, and what `fetch` would do about it.

The one rule for "current": our stamp in the published tree records every expected digest (the
recipe's sha256, md5 and sha512, and the lock's sha256 for the same URL); with nothing expected yet
(trust on first use), the stamp's URL is the recipe's. The URL a file was downloaded from does not
make it another file: a recipe that moves to a mirror or edits its URL but keeps the digest is still
current. A tree published with another layout (kind, root, after_unpack clean-ups) is not current;
stamps written before these were recorded are judged by their digests alone.

Each item carries what ``fetch`` acts on (``FetchFacts``, in ``PlanItem.data["fetch"]``): the digests the
file must have, where a download comes from (mirrors first), the download cache, what is at the
destination (a foreign tree is checked against the tarball and adopted, never replaced), and the local
files to try first. ``fetch`` acts on exactly the items that are not current, with these facts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ...artifact_kinds import DEFAULT_KIND
from ...errors import ArtifactError
from ...stagekit.plan import PlanItem
from .ownership import Owner, is_shared, owner_of, refusal

if TYPE_CHECKING:
    from ...artifact_cache import ArtifactCache
    from ...lockfile import ArtifactLock, Lock
    from ...recipe import Artifact, Recipe
    from ...stagekit.stage import RunOptions

Tree = Literal["none", "ours", "foreign"]


@dataclass(frozen=True)
class FetchFacts:
    """What ``fetch`` acts on for one artifact, as its plan found it; kept as plain values in
    ``PlanItem.data["fetch"]`` (``status --json`` shows them) and read back with ``of``."""

    expected: dict[str, str]  # every digest the file must have (algorithm -> hex); empty: trusted on first use
    candidates: tuple[str, ...]  # where a download comes from, in order: the mirrors', then the recipe's URL
    cache: str  # the download cache's folder
    tree: Tree  # at the destination: "foreign" (no stamp of ours) is verified against the tarball, never replaced
    beside: str  # where the install guide's `wget` leaves the tarball, next to the destination
    from_file: str | None = None  # fetch --from NAME=FILE
    size: int | None = None  # a current tree: the size its stamp records (the lock's)
    digest: dict[str, str] = field(default_factory=dict)  # a current tree: the recipe's other digests, as stamped

    def to_data(self) -> dict[str, Any]:
        return {"expected": dict(self.expected), "candidates": list(self.candidates), "cache": self.cache,
                "tree": self.tree, "beside": self.beside, "from_file": self.from_file, "size": self.size,
                "digest": dict(self.digest)}

    @classmethod
    def of(cls, item: PlanItem) -> FetchFacts:
        data = item.data["fetch"]
        return cls(expected=dict(data["expected"]), candidates=tuple(data["candidates"]), cache=data["cache"],
                   tree=data["tree"], beside=data["beside"], from_file=data["from_file"], size=data["size"],
                   digest=dict(data["digest"]))


def other_digests(artifact: Artifact, digests: Mapping[str, Any]) -> dict[str, str]:
    """The digests besides sha256 the recipe states, as ``digests`` (computed, or a stamp) has them: what the
    stamp and the lock record."""
    return {a: digests[a] for a in sorted(artifact.expected_digests()) if a != "sha256" and a in digests}


def is_current(stamp: dict[str, Any] | None, expected: Mapping[str, str] | str | None, url: str,
               artifact: Artifact | None = None) -> bool:
    """``expected``: algorithm -> hex (a bare string is a sha256); ``artifact``, when given, also judges the layout."""
    if not stamp:
        return False
    if isinstance(expected, str):
        expected = {"sha256": expected}
    if expected:
        if any(stamp.get(algorithm) != value.lower() for algorithm, value in expected.items()):
            return False
    elif stamp.get("url") != url:
        return False
    return artifact is None or not layout_changes(stamp, artifact)


def stamp_layout(artifact: Artifact) -> dict[str, Any]:
    """What besides the bytes decides the published tree; recorded in the stamp."""
    return {"kind": artifact.kind, "strip": artifact.root.strip, "find": artifact.root.find,
            "after_unpack": [step.remove for step in artifact.after_unpack]}


def layout_changes(stamp: Mapping[str, Any], artifact: Artifact) -> list[str]:
    """The layout keys whose recorded value differs from the recipe's (a key the stamp lacks: a stamp from before
    it was recorded, taken to hold the default, so trees published by older versions stay current)."""
    defaults = {"kind": DEFAULT_KIND, "strip": artifact.root.strip, "find": None, "after_unpack": []}
    return [key for key, value in stamp_layout(artifact).items() if stamp.get(key, defaults[key]) != value]


def plan_artifacts(recipe: Recipe, lock: Lock | None, options: RunOptions, workspace: Path | None = None, *,
                   after_sync: bool = False) -> list[PlanItem]:
    """``workspace``: the workdir: whose trees are this run's (``ownership``; None judges by digests alone), and
    where values read from sources' files are read (``{match}``); ``after_sync``: setup plans, with the sources
    synced first, so a value still to be read is read then."""
    from ...artifact_cache import ArtifactCache
    from ...workspace import user_cache_dir
    from .reads import waiting_item, with_reads

    cache = ArtifactCache((options.cache_dir or user_cache_dir(os.environ)) / "downloads", ui=None)
    us = Owner.of(recipe, workspace) if workspace is not None else None
    root = workspace
    items = []
    for name, artifact in recipe.artifacts.items():
        waiting = waiting_item(name, artifact, recipe, root, lock, after_sync=after_sync) if root else None
        if waiting is not None and waiting.will == "created" and waiting.data["reads"]["url_known"]:
            # a URL written out: the download is planned (its size asked) though the path is read after sync
            item = _plan_one(name, artifact, lock, options, cache, options.fetch.from_files.get(name), us)
            waiting = replace(item, state="missing", detail=waiting.detail, will="created",
                              reason=f"{item.reason}; {waiting.reason}" if item.reason else waiting.reason,
                              data={**item.data, "reads": waiting.data["reads"]})
        if waiting is None:
            item = _plan_one(name, artifact, lock, options, cache, options.fetch.from_files.get(name), us)
            waiting = with_reads(item, name, artifact, recipe, root, lock) if root else item
        items.append(waiting)
    return items


def published_locks(recipe: Recipe, lock: Lock | None, options: RunOptions,
                    workspace: Path | None = None) -> dict[str, ArtifactLock]:
    """The lock entries of the trees published and verified here (the plan's current items), as `fetch` records
    them: what `lock` writes, so that `--frozen` accepts it. An entry of the same file keeps its served_from."""
    from ...lockfile import ArtifactLock

    entries = {}
    for item in plan_artifacts(recipe, lock, options, workspace):
        if item.will != "ok":
            continue
        facts = FetchFacts.of(item)
        entries[item.subject] = keep_served_from(lock, item.subject, ArtifactLock(
            url=recipe.artifacts[item.subject].url, sha256=item.data["sha256"], size=facts.size, digest=facts.digest))
    return entries


def keep_served_from(lock: Lock | None, name: str, entry: ArtifactLock) -> ArtifactLock:
    """``entry`` with the served_from the lock records for the same file (same URL and sha256) when it has none:
    a run that downloads nothing does not forget where the bytes came from."""
    old = lock.artifacts.get(name) if lock else None
    if entry.served_from is None and old is not None and (old.url, old.sha256) == (entry.url, entry.sha256):
        return replace(entry, served_from=old.served_from)
    return entry


def _plan_one(name: str, artifact: Artifact, lock: Lock | None, options: RunOptions, cache: ArtifactCache,
              from_file: Path | None, us: Owner | None) -> PlanItem:
    from ...extract import read_stamp
    from ...lockfile import expected_digests
    from ...mirrors import candidate_urls

    expected = expected_digests(lock, name, artifact)
    dest = Path(artifact.path)
    stamp = read_stamp(dest)
    there = os.path.lexists(dest)
    facts = FetchFacts(expected=expected, candidates=tuple(candidate_urls(artifact.url, options.mirrors)),
                       cache=str(cache.root), tree="none" if not there else "foreign" if stamp is None else "ours",
                       beside=str(dest.parent / artifact.url.rstrip("/").rsplit("/", 1)[-1]),
                       from_file=None if from_file is None else str(from_file))
    data: dict[str, Any] = {"path": str(dest), "sha256": expected.get("sha256"), "url": artifact.url}
    if is_current(stamp, expected, artifact.url, artifact):
        assert stamp is not None
        moved = "" if stamp.get("url") == artifact.url else f" (downloaded from {stamp.get('url')})"
        facts = replace(facts, size=stamp.get("size"), digest=other_digests(artifact, stamp))
        return PlanItem("artifacts", name, "ok", f"{stamp['sha256'][:12]} published at {dest}{moved}"
                        + _by(stamp, us), data={**data, **_owner_data(stamp), "sha256": stamp["sha256"],
                                                "fetch": facts.to_data()})
    data["fetch"] = facts.to_data()
    data.update(_owner_data(stamp))
    refused = refusal(name, artifact, dest, stamp, us, options.fetch.replace) if us is not None else None
    if refused is not None:  # fetch stops there (exit 4) and says whose the tree is
        return PlanItem("artifacts", name, "conflict", f"another tree is at {dest}" + _by(stamp, us),
                        f"stop: {refused.message}", "not this workspace's to replace", data, "stop", ArtifactError)
    foreign = facts.tree == "foreign"
    now = (f"a tree flagtree-cpu did not publish is at {dest}" if foreign else
           f"another tree is at {dest}{_by(stamp, us) if stamp else ''}" if there else f"not published at {dest}")
    local = _local_copy(facts, artifact, cache)
    if local:
        what = f"check the tree at {dest} against the tarball from {local}" if foreign else \
            f"unpack {name} from {local}"
        return PlanItem("artifacts", name, "missing", now, what, f"found in {local}", data,
                        "updated" if there else "created")
    if foreign:
        return PlanItem("artifacts", name, "conflict", now, f"stop: move {dest} away or give --from {name}=FILE",
                        "not ours, and no tarball to check it against", data, "stop", ArtifactError)
    planned = _download(name, artifact, lock, options, cache, now, data, "updated" if there else "created")
    if options.offline:  # fetch --offline stops here (exit 4); the plan still says how much is missing
        return replace(planned, action=f"stop: --offline forbids it: {planned.action}", will="stop", stop=ArtifactError)
    return planned


def _owner_data(stamp: dict[str, Any] | None) -> dict[str, Any]:
    """The tree's owner as its stamp records it (status --json shows it)."""
    owner = owner_of(stamp)
    return {"owner": owner.to_stamp("shared" if is_shared(stamp) else "own")} if owner is not None else {}


def _by(stamp: dict[str, Any], us: Owner | None) -> str:
    """Whose the tree is, when it is not this recipe's in this workspace."""
    owner = owner_of(stamp)
    if owner is None or us is not None and owner.same_place(us):
        return ""
    return f", {'shared, ' if is_shared(stamp) else ''}published by {owner.words()}"


def _local_copy(facts: FetchFacts, artifact: Artifact, cache: ArtifactCache) -> str | None:
    """Where fetch would find the tarball without the network (as its ``_local_tarball`` looks)."""
    if facts.from_file is not None:
        return f"--from {facts.from_file}"
    sha = facts.expected.get("sha256") or cache.sha_seen_at(artifact.url)
    if sha and cache.blob(sha):
        return "the download cache"
    return f"the tarball at {facts.beside}" if Path(facts.beside).is_file() else None


def _download(name: str, artifact: Artifact, lock: Lock | None, options: RunOptions, cache: ArtifactCache, now: str,
              data: dict[str, Any], will: str) -> PlanItem:
    from ...download import parse_source_note
    from ...lockfile import locked_artifact
    from ...progress import human_bytes

    part = cache.part_path(artifact.url)
    note = parse_source_note(part) or {}
    have = part.stat().st_size if part.is_file() and note.get("url") == artifact.url else 0
    locked = locked_artifact(lock, name, artifact.url)
    candidates = data["fetch"]["candidates"]
    size, gone, unsure = _download_size(artifact, locked.size if locked else None, note, candidates, options)
    if size is None and gone and len(gone) == len(candidates):  # every URL the download tries says: not there
        return PlanItem("artifacts", name, "missing", now, f"stop: {name} is at none of the URLs the download "
                        f"would try ({'; '.join(gone)})", "the servers say it is not there", data, "stop",
                        ArtifactError)
    data["download_bytes"] = None if size is None else max(size - have, 0)
    what = f"download {name} {human_bytes(size) if size else '(size unknown)'}"
    if have:
        what = f"resume downloading {name} at {human_bytes(have)}" + (f" of {human_bytes(size)}" if size else "")
    why = "not cached" + (f" (the size could not be asked: {'; '.join(gone + unsure)})" if size is None and
                          (gone or unsure) else "")
    return PlanItem("artifacts", name, "missing", now, what, why, data, will)  # type: ignore[arg-type]


def _download_size(artifact: Artifact, locked_size: int | None, note: dict[str, Any], candidates: list[str],
                   options: RunOptions) -> tuple[int | None, list[str], list[str]]:
    """The download's size from what is known here before asking a server: the lock, a partial download's
    record of what the server said, the recipe, a local file; then (dry-run, online) the server. Only words: the
    download itself goes by the candidates and digests, whatever size was found here. Also the candidates that
    said for certain the file is not there (a missing local file, a 404 or 410), and why others said no size."""
    for known in (locked_size, note.get("total"), artifact.size):
        if known:
            return int(known), [], []
    gone: list[str] = []
    unsure: list[str] = []
    for url in candidates:  # where the download would come from, in order
        local = url[len("file://"):] if url.startswith("file://") else None
        if local is not None or "://" not in url:
            path = Path(local or url).expanduser()
            size = path.stat().st_size if path.is_file() else None
            if not path.is_file():
                gone.append(f"{url}: {'not a regular file' if path.exists() else 'no such file'}")
        elif options.ask_network and not options.offline:
            from ...download import ask_size

            answer = ask_size(url)
            size = answer.size
            if size is None:
                (gone if answer.missing else unsure).append(answer.why)
        else:
            size = None
        if size:
            return size, [], []
    return None, gone, unsure
