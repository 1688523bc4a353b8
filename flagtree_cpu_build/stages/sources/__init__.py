"""The sources stage (`sync`): its plan, the lock's pins, checkouts, submodules and patches.

``STAGE`` is all setup, status, the dry run and the CLI know of it; the plan and run import their modules
lazily, so listing the stages stays cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import SourceError
from ...stagekit.stage import Stage

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...stagekit.plan import PlanItem
    from ...stagekit.stage import RunOptions, StageContext, StageResult


def _plan(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from dataclasses import replace

    from .plan import plan_sources

    if options.for_run:  # the commit each source moves to is decided here, once: the run takes it from the item
        return plan_sources(ctx, lock, replace(options, ask_network=not (options.offline or options.frozen)),
                            count_changes=False)
    return plan_sources(ctx, lock, options)


def _run(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from .sync import run_sync

    return run_sync(ctx, options, plan)


STAGE = Stage("sources", "sync", "sources", SourceError, _plan, _run, concurrent=True)

__all__ = ["STAGE", "plan_sources"]


def __getattr__(name: str) -> object:
    """``plan_sources`` for the stages that ask this one, loaded when first asked: the stage list alone (read by
    `--help`) stays cheap."""
    if name == "plan_sources":
        from .plan import plan_sources

        return plan_sources
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
