"""setup's validate stage: the recipe's checks run only when the last full report is not for this very
build (``--junit`` always runs them: its report is for this run), the JUnit file is written, and a failed
required check stops setup with one error. ``flagtree-cpu validate`` runs ``validate.run_validate`` alone."""

from __future__ import annotations

from typing import Any, Protocol

from .junit import write_junit
from .plans.validation import current_validation
from .stages import Action, SetupOptions, StageContext, StageResult
from .validate import ValidateOptions, run_validate


class ValidationRecord(Protocol):
    """What setup's report keeps of the validate stage (``setup_report.SetupReport`` has both)."""

    validation: dict[str, Any] | None
    junit_written: bool


def validate_for_setup(ctx: StageContext, options: SetupOptions, report: ValidationRecord) -> StageResult:
    """setup's validate stage: skipped when the last full report passed for this very build (``--junit``
    always runs the checks: its report is for this run); a failed required check stops setup."""
    if not ctx.recipe.checks:
        return StageResult("validate", (Action("validate", "skipped", "the recipe has no checks"),))
    last = current_validation(ctx, options.python, options.model) if options.junit is None else None
    if last is not None:
        report.validation = last
        counts = last["summary"]
        return StageResult("validate", (Action("kernels", "ok", f"passed before for this build ({counts['pass']} "
                                               f"passed, {counts['skip']} skipped at {last['started']})"),))
    validation = run_validate(ctx, ValidateOptions(python=options.python, model=options.model,
                                                   timeout=options.timeout, verbose=options.verbose))
    report.validation = validation.to_json()
    if options.junit is not None:
        write_junit(validation, options.junit)
        report.junit_written = True
    if validation.failed:
        raise validation.failure("fix the cause above, then `flagtree-cpu setup` again (or `flagtree-cpu validate` "
                                 "to re-run just the checks)")
    counts = validation.counts()
    detail = f"{counts['pass']} passed" + (f", {counts['fail']} optional failed" if counts["fail"] else "")
    skipped = [f"{r.kernel}: {r.message}" for r in validation.results if r.status == "skip"]
    if skipped:
        detail += f", {len(skipped)} skipped ({'; '.join(skipped)})"
    return StageResult("validate", (Action("kernels", "created", detail, {"report": validation.to_json()}),),
                       validation.warnings)
