"""validate: run the bundled validation kernels in the target interpreter and judge them.

Each kernel (``kernels/*.py``) runs in its own subprocess of the *target* interpreter (the
build's venv, or ``--python``) with the recipe's run-time environment, a timeout, and its
expectations from the recipe as ``--expect JSON``. The kernel prints what it does and ends
with one ``FLAGTREE_CPU_RESULT {json}`` line; everything it printed goes to
``logs/validate-<kernel>-<time>.log``. A kernel that dies before that line is judged from
how it died: a timeout, a signal (SIGILL: the CPU lacks an instruction libtriton uses), or
a known message in its output (``diagnose.RUNTIME_SIGNATURES``) — each with a fix.

Run-time prerequisites (torch, numpy) are checked first, without pip; plain ``validate``
never installs anything: a missing one is a failed row naming the exact pip command, and
the kernels that import it are skipped. ``--install-prereqs`` installs them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from . import pythonenv
from .diagnose import RUNTIME_SIGNATURES, diagnose
from .errors import BuildError, UsageError, ValidationFailed
from .kernel_catalog import CATALOG as CATALOG  # the catalog, as the CLI and tests know it
from .kernel_catalog import KERNELS_DIR, KernelInfo, configured, kernel_info
from .kernels._common import MARKER
from .proc import log_path, run_logged
from .recipe import Recipe
from .stages import StageContext

REPORT_SCHEMA = "flagtree-cpu/validate/v1"
Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class ValidateOptions:
    python: Path
    kernels: tuple[str, ...] = ()  # empty: every kernel the recipe configures
    model: Path | None = None
    timeout: float | None = None  # overrides the recipe's per-kernel timeouts
    install_prereqs: bool = False
    verbose: bool = False


@dataclass(frozen=True)
class KernelResult:
    kernel: str
    status: Status
    required: bool
    figure: str = ""  # the key number: "max error 0.0143", "10 TLE ops"
    message: str = ""  # why it failed or was skipped
    fix: str = ""
    seconds: float = 0.0
    log: Path | None = None
    output: str = ""  # what the kernel printed (for JUnit's system-out)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def blocking(self) -> bool:
        return self.status == "fail" and self.required

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "status": self.status, "required": self.required, "figure": self.figure,
                "message": self.message, "fix": self.fix, "seconds": round(self.seconds, 3),
                "log": str(self.log) if self.log else None, "details": self.details}


@dataclass(frozen=True)
class ValidationReport:
    recipe: str
    python: Path
    results: tuple[KernelResult, ...]
    warnings: tuple[str, ...]
    seconds: float
    started: str  # ISO time, for JUnit's timestamp

    @property
    def failed(self) -> list[KernelResult]:
        return [r for r in self.results if r.blocking]

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results) for s in ("pass", "fail", "skip")}

    def failure(self, fix: str) -> ValidationFailed:
        """The required kernels that failed, as one error: each with its message and fix; the first one's
        log and diagnosis (the known failure it matched, if any) for --json."""
        failed = self.failed
        details: list[str] = []
        for r in failed:
            details += [f"{r.kernel}: {r.message}"] + ([f"   fix: {r.fix}"] if r.fix else []) + \
                       ([f"   log: {r.log}"] if r.log else [])
        first = failed[0]
        signature, excerpt = first.details.get("signature"), first.details.get("excerpt")
        return ValidationFailed(
            f"{len(failed)} required validation kernel{'s' if len(failed) > 1 else ''} failed",
            details=tuple(details), fix=fix, log=first.log,
            diagnosis={"signature": signature if isinstance(signature, str) else None, "cause": first.message,
                       "line": None, "excerpt": [str(line) for line in excerpt] if isinstance(excerpt, list) else []})

    def to_json(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "ok": not self.failed, "recipe": self.recipe, "python": str(self.python),
                "started": self.started, "seconds": round(self.seconds, 3), "summary": self.counts(),
                "results": [r.to_json() for r in self.results], "warnings": list(self.warnings)}


def run_validate(ctx: StageContext, options: ValidateOptions) -> ValidationReport:
    recipe = ctx.recipe
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    start = time.monotonic()
    chosen = _chosen_kernels(recipe, options.kernels)
    if not options.python.exists():
        raise ValidationFailed(f"there is no Python at {options.python} to validate",
                               fix="build first (flagtree-cpu build), or pass --python with the interpreter FlagTree "
                               "is installed in")
    warnings = []
    if os.environ.get("TRITON_INTERPRET", "").lower() in ("1", "true", "on", "yes"):
        warnings.append("TRITON_INTERPRET is set: kernels run in Triton's Python interpreter, not through the cpu "
                        "backend, so passing proves nothing about the build; unset it for a real validation")
    results: list[KernelResult] = []
    prerequisites = _prerequisites(ctx, options)
    missing: set[str] = set()
    if prerequisites is not None:
        results.append(prerequisites)
        missing = set(prerequisites.details.get("missing", []))
    env = _kernel_env(recipe)
    for info, settings in chosen:
        results.append(_run_kernel(ctx, options, info, settings, env, missing))
    report = ValidationReport(recipe.name, options.python, tuple(results), tuple(warnings),
                              time.monotonic() - start, started)
    from .plans.validation import save_last, validation_key

    save_last(ctx, report.to_json(), None if options.kernels else validation_key(ctx, options.python, options.model))
    return report


def _chosen_kernels(recipe: Recipe, names: Sequence[str]) -> list[tuple[KernelInfo, Any]]:
    available = configured(recipe)
    if not available:
        raise UsageError(f"recipe {recipe.name} has no validation kernels",
                         fix="add a validation: section to the recipe (see flagtree-cpu recipe schema)")
    if not names:
        return available
    by_name = {info.name: (info, settings) for info, settings in available}
    chosen = []
    for name in dict.fromkeys(names):
        info = kernel_info(name)
        if name not in by_name:
            raise UsageError(f"recipe {recipe.name} does not configure the {name} kernel",
                             fix=f"add validation.{name} to the recipe, or run one of: {', '.join(by_name)}")
        chosen.append(by_name[info.name])
    return chosen


def _prerequisites(ctx: StageContext, options: ValidateOptions) -> KernelResult | None:
    """The recipe's run-time prerequisites as one row; installed first with --install-prereqs."""
    runtime = ctx.recipe.python.runtime
    if not runtime:
        return None
    path = os.environ.get("PATH", "")
    start = time.monotonic()
    try:
        report = pythonenv.check(options.python, runtime, path)
        if report.missing and options.install_prereqs:
            pythonenv.install(options.python, report.missing, ctx.workspace, ctx.ui)
            report = pythonenv.check(options.python, runtime, path)
    except BuildError as exc:
        raise ValidationFailed(exc.message, details=exc.details, fix=exc.fix) from exc
    found = ", ".join(f"{p.name} {p.installed}" for p in report.prerequisites if p.satisfied)
    if not report.missing:
        return KernelResult("prerequisites", "pass", True, found, seconds=time.monotonic() - start,
                            details={"missing": []})
    commands = [shlex.join(argv) for argv in pythonenv.install_commands(options.python, report.missing)]
    return KernelResult(
        "prerequisites", "fail", True, f"{len(report.missing)} missing",
        "; ".join(p.describe() for p in report.missing),
        fix=" && ".join(commands) + "   (or: flagtree-cpu validate --install-prereqs)",
        seconds=time.monotonic() - start,
        details={"missing": [p.name for p in report.missing], "install": commands})


