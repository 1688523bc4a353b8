"""`sync --dry-run` and `fetch --dry-run`: one stage's plan, item by item, changing nothing.

The plan is the one the stage's run receives (``registry.plan_stage``), asked online unless --offline, so a
dry run names what the run would do and why, and exits as the run would: with the error of the first item
that would stop it (``PlanItem.stop``), else 0."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer

from . import render
from .session import Verdict

if TYPE_CHECKING:
    from ..stagekit.stage import RunOptions, StageContext

DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print what would be done and why; change nothing. "
                                            "Exits as the real run would.")]


def dry_run_stage(stage_ctx: StageContext, stage_name: str, options: RunOptions) -> None:
    """Print ``stage_name``'s plan for ``options``; raise the run's verdict when an item would stop it."""
    from ..errors import WouldStop
    from ..preflight import would_stop
    from ..stages.registry import plan_stage, stage_named

    stage = stage_named(stage_name)
    items = plan_stage(stage, stage_ctx, replace(options, ask_network=not options.offline))
    stop = would_stop((), items)
    render.stage_plan(stage_ctx.ui, stage.command, items, stop)
    if stop is not None:
        raise Verdict(WouldStop(f"{stage.command} would stop: {stop.reason}; nothing was changed (--dry-run)",
                                error=stop.error, fix=f"fix what the plan names, then: flagtree-cpu {stage.command}"))
