"""validate: run the recipe's checks and judge them.

Each check (a command, a preset from the ``presets`` library, an import, a wheel inspection) is run
and judged by ``check_run``; this module chooses the checks, runs the prerequisites row, and keeps the
report (``flagtree-cpu/validate/v1`` JSON, JUnit). Processes run in the *target* interpreter's world
(the build's venv, or ``--python``) with the recipe's run-time environment and a timeout; a check
that dies is judged from how it died, with a fix.

Run-time prerequisites (torch, numpy) are checked first, without pip; plain ``validate``
never installs anything: a missing one, or one of another version (or another build: a pin's
local label, ``torch==2.10.0+cpu``, see ``pythonenv``), is a failed row naming the exact pip
command, and the presets that import it are skipped. ``--install-prereqs`` installs them.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ... import pythonenv
from ...errors import BuildError, ValidationFailed
from ...recipe import Recipe
from ...stagekit.stage import RunOptions, StageContext
from .check_catalog import chosen_checks
from .check_run import CheckResult, Status, run_check

REPORT_SCHEMA = "flagtree-cpu/validate/v1"


@dataclass(frozen=True)
class ValidationReport:
    recipe: str
    python: Path
    results: tuple[CheckResult, ...]
    warnings: tuple[str, ...]
    seconds: float
    started: str  # ISO time, for JUnit's timestamp
    variant: str | None = None  # the recipe's variant, when it has variants

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if r.blocking]

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results) for s in ("pass", "fail", "skip")}

    def failure(self, fix: str) -> ValidationFailed:
        """The required checks that failed, as one error: each with its message and fix; the first one's
        log and diagnosis (the known failure it matched, if any) for --json."""
        failed = self.failed
        details: list[str] = []
        for r in failed:
            details += [f"{r.kernel}: {r.message}"] + ([f"   fix: {r.fix}"] if r.fix else []) + \
                       ([f"   log: {r.log}"] if r.log else [])
        first = failed[0]
        signature, excerpt = first.details.get("signature"), first.details.get("excerpt")
        return ValidationFailed(
            f"{len(failed)} required validation check{'s' if len(failed) > 1 else ''} failed",
            details=tuple(details), fix=fix, log=first.log,
            diagnosis={"signature": signature if isinstance(signature, str) else None, "cause": first.message,
                       "line": None, "excerpt": [str(line) for line in excerpt] if isinstance(excerpt, list) else []})

    def to_json(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "ok": not self.failed, "recipe": self.recipe, "python": str(self.python),
                "started": self.started, "seconds": round(self.seconds, 3), "summary": self.counts(),
                "results": [r.to_json() for r in self.results], "warnings": list(self.warnings),
                **({"variant": self.variant} if self.variant else {})}


def run_validate(ctx: StageContext, options: RunOptions) -> ValidationReport:
    recipe = ctx.recipe
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    start = time.monotonic()
    chosen = chosen_checks(recipe, options.validate.checks)
    if not options.python.exists():
        raise ValidationFailed(f"there is no Python at {options.python} to validate",
                               fix="build first (flagtree-cpu build), or pass --python with the interpreter the "
                               "build installed into")
    results: list[CheckResult] = []
    prerequisites = _prerequisites(ctx, options)
    unmet: dict[str, str | None] = {}  # name -> the installed version that does not do, None when missing
    if prerequisites is not None:
        results.append(prerequisites)
        unmet = {name: None for name in prerequisites.details.get("missing", [])}
        unmet.update(prerequisites.details.get("wrong_version", {}))
    env = check_env(ctx)
    for check in chosen:
        results.append(run_check(ctx, options, check, env, unmet))
    report = ValidationReport(recipe.name, options.python, tuple(results), tuple(hazard_warnings(recipe)),
                              time.monotonic() - start, started, recipe.variant)
    from .plan import save_last, validation_key

    key = None if options.validate.checks else validation_key(ctx, options.python, options.model)
    save_last(ctx, report.to_json(), key)
    return report


def hazard_warnings(recipe: Recipe, environ: dict[str, str] | None = None) -> list[str]:
    """The recipe's run-time hazards this shell has: inherited values that make the checks meaningless."""
    environ = dict(os.environ) if environ is None else environ
    return [f"{h.name}={environ[h.name]}: {h.why}; {h.fix or f'unset {h.name}'}"
            for h in recipe.runtime.hazards if h.applies(environ.get(h.name))]


def _prerequisites(ctx: StageContext, options: RunOptions) -> CheckResult | None:
    """The recipe's run-time prerequisites as one row; installed first with --install-prereqs."""
    runtime = ctx.recipe.python.runtime
    if not runtime:
        return None
    path = os.environ.get("PATH", "")
    start = time.monotonic()
    try:
        report = pythonenv.check(options.python, runtime, path, recipe=ctx.recipe)
        if report.missing and options.validate.install_prereqs:
            from ...installer import choose_for

            installer = choose_for(ctx.recipe, options.installer, options.python)
            pythonenv.install(options.python, report.missing, ctx.workspace, ctx.ui, recipe=ctx.recipe,
                              installer=installer)
            report = pythonenv.check(options.python, runtime, path, recipe=ctx.recipe)
    except BuildError as exc:
        raise ValidationFailed(exc.message, details=exc.details, fix=exc.fix) from exc
    found = ", ".join(f"{p.name} {p.version}" for p in report.prerequisites if p.satisfied)
    if not report.missing:
        return CheckResult("prerequisites", "pass", True, found, seconds=time.monotonic() - start,
                            details={"missing": [], "wrong_version": {}})
    commands = [shlex.join(argv) for argv in pythonenv.install_commands(
        options.python, report.missing, pythonenv.constraints_file(ctx.recipe, ctx.workspace))]
    absent = [name for name, version in report.unmet.items() if version is None]
    wrong = {name: version for name, version in report.unmet.items() if version is not None}
    summary = ", ".join([f"{len(absent)} missing"] * bool(absent)
                        + [f"{len(wrong)} wrong version{'s' if len(wrong) > 1 else ''}"] * bool(wrong))
    return CheckResult(
        "prerequisites", "fail", True, summary, "; ".join(p.describe() for p in report.missing),
        fix=" && ".join(commands) + "   (or: flagtree-cpu validate --install-prereqs)",
        seconds=time.monotonic() - start,
        details={"missing": absent, "wrong_version": wrong, "install": commands})


def runtime_env(ctx: StageContext) -> dict[str, str]:
    """The recipe's run-time environment (its env operations and the applicable toolchains' env) over this
    shell's: what `flagtree-cpu env` prints, so a check runs as a user's program would."""
    from ...buildenv import runtime_env as computed_runtime_env

    recipe, host = ctx.recipe, ctx.host
    return computed_runtime_env(recipe, os.environ, facts=recipe.facts_on(host),
                                workdir=ctx.workspace.root).env


def check_env(ctx: StageContext) -> dict[str, str]:
    from ...envops import EnvFileError, SourceScriptError

    try:
        env = runtime_env(ctx)
    except (EnvFileError, SourceScriptError) as exc:  # nothing can run as a user's program would: a failed check
        raise ValidationFailed(exc.message, details=exc.details, fix=exc.fix) from exc
    env.pop("PYTHONHOME", None)
    env["PYTHONUNBUFFERED"] = "1"  # a check that hangs or dies has still shown what it did
    return env


KernelResult = CheckResult  # the name the report's rows had
__all__ = ["REPORT_SCHEMA", "CheckResult", "KernelResult", "Status", "ValidationReport",
           "run_validate"]