def _kernel_env(recipe: Recipe) -> dict[str, str]:
    env = {**os.environ, **recipe.runtime.env}
    env.pop("PYTHONHOME", None)
    env["PYTHONUNBUFFERED"] = "1"  # a kernel that hangs or dies has still shown what it did
    return env


def _run_kernel(ctx: StageContext, options: ValidateOptions, info: KernelInfo, settings: Any, env: dict[str, str],
                missing: set[str]) -> KernelResult:
    needed = [name for name in info.imports if name in missing]
    if needed:
        return KernelResult(info.name, "skip", settings.required, message=f"needs {', '.join(needed)}, which is "
                            "missing (see prerequisites)")
    if info.name == "decode-e2e" and options.model is None:
        return KernelResult(info.name, "skip", settings.required, message="no model given (--model PATH)")
    expect = {k: v for k, v in dataclasses.asdict(settings).items() if k not in ("required", "timeout")}
    argv = [str(options.python), str(KERNELS_DIR / info.script), "--expect", json.dumps(expect)]
    if info.name == "decode-e2e" and options.model is not None:
        argv += ["--model", str(options.model)]
    timeout = options.timeout or settings.timeout or ctx.recipe.validation.timeout  # type: ignore[union-attr]
    lines: list[str] = []
    with ctx.ui.progress(f"validate {info.name}") as task:
        def on_line(line: str) -> None:
            lines.append(line)
            if options.verbose:
                ctx.ui.info(f"  {line}")
            elif not line.startswith(MARKER):
                # a terminal shows the latest line; a log gets "running" once, then a line every 10 s
                task.update(0, None, detail=line[:60] if ctx.ui.interactive else "running")

        cwd = ctx.workspace.root if ctx.workspace.root.is_dir() else Path.cwd()
        result = run_logged(argv, cwd=cwd, env=env, log=log_path(ctx.workspace.logs_dir, f"validate-{info.name}"),
                            on_line=on_line, timeout_s=timeout,
                            on_idle=lambda quiet: task.update(0, None, detail=f"running, no output for {quiet:.0f} s"),
                            header=[f"{k}={v}" for k, v in sorted(ctx.recipe.runtime.env.items())])
    return _judge(info, settings, result, lines, timeout)


