"""The validate stage (`validate`): the checks' catalog, run and judgement, setup's validate stage, its plan,
and the JUnit report.

``STAGE`` is all setup, status, the dry run and the CLI know of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...errors import ValidationFailed
from ...stagekit.stage import Stage

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...recipe import Check
    from ...stagekit.plan import PlanItem
    from ...stagekit.stage import RunOptions, StageContext, StageResult
    from .check_run import CheckResult


def _plan(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from .plan import plan_validate

    # the checks' last verdict stands while the build and the interpreter stay as they are
    built = [i for i in earlier if i.area in ("python", "build")]
    return plan_validate(ctx, options, built_current=all(i.will == "ok" for i in built))


def _run(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from .stage import validate_for_setup

    return validate_for_setup(ctx, options, plan)


def run_check(ctx: StageContext, options: RunOptions, check: Check, env: dict[str, str],
              unmet: Mapping[str, str | None]) -> CheckResult:
    """One check, as validate runs it (its kind, `needs`, `when`, timeout and log), in the environment ``env``:
    what the build stage's gate checks run through."""
    from .check_run import run_check as run

    return run(ctx, options, check, env, unmet)


def _skip(options: RunOptions) -> str | None:
    return "--skip-build" if options.skip_build else "--skip-validate" if options.skip_validate else None


STAGE = Stage("validate", "validate", "validation", ValidationFailed, _plan, _run, skip=_skip)
