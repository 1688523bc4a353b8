"""The recipe's symlinks: plan, apply, verify — relative, idempotent, never over the user's files.

Like FlagTree's ``python/scripts/link_flagtree_cpu.sh`` (same 12 links, same relative
target text), but strictly safer: the whole plan is computed first, and if any link path
holds a regular file or folder, or any target is missing, *nothing* is changed and every
problem is listed at once. A link that already points at the right place through an
absolute path — FlagTree's setup.py rewrites ``python/triton/language/extra/cpu`` that way
during ``pip install -e`` — is correct, not something to "repair" on every run. Paths
that are not in the recipe (FlagTree tracks symlinks of its own) are never touched.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...atomic import replace_symlink
from ...errors import SourceError
from ...recipe import Recipe
from ...stagekit.stage import Action, StageContext, StageResult
from ...workspace import Workspace

LinkState = Literal["ok", "create", "update", "conflict", "dangling"]


@dataclass(frozen=True)
class PlannedLink:
    path: str  # relative to the root source
    target: str  # as the recipe writes it
    state: LinkState
    current: str | None  # what is there now: the link text, "a regular file", "a folder", or None
    detail: str = ""

    def to_json(self) -> dict[str, str | None]:
        return {"path": self.path, "target": self.target, "state": self.state, "current": self.current,
                "detail": self.detail}


@dataclass(frozen=True)
class LinkPlan:
    root: Path
    links: tuple[PlannedLink, ...]

    def with_state(self, *states: LinkState) -> list[PlannedLink]:
        return [link for link in self.links if link.state in states]

    @property
    def all_ok(self) -> bool:
        return all(link.state == "ok" for link in self.links)


def plan_links(recipe: Recipe, ws: Workspace) -> LinkPlan:
    if recipe.links is None:
        return LinkPlan(ws.root, ())
    root_name = recipe.links.root
    root = ws.root / recipe.source_path(root_name)
    if not root.is_dir():
        raise SourceError(f"the links go into source {root_name}, which is not checked out at {root}",
                          fix="run `flagtree-cpu sync` first")
    real_root = Path(os.path.realpath(root))
    planned = []
    for link in recipe.links.entries:
        planned.append(_plan_one(root, real_root, link.path, link.target, recipe, ws))
    return LinkPlan(root, tuple(planned))


def _plan_one(root: Path, real_root: Path, rel: str, target: str, recipe: Recipe, ws: Workspace) -> PlannedLink:
    path = root / rel
    blocked = _blocked_parent(root, real_root, path)
    if blocked:
        return PlannedLink(rel, target, "conflict", None, blocked)
    expected = os.path.normpath(os.path.join(path.parent, target))
    target_exists = os.path.exists(expected)
    missing = "" if target_exists else _missing_target_hint(expected, recipe, ws)
    if path.is_symlink():
        current = os.readlink(path)
        if current == target:
            return PlannedLink(rel, target, "ok" if target_exists else "dangling", current, missing)
        if os.path.isabs(current) and target_exists and os.path.realpath(current) == os.path.realpath(expected):
            return PlannedLink(rel, target, "ok", current, "absolute, same place (as a build may leave it)")
        if not target_exists:
            return PlannedLink(rel, target, "dangling", current, missing)
        return PlannedLink(rel, target, "update", current, f"points to {current}")
    if path.exists():
        what = "a folder" if path.is_dir() else "a regular file"
        return PlannedLink(rel, target, "conflict", what,
                           f"{what} is in the way; move it away (mv {path} {path}.orig) and run link again")
    if not target_exists:
        return PlannedLink(rel, target, "dangling", None, missing)
    return PlannedLink(rel, target, "create", None)


def _blocked_parent(root: Path, real_root: Path, path: Path) -> str:
    """Why the link's folder cannot hold it: a file in the way, or a folder leading out of the tree."""
    parent = path.parent
    while not parent.exists() and not parent.is_symlink() and parent != root:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        return f"{parent} is a file, so the folder for this link cannot be created"
    real_parent = Path(os.path.realpath(parent))
    if real_parent != real_root and real_root not in real_parent.parents:
        return f"{parent} leads outside {root} (through a symlink); refusing to create links there"
    return ""


def _missing_target_hint(expected: str, recipe: Recipe, ws: Workspace) -> str:
    for name in recipe.sources:
        checkout = ws.root / recipe.source_path(name)
        if Path(expected).is_relative_to(checkout) and not checkout.exists():
            return f"target is in source {name}, which is not checked out: run `flagtree-cpu sync`"
    return f"target {expected} does not exist"


def apply_links(plan: LinkPlan) -> None:
    """Create and update links, only if nothing in the plan is a conflict or dangling."""
    blocked = plan.with_state("conflict", "dangling")
    if blocked:
        raise SourceError(
            f"{len(blocked)} of {len(plan.links)} links cannot be made in {plan.root}; nothing was changed",
            details=tuple(f"{link.state}: {link.path} — {link.detail}" for link in blocked),
            fix="resolve every item listed (nothing of yours is moved or deleted by flagtree-cpu), then run "
            "`flagtree-cpu link` again",
        )
    for link in plan.with_state("create", "update"):
        path = plan.root / link.path
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_symlink(path, link.target)  # atomic, and replaces only a symlink (conflicts stopped above)


def run_link(ctx: StageContext, *, dry_run: bool = False) -> tuple[LinkPlan, StageResult]:
    start = time.monotonic()
    plan = plan_links(ctx.recipe, ctx.workspace)
    if not dry_run:
        apply_links(plan)
        after = plan_links(ctx.recipe, ctx.workspace)
        dangling = [link for link in after.links if link.state != "ok"]
        if dangling:
            raise SourceError("links do not resolve after linking",
                              details=tuple(f"{link.path}: {link.detail}" for link in dangling),
                              fix="check the recipe's link targets (flagtree-cpu recipe show)")
    status_of = {"ok": "ok", "create": "created", "update": "updated"}
    actions = tuple(Action(link.path, status_of.get(link.state, "skipped"),  # type: ignore[arg-type]
                           link.detail or f"-> {link.target}", {"target": link.target, "state": link.state})
                    for link in plan.links)
    return plan, StageResult("link", actions, seconds=time.monotonic() - start)
