"""The artifacts stage (`fetch`): its plan and the streamed download-and-unpack.

``STAGE`` is all setup, status, the dry run and the CLI know of it; ``plan_artifacts`` is what the build
stage asks before it builds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import ArtifactError
from ...stagekit.stage import Stage

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...stagekit.plan import PlanItem
    from ...stagekit.stage import RunOptions, StageContext, StageResult


def _plan(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from .plan import plan_artifacts

    return plan_artifacts(ctx.recipe, lock, options, ctx.workspace.root,
                          after_sync=any(i.area == "sources" for i in earlier))


def _run(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from ...stagekit.stage import Action, StageResult
    from .fetch import run_fetch

    if not ctx.recipe.artifacts:
        return StageResult("fetch", (Action("fetch", "skipped", "the recipe has no artifacts"),))
    return run_fetch(ctx, options, plan)


STAGE = Stage("artifacts", "fetch", "artifacts", ArtifactError, _plan, _run, concurrent=True)

__all__ = ["STAGE", "plan_artifacts", "published_locks"]


def __getattr__(name: str) -> object:
    """``plan_artifacts`` for the stages that ask this one, loaded when first asked: the stage list alone (read by
    `--help`) stays cheap."""
    if name == "plan_artifacts":
        from .plan import plan_artifacts

        return plan_artifacts
    if name == "published_locks":
        from .plan import published_locks

        return published_locks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
