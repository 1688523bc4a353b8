"""What the artifacts plan says of values read from sources' files (``{match}``): the value and its file, a value
the lock recorded otherwise (a change), and an artifact whose file is not checked out yet ("read from FILE after
sync": setup fetches it after the sources; `fetch` alone stops and says to sync first)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ArtifactError, SourceError
from ...recipe.reads import unread, written
from ...stagekit.plan import PlanItem

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...recipe import Artifact, Recipe
    from ...source_reads import ReadValue


def waiting_item(name: str, artifact: Artifact, recipe: Recipe, root: Path, lock: Lock | None, *,
                 after_sync: bool) -> PlanItem | None:
    """The item of an artifact whose url, path or digest is still to be read (None when all is read): a file not
    checked out yet, or one that cannot give the value (a stop, as fetch would)."""
    from ...recipe.reads import captures, rules_of
    from ...source_reads import read_artifact

    names = unread(artifact)
    if not names:
        return None
    rules = rules_of(artifact.matches)
    named, _twice = captures(rules)
    files = sorted({f"{rules[named[n].rule].source}'s {rules[named[n].rule].what}" for n in names if n in named})
    where = " and ".join(files)
    url_known = not any(written(n) in artifact.url for n in names)
    data: dict[str, Any] = {"path": artifact.path, "url": artifact.url, "sha256": None,
                            "reads": {"waiting": files, "url_known": url_known}}
    _values, _waiting, problems = read_artifact(name, artifact, artifact.read_names, recipe, root, lock)
    if problems:
        return PlanItem("artifacts", name, "conflict", f"its url and path cannot be read: {'; '.join(problems)}",
                        "stop: correct the recipe's matches rule or the source's pin", "a value read from a "
                        "source's file is unusable", {**data, "reads": {"problems": list(problems)}}, "stop",
                        ArtifactError)
    fields = [f for f in ("url", "path", "digest") if any(n in names for n in artifact.read_in.get(f, ()))]
    now = (f"not published; its {' and '.join(fields) or 'values'} {'are' if len(fields) > 1 else 'is'} read from "
           f"{where} after sync")
    if after_sync:  # setup: the sources stage checks the file out first
        return PlanItem("artifacts", name, "missing", now, f"download {name} once {where} is read",
                        f"read from {where} after sync", data, "created")
    sources = sorted({rules[named[n].rule].source for n in names if n in named})
    return PlanItem("artifacts", name, "missing", now,
                    f"stop: check out {', '.join(sources)} first (flagtree-cpu sync)",
                    f"read from {where} after sync", data, "stop", SourceError)


def with_reads(item: PlanItem, name: str, artifact: Artifact, recipe: Recipe, ws_root: Path,
               lock: Lock | None) -> PlanItem:
    """``item`` saying which values the artifact read, from where, and which the lock records otherwise."""
    from ...source_reads import changed, read_artifact

    if not artifact.read_names:
        return item
    values, _waiting, _problems = read_artifact(name, artifact, artifact.read_names, recipe, ws_root, lock)
    if not values:
        return item
    was = changed(tuple(values), lock)
    shown = "; ".join(_words(v, was.get(v.key)) for v in values)
    data = {**item.data, "reads": {"values": [_data(v, was.get(v.key)) for v in values]}}
    reason = f"{item.reason}; " if item.reason else ""
    if was:
        reason += "read value changed: " + ", ".join(f"{v.placeholder} {was[v.key]} -> {v.value}"
                                                     for v in values if v.key in was)
    return replace(item, detail=f"{item.detail} ({shown})", reason=reason.rstrip("; "), data=data)


def _words(value: ReadValue, was: str | None) -> str:
    how = "as the lock recorded it from" if value.origin == "lock" else "read from"
    change = f", was {was}" if was is not None else ""
    return f"{value.placeholder} = {value.value} {how} {value.source}'s {value.file}{change}"


def _data(value: ReadValue, was: str | None) -> dict[str, Any]:
    return {"placeholder": value.placeholder, "value": value.value, "source": value.source, "file": value.file,
            "commit": value.commit, "origin": value.origin, "was": was}