def _judge(info: KernelInfo, settings: Any, result: Any, lines: list[str], timeout: float) -> KernelResult:
    output = "\n".join(line for line in lines if not line.startswith(MARKER))
    common = {"kernel": info.name, "required": settings.required, "seconds": result.seconds, "log": result.log,
              "output": output}
    if result.timed_out:
        return KernelResult(status="fail", figure="timeout", message=f"timed out after {timeout:g} s (stopped)",
                            fix="look at the log for where it stopped; a slow first JIT compile on a throttled or "
                            "LITTLE core can need more: pass --timeout or raise validation.timeout "
                            "(flagtree-cpu doctor --check cpu.topology --check cpu.governor)", **common)
    if result.returncode == -signal.SIGILL:
        return KernelResult(status="fail", figure="SIGILL", message="killed by SIGILL (illegal instruction): this "
                            "CPU lacks an instruction libtriton or the kernel uses (SVE2, i8mm, bf16)",
                            fix="flagtree-cpu doctor --check cpu.features   # run on a CPU that has them, or rebuild "
                            "for this one", **common)
    marker = next((line for line in reversed(lines) if line.startswith(MARKER)), None)
    if marker is None:
        return _crashed(result, output, common)
    verdict = json.loads(marker[len(MARKER):])
    status, message = verdict["status"], verdict.get("message", "")
    details = verdict.get("details", {})
    fix = ""
    if info.name == "backend":
        if status == "pass":
            status, message, fix = _judge_version(settings.triton_version, details.get("triton_version"))
        else:
            fix = _backend_fix(details)
    elif status == "fail":
        fix = verdict.get("fix") or _MISCOMPILED
    return KernelResult(status=status, figure=verdict.get("figure", ""), message=message, fix=fix, details=details,
                        **common)


_MISCOMPILED = ("a wrong result from a kernel that compiled: bring the sources to the recipe's pins and rebuild "
                "(flagtree-cpu sync && flagtree-cpu link && flagtree-cpu build --force); if it persists, report it "
                "with the log")


def _judge_version(wanted: str, found: str | None) -> tuple[Status, str, str]:
    """The backend kernel reports triton.__version__; the recipe's range is judged here (the target
    interpreter need not have packaging)."""
    try:
        fits = found is not None and SpecifierSet(wanted).contains(Version(found), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        fits = False
    if fits:
        return "pass", "", ""
    return ("fail", f"triton {found} does not satisfy {wanted}: this interpreter has another triton than FlagTree's",
            "uninstall it and rebuild (pip uninstall -y triton && flagtree-cpu build --force), or pass --python with "
            "the build's interpreter")


def _backend_fix(details: dict[str, Any]) -> str:
    if "cpu" in details.get("backends", ["cpu"]) and not details.get("missing") and details.get("extra"):
        return ("libtriton has TLE ops the recipe does not list: flagtree-cpu is at another commit than the recipe "
                "expects — check `flagtree-cpu sync`, or update validation.backend.builder_methods")
    if "cpu" in details.get("backends", ["cpu"]):
        return ("libtriton was built without (all of) flagtree-cpu's TLE ops: bring sources and links to the recipe "
                "(flagtree-cpu sync && flagtree-cpu link), then flagtree-cpu build --force")
    return ("this interpreter's triton is not FlagTree's CPU build: flagtree-cpu build (it installs into the target "
            "venv), or pass --python with the interpreter FlagTree was built into")


def _crashed(result: Any, output: str, common: dict[str, Any]) -> KernelResult:
    diagnosis = diagnose(output, signatures=RUNTIME_SIGNATURES)
    how = f"killed by {result.signal_name}" if result.signal_name else f"exit status {result.returncode}"
    if diagnosis.signature is not None:
        return KernelResult(status="fail", figure=diagnosis.signature.id, message=f"{diagnosis.signature.cause} "
                            f"({how})", fix=diagnosis.signature.fix,
                            details={"signature": diagnosis.signature.id, "excerpt": list(diagnosis.excerpt)},
                            **common)
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")
    return KernelResult(status="fail", figure="crashed", message=f"crashed ({how}): {last}",
                        fix=f"read the kernel's output: {result.log}",
                        details={"excerpt": list(diagnosis.excerpt)}, **common)
