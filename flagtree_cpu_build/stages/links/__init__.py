"""The links stage (`link`): the links the recipe asks for, and their plan.

``STAGE`` is all setup, status, the dry run and the CLI know of it; ``plan_links`` is what the build stage
asks before it builds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import SourceError
from ...stagekit.stage import Stage

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...stagekit.plan import PlanItem
    from ...stagekit.stage import RunOptions, StageContext, StageResult


def _plan(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from .plan import plan_link_items

    # before the sources are there, the links are planned as "after sync", not as missing targets
    return plan_link_items(ctx, sources_ready=all(i.current for i in earlier if i.area == "sources"))


def _run(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from ...stagekit.stage import Action, StageResult
    from .link import run_link

    if ctx.recipe.links is None:
        return StageResult("link", (Action("link", "skipped", "the recipe has no links"),))
    return run_link(ctx)[1]


STAGE = Stage("links", "link", "links", SourceError, _plan, _run)

__all__ = ["STAGE", "plan_links"]


def __getattr__(name: str) -> object:
    """``plan_links`` for the stages that ask this one, loaded when first asked: the stage list alone (read by
    `--help`) stays cheap."""
    if name == "plan_links":
        from .link import plan_links

        return plan_links
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
