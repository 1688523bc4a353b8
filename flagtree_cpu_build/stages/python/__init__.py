"""The python stage (`python`): the target environment's prerequisites, planned and installed.

``STAGE`` is all setup, status, the dry run and the CLI know of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import BuildError
from ...stagekit.stage import Stage

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...stagekit.plan import PlanItem
    from ...stagekit.stage import RunOptions, StageContext, StageResult


def _plan(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from .stage import plan_python

    return [] if options.skip_build else plan_python(ctx, options)


def _run(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from .stage import run_python

    return run_python(ctx, options, plan)


def _skip(options: RunOptions) -> str | None:
    return "--skip-build" if options.skip_build else None


STAGE = Stage("python", "python", "python", BuildError, _plan, _run, skip=_skip)
