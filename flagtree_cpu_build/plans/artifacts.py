"""Whether each artifact's tree is published and verified, and what `fetch` would do about it.

The one rule for "current": our stamp in the published tree records every expected digest (the
recipe's sha256, md5 and sha512, and the lock's sha256 for the same URL); with nothing expected yet
(trust on first use), the stamp's URL is the recipe's. The URL a file was downloaded from does not
make it another file: a recipe that moves to a mirror or edits its URL but keeps the digest is still
current. A tree published with another layout (kind, root, after_unpack clean-ups) is not current;
stamps written before these were recorded are judged by their digests alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..artifact_kinds import DEFAULT_KIND
from . import PlanItem, Scope

if TYPE_CHECKING:
    from ..artifact_cache import ArtifactCache
    from ..lockfile import Lock
    from ..recipe import Artifact, Recipe


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


def plan_artifacts(recipe: Recipe, lock: Lock | None, scope: Scope,
                   from_files: dict[str, Path] | None = None) -> list[PlanItem]:
    from ..artifact_cache import ArtifactCache
    from ..workspace import user_cache_dir

    cache = ArtifactCache((scope.cache_dir or user_cache_dir(os.environ)) / "downloads", ui=None)
    return [_plan_one(name, artifact, lock, scope, cache, (from_files or {}).get(name))
            for name, artifact in recipe.artifacts.items()]


def _plan_one(name: str, artifact: Artifact, lock: Lock | None, scope: Scope, cache: ArtifactCache,
              from_file: Path | None) -> PlanItem:
    from ..extract import read_stamp
    from ..lockfile import expected_digests

    expected = expected_digests(lock, name, artifact)
    dest = Path(artifact.path)
    stamp = read_stamp(dest)
    data: dict[str, Any] = {"path": str(dest), "sha256": expected.get("sha256"), "url": artifact.url}
    if is_current(stamp, expected, artifact.url, artifact):
        assert stamp is not None
        moved = "" if stamp.get("url") == artifact.url else f" (downloaded from {stamp.get('url')})"
        return PlanItem("artifacts", name, "ok", f"{stamp['sha256'][:12]} published at {dest}{moved}",
                        data={**data, "sha256": stamp["sha256"]})
    there = os.path.lexists(dest)
    foreign = there and stamp is None
    now = (f"a tree flagtree-cpu did not publish is at {dest}" if foreign else
           f"another tree is at {dest}" if there else f"not published at {dest}")
    local = _local_copy(name, artifact, expected, cache, dest, from_file)
    if local:
        what = f"check the tree at {dest} against the tarball from {local}" if foreign else \
            f"unpack {name} from {local}"
        return PlanItem("artifacts", name, "missing", now, what, f"found in {local}", data,
                        "updated" if there else "created")
    if foreign:
        return PlanItem("artifacts", name, "conflict", now, f"stop: move {dest} away or give --from {name}=FILE",
                        "not ours, and no tarball to check it against", data, "stop", 4)
    planned = _download(name, artifact, lock, scope, cache, now, data, "updated" if there else "created")
    if scope.offline:  # fetch --offline stops here (exit 4); the plan still says how much is missing
        return replace(planned, action=f"stop: --offline forbids it: {planned.action}", will="stop", exit_code=4)
    return planned


def _local_copy(name: str, artifact: Artifact, expected: Mapping[str, str], cache: ArtifactCache, dest: Path,
                from_file: Path | None) -> str | None:
    """Where fetch would find the tarball without the network (as its ``_local_tarball`` looks)."""
    if from_file is not None:
        return f"--from {from_file}"
    sha = expected.get("sha256") or cache.sha_seen_at(artifact.url)
    if sha and cache.blob(sha):
        return "the download cache"
    beside = dest.parent / artifact.url.rstrip("/").rsplit("/", 1)[-1]
    return f"the tarball at {beside}" if beside.is_file() else None


def _download(name: str, artifact: Artifact, lock: Lock | None, scope: Scope, cache: ArtifactCache, now: str,
              data: dict[str, Any], will: str) -> PlanItem:
    from ..download import parse_source_note
    from ..lockfile import locked_artifact
    from ..progress import human_bytes

    part = cache.part_path(artifact.url)
    note = parse_source_note(part) or {}
    have = part.stat().st_size if part.is_file() and note.get("url") == artifact.url else 0
    locked = locked_artifact(lock, name, artifact.url)
    size = _download_size(artifact, locked.size if locked else None, note, scope)
    data["download_bytes"] = None if size is None else max(size - have, 0)
    what = f"download {name} {human_bytes(size) if size else '(size unknown)'}"
    if have:
        what = f"resume downloading {name} at {human_bytes(have)}" + (f" of {human_bytes(size)}" if size else "")
    return PlanItem("artifacts", name, "missing", now, what, "not cached", data, will)  # type: ignore[arg-type]


def _download_size(artifact: Artifact, locked_size: int | None, note: dict[str, Any], scope: Scope) -> int | None:
    """The download's size from what is known here before asking a server: the lock, a partial download's
    record of what the server said, the recipe, a local file; then (dry-run, online) the server."""
    from ..mirrors import candidate_urls

    for known in (locked_size, note.get("total"), artifact.size):
        if known:
            return int(known)
    for url in candidate_urls(artifact.url, scope.mirrors):  # where the download would come from, in order
        local = url[len("file://"):] if url.startswith("file://") else None
        if local is not None or "://" not in url:
            path = Path(local or url).expanduser()
            size = path.stat().st_size if path.is_file() else None
        elif scope.ask_network and not scope.offline:
            from ..download import remote_size

            size = remote_size(url)
        else:
            size = None
        if size:
            return size
    return None
