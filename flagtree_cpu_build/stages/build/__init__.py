"""The build stage (`build`): the build, its plan, and the wheelhouse half (prebuilt: take or publish a build).

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
    from .plan import plan_build

    return plan_build(ctx, options, earlier)


def _run(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from .build import run_build

    return run_build(ctx, options, plan)


def _skip(options: RunOptions) -> str | None:
    return "--skip-build" if options.skip_build else None


STAGE = Stage("build", "build", "build", BuildError, _plan, _run, skip=_skip)
