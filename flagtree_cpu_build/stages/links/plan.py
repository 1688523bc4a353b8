"""The recipe's links as plan items: ``links.plan_links`` decides each link; this sums them up as
status and the dry run show them (one row for all twelve) and says what `link` would report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import SourceError
from ...stagekit.plan import PlanItem

if TYPE_CHECKING:
    from ...stagekit.stage import StageContext


def plan_link_items(ctx: StageContext, *, sources_ready: bool) -> list[PlanItem]:
    from .link import plan_links

    recipe = ctx.recipe
    if recipe.links is None:
        return []
    count = len(recipe.links.entries)
    subject = f"{count} links"
    root = ctx.workspace.root / recipe.source_path(recipe.links.root)
    if not root.is_dir():
        return [PlanItem("links", subject, "missing", f"{recipe.links.root} is not checked out yet",
                         f"create {count} links", "after the sources", will="created")]
    plan = plan_links(recipe, ctx.workspace)
    in_place = len(plan.with_state("ok"))
    data = {"links": [p.to_json() for p in plan.links]}
    if not sources_ready and not plan.all_ok:  # the sources move first; the links are planned again then
        return [PlanItem("links", subject, "missing", f"{in_place} of {count} in place now",
                         f"create or fix {count - in_place} links", "after the sources", data,
                         will="created" if plan.with_state("create") else "updated")]
    counts = {s: len(plan.with_state(s)) for s in ("ok", "create", "update", "conflict", "dangling")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    if plan.all_ok:
        return [PlanItem("links", subject, "ok", f"all {count} in place in {plan.root}")]
    blocked = plan.with_state("conflict", "dangling")
    if blocked:
        return [PlanItem("links", subject, "conflict", summary, f"stop: {blocked[0].path}: {blocked[0].detail}",
                         "something is in the way", data, "stop", SourceError)]
    todo = counts["create"] + counts["update"]
    return [PlanItem("links", subject, "missing", summary, f"create or fix {todo} links", "not in place", data,
                     "created" if counts["create"] else "updated")]
