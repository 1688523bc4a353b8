"""`validate`: the recipe's checks against the build's interpreter, judged; a JUnit file for CI whatever happens."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import completion, render
from .app import (
    FlagtreeCommand,
    ModelOption,
    PythonOption,
    TimeoutOption,
    app,
    deprecated_check,
    examples,
)
from .opening import absolute, exclusive, opened
from .session import Verdict


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu validate",
    "flagtree-cpu validate --only backend --only tle-rms-norm",
    "flagtree-cpu validate --junit reports/validate.xml   # for CI test reports",
    "flagtree-cpu validate --install-prereqs              # pip install torch, numpy first",
    "flagtree-cpu validate --model ~/models/MiniCPM5-0.9B-int8 --only decode-e2e",
    "flagtree-cpu validate --list",
))
def validate(
    ctx: typer.Context,
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", metavar="NAME", help="Run only this check of the recipe. Repeatable.",
        autocompletion=completion.recipe_checks)] = None,
    kernels: Annotated[Optional[list[str]], typer.Option(
        "--kernel", "-k", metavar="NAME", hidden=True, help="The same as --only (its older name). Repeatable.",
        autocompletion=completion.recipe_checks)] = None,
    old_checks: Annotated[Optional[list[str]], typer.Option(  # deprecated: --check is status's and link's gate
        "--check", "-c", hidden=True, autocompletion=completion.recipe_checks)] = None,
    python: PythonOption = None,
    model: ModelOption = None,
    timeout: TimeoutOption = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", metavar="FILE", help="Also write a JUnit XML report "
                                                  "(one testcase per check) for CI.")] = None,
    install_prereqs: Annotated[bool, typer.Option("--install-prereqs", help="pip install missing run-time "
                                                  "prerequisites (torch from the recipe's index) first.")] = False,
    list_checks: Annotated[bool, typer.Option("--list", help="List the recipe's checks (kind, preset, what each "
                                              "proves) and the available presets, and exit.")] = False,
) -> None:
    """Run the recipe's checks (commands, presets, imports, wheel inspections) and judge them.

    Each check that runs a program runs in its own process with the recipe's run-time environment and a timeout;
    its output goes to <workdir>/logs/validate-<check>-<time>.log and a failure comes with its cause and fix.
    Never installs anything unless --install-prereqs. Exit code 6 when a required check fails.
    """
    from ..errors import FlagtreeCpuError
    from ..stagekit.stage import RunOptions, ValidateExtras
    from ..stages.validate.junit import write_junit, write_junit_verdict
    from ..stages.validate.validate import run_validate

    opts, stage_ctx, target = opened(ctx, python=python)
    checks = [*(only or ()), *deprecated_check(opts.ui, "validate", old_checks)]
    if list_checks:
        from ..stages.validate.check_catalog import listing

        render.check_listing(stage_ctx.ui, listing(stage_ctx.recipe), target)
        return
    validate_options = RunOptions(python=target, model=absolute(model), timeout=timeout, verbose=opts.ui.verbose,
                                  installer=opts.installer,
                                  validate=ValidateExtras((*checks, *(kernels or ())), install_prereqs))
    junit_path = absolute(junit)
    try:
        with exclusive(opts, stage_ctx, "validate"):
            report = run_validate(stage_ctx, validate_options)
    except FlagtreeCpuError as exc:  # CI uploads the file whatever happened: it says what stopped the checks
        if junit_path is not None:
            write_junit_verdict(junit_path, stage_ctx.recipe.name, "error", exc.message,
                                "\n".join([*exc.details, f"fix: {exc.fix}" if exc.fix else ""]))
        raise
    if junit_path is not None:
        write_junit(report, junit_path)
    render.validation(opts.ui, report, junit_path)
    if report.failed:
        raise Verdict(report.failure("fix the cause above, then `flagtree-cpu validate` again (`--only NAME` "
                                     "re-runs one)"))

