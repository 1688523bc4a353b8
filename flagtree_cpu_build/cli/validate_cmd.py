"""`validate`: the validation kernels in the build's interpreter, judged; a JUnit file for CI whatever happens."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from . import render
from .app import FlagtreeCommand, ModelOption, PythonOption, TimeoutOption, app, complete_kernels, examples
from .session import Verdict
from .stage_cmds import absolute, exclusive, opened

if TYPE_CHECKING:
    from ..stages import StageContext


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu validate",
    "flagtree-cpu validate --kernel backend --kernel tle-rms-norm",
    "flagtree-cpu validate --junit reports/validate.xml   # for CI test reports",
    "flagtree-cpu validate --install-prereqs              # pip install torch, numpy first",
    "flagtree-cpu validate --model ~/models/MiniCPM5-0.9B-int8 --kernel decode-e2e",
    "flagtree-cpu validate --list",
))
def validate(
    ctx: typer.Context,
    kernels: Annotated[Optional[list[str]], typer.Option("--kernel", "-k", metavar="NAME", help="Run only this "
                                                         "kernel. Repeatable.", autocompletion=complete_kernels)]
    = None,
    python: PythonOption = None,
    model: ModelOption = None,
    timeout: TimeoutOption = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", metavar="FILE", help="Also write a JUnit XML report "
                                                  "(one testcase per kernel) for CI.")] = None,
    install_prereqs: Annotated[bool, typer.Option("--install-prereqs", help="pip install missing run-time "
                                                  "prerequisites (torch from the recipe's index) first.")] = False,
    list_kernels: Annotated[bool, typer.Option("--list", help="List the kernels, what each proves and where its "
                                               "script is, and exit.")] = False,
) -> None:
    """Run the validation kernels (the FEP's three phases) in the build's interpreter and judge them.

    Each kernel runs in its own process with the recipe's run-time environment (FLAGTREE_BACKEND=cpu ...) and a
    timeout; its output goes to <workdir>/logs/validate-<kernel>-<time>.log and a failure comes with its cause and
    fix. Never installs anything unless --install-prereqs. Exit code 6 when a required kernel fails.
    """
    from ..errors import FlagtreeCpuError
    from ..junit import write_junit, write_junit_verdict
    from ..validate import ValidateOptions, run_validate

    opts, stage_ctx, target = opened(ctx, python=python)
    if list_kernels:
        _list(stage_ctx, target)
        return
    validate_options = ValidateOptions(python=target, kernels=tuple(kernels or ()), model=absolute(model),
                                       timeout=timeout, install_prereqs=install_prereqs, verbose=opts.ui.verbose)
    junit_path = absolute(junit)
    try:
        with exclusive(opts, stage_ctx, "validate"):
            report = run_validate(stage_ctx, validate_options)
    except FlagtreeCpuError as exc:  # CI uploads the file whatever happened: it says what stopped the kernels
        if junit_path is not None:
            write_junit_verdict(junit_path, stage_ctx.recipe.name, "error", exc.message,
                                "\n".join([*exc.details, f"fix: {exc.fix}" if exc.fix else ""]))
        raise
    if junit_path is not None:
        write_junit(report, junit_path)
    render.validation(opts.ui, report, junit_path)
    if report.failed:
        raise Verdict(report.failure("fix the cause above, then `flagtree-cpu validate` again (`--kernel NAME` "
                                     "re-runs one)"))


def _list(stage_ctx: StageContext, python: Path) -> None:
    from ..validate import CATALOG, KERNELS_DIR, configured

    settings = dict((info.name, cfg) for info, cfg in configured(stage_ctx.recipe))
    rows: list[dict[str, object]] = [
        {"kernel": info.name, "configured": info.name in settings,
         "required": bool(settings[info.name].required) if info.name in settings else None,
         "proves": info.proves, "script": str(KERNELS_DIR / info.script)} for info in CATALOG]
    render.kernel_list(stage_ctx.ui, KERNELS_DIR, rows, python)
