"""setup's validate stage: the recipe's checks run only when the last full report is not for this very
build (``--junit`` always runs them: its report is for this run), the JUnit file is written, and a failed
required check stops setup with one error. ``flagtree-cpu validate`` runs ``validate.run_validate`` alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...stagekit.stage import Action, RunOptions, StageContext, StageResult
from .junit import write_junit
from .plan import current_validation
from .validate import run_validate

if TYPE_CHECKING:
    from ...stagekit.plan import PlanItem


def validate_for_setup(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    """setup's validate stage: skipped when the last full report passed for this very build (``--junit``
    always runs the checks: its report is for this run); a failed required check stops setup.

    What setup's report keeps goes into ``StageResult.record`` (and, on a failure, onto the error): the
    validation report, and whether the JUnit file was written."""
    if not ctx.recipe.checks:
        return StageResult("validate", (Action("validate", "skipped", "the recipe has no checks"),))
    last = current_validation(ctx, options.python, options.model) if options.junit is None else None
    if last is not None:
        counts = last["summary"]
        return StageResult("validate", (Action("checks", "ok", f"passed before for this build ({counts['pass']} "
                                               f"passed, {counts['skip']} skipped at {last['started']})"),),
                           record={"validation": last})
    validation = run_validate(ctx, options)
    record = {"validation": validation.to_json(), "junit_written": options.junit is not None}
    if options.junit is not None:
        write_junit(validation, options.junit)
    if validation.failed:
        error = validation.failure("fix the cause above, then `flagtree-cpu setup` again (or `flagtree-cpu "
                                   "validate` to re-run just the checks)")
        error.record = record
        raise error
    counts = validation.counts()
    detail = f"{counts['pass']} passed" + (f", {counts['fail']} optional failed" if counts["fail"] else "")
    skipped = [f"{r.kernel}: {r.message}" for r in validation.results if r.status == "skip"]
    if skipped:
        detail += f", {len(skipped)} skipped ({'; '.join(skipped)})"
    return StageResult("validate", (Action("checks", "created", detail, {"report": validation.to_json()}),),
                       validation.warnings, record=record)
