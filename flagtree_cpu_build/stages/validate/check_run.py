"""Running one recipe check and judging it, by kind — with no knowledge of any particular check.

- ``argv``: the command, judged by ``expect`` (exit status, output patterns, pytest's counts);
- ``uses``: a preset's script in the target interpreter with its parameters as ``--expect JSON``; the
  script's ``FLAGTREE_CPU_RESULT`` line is the verdict (the script judges itself);
- ``import``: the target interpreter imports the module and prints its ``__version__``, judged here;
- ``wheel``: the wheels' ELF objects and tags, read from the zip files (no process).

A check whose ``needs`` (device nodes, paths, commands on the run-time PATH, the recipe's toolchains) are
absent on this host is skipped with what is absent, never run and never failed: a hardware-only check is
declared honestly and still lets validation pass where the hardware is not.

A process that dies is judged from how it died: a timeout, SIGILL (the CPU lacks an instruction), or a
known message in its output (the recipe's ``diagnosis.run``, then the generic run-time signatures).
Everything a process prints goes to ``logs/validate-<check>-<time>.log``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ...diagnose import diagnose, signatures_for
from ...envops import EnvFileError, SourceScriptError
from ...presets import RESULT_MARKER
from ...proc import ProcResult, log_path, run_logged
from ...recipe import Check, EnvOps, Recipe
from .check_catalog import preset_of
from .check_judge import judge_output, judge_wheels

if TYPE_CHECKING:
    from ...stagekit.stage import RunOptions, StageContext

Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class CheckResult:
    """One row of the validation report."""

    kernel: str  # the check's name (the report's v1 format calls it kernel)
    status: Status
    required: bool
    figure: str = ""  # the key number: "max error 0.0143", "10 TLE ops"
    message: str = ""  # why it failed or was skipped
    fix: str = ""
    seconds: float = 0.0
    log: Path | None = None
    output: str = ""  # what the check printed (for JUnit's system-out)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def blocking(self) -> bool:
        return self.status == "fail" and self.required

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "status": self.status, "required": self.required, "figure": self.figure,
                "message": self.message, "fix": self.fix, "seconds": round(self.seconds, 3),
                "log": str(self.log) if self.log else None, "details": self.details}


# printed by the import check in the target interpreter (which need not have anything but the module)
_IMPORT = f"""import importlib, json, sys
m = importlib.import_module(sys.argv[1])
facts = {{"version": getattr(m, "__version__", None), "file": getattr(m, "__file__", None)}}
print({RESULT_MARKER!r} + json.dumps(facts, default=str), flush=True)
"""


@dataclass(frozen=True)
class Run:
    """What one check's process did."""

    result: ProcResult
    lines: list[str]
    timeout: float

    @property
    def output(self) -> str:
        return "\n".join(line for line in self.lines if not line.startswith(RESULT_MARKER))

    def marker(self) -> dict[str, Any] | None:
        line = next((x for x in reversed(self.lines) if x.startswith(RESULT_MARKER)), None)
        try:
            data = json.loads(line[len(RESULT_MARKER):]) if line is not None else None
        except ValueError:
            return None
        return data if isinstance(data, dict) else None


def run_check(ctx: StageContext, options: RunOptions, check: Check, env: dict[str, str],
              unmet: Mapping[str, str | None]) -> CheckResult:
    """Run and judge one check; ``unmet`` is the prerequisites row's verdict: {name: the installed version that
    does not satisfy the recipe, or None when it is missing}; a preset that imports one of them is skipped."""
    skip = skip_reason(ctx, options, check, unmet, env)
    if skip is not None:
        return CheckResult(check.label, "skip", check.required, message=skip)
    if check.wheel is not None:
        return _wheel(ctx, check)
    try:
        own_env = with_ops(env, check.env, check.label, ctx.workspace.root)
        check = _globbed(check, ctx.workspace.root)
    except (EnvFileError, SourceScriptError) as exc:  # its own env reads a file that is not there: this check
        return CheckResult(check.label, "fail", check.required, "did not start", exc.message, fix=exc.fix or "")
    try:
        return _run_process(ctx, options, check, own_env)
    except OSError as exc:  # no such program or working folder: the check cannot start
        what = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
        return CheckResult(check.label, "fail", check.required, "did not start", f"cannot start it: {what}",
                           fix="correct the check's argv or cwd in the recipe, or install the program it runs")


def _globbed(check: Check, workdir: Path) -> Check:
    """The check with each {glob:PATTERN} of its argv matched now (a built library, a wheel's one file)."""
    from dataclasses import replace

    from ...envreads import expand_globs

    if not any("{glob:" in a for a in check.argv):
        return check
    return replace(check, argv=tuple(expand_globs(a, workdir, f"check {check.label}: argv[{i}]")
                                     for i, a in enumerate(check.argv)))


def _run_process(ctx: StageContext, options: RunOptions, check: Check, env: dict[str, str]) -> CheckResult:
    if check.uses is not None:
        preset = preset_of(check)
        assert preset is not None  # the recipe's checks name known presets
        argv = [str(options.python), str(preset.path), "--expect", json.dumps(preset.settings(check.with_))]
        if preset.needs_model and options.model is not None:
            argv += ["--model", str(options.model)]
        run = _run(ctx, options, check, argv, env)
        return _died(ctx.recipe, check, run) or _preset_verdict(ctx.recipe, check, run)
    if check.import_ is not None:
        run = _run(ctx, options, check, [str(options.python), "-c", _IMPORT, check.import_.module], env)
        return _died(ctx.recipe, check, run) or _import_verdict(ctx.recipe, options, check, run)
    run = _run(ctx, options, check, list(check.argv), env)
    return _died(ctx.recipe, check, run) or _argv_verdict(ctx.recipe, check, run)


def skip_reason(ctx: StageContext, options: RunOptions, check: Check, unmet: Mapping[str, str | None],
                env: Mapping[str, str] | None = None) -> str | None:
    """Why the check does not run here, or None. ``env`` is the run-time environment (its PATH is where
    `needs.commands` are looked for)."""
    recipe, host = ctx.recipe, ctx.host
    if check.when is not None and not check.when.matches(recipe.facts_on(host)):
        return f"not for this host or variant (when: {_conditions(check.when)})"
    if check.where == "target" and recipe.is_cross(host.arch):
        return f"runs on {recipe.target_arch(host.arch)}; this host is {host.arch}"
    absent = absent_needs(recipe, check, (env if env is not None else os.environ).get("PATH", ""),
                          ctx.workspace.root)
    if absent:
        return f"needs {', '.join(absent)} (absent on this host)"
    preset = preset_of(check)
    if preset is not None:
        needed = [name for name in preset.imports if name in unmet]
        if needed:
            return _unmet_reason(needed, unmet)
        if preset.needs_model and options.model is None:
            return "no model given (--model PATH)"
    return None


def _unmet_reason(needed: list[str], unmet: Mapping[str, str | None]) -> str:
    """needs torch, which is missing / whose installed version (2.13.0) is not the one the recipe pins."""
    missing = [name for name in needed if unmet[name] is None]
    parts = [f"{', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} missing"] if missing else []
    parts += [f"{name}, whose installed version ({unmet[name]}) is not the one the recipe pins"
              for name in needed if unmet[name] is not None]
    return f"needs {'; and '.join(parts)} (see prerequisites)"


def absent_needs(recipe: Recipe, check: Check, path: str, workdir: Path) -> list[str]:
    """What of the check's `needs` this host lacks, each as the report names it (relative paths are in the
    workdir, where the check would run)."""
    from ...buildenv import toolchain_missing, toolchain_shortfall
    from ...gpu_facts import live_device_matches

    needs = check.needs
    absent = [device for device in needs.devices if not live_device_matches(device)]  # a glob: one match is enough
    absent += [f"path {p}" for p in needs.paths if not (workdir / p).exists()]
    absent += [f"command {c}" for c in needs.commands if shutil.which(c, path=path) is None]
    for name in needs.toolchains:
        toolchain = recipe.toolchains.get(name)
        if toolchain is None:  # the loader refuses unknown names; this is a toolchain a variant's overlay removed
            absent.append(f"toolchain {name} (not in the recipe)")
            continue
        lacking, shortfall = toolchain_missing(toolchain), toolchain_shortfall(toolchain)
        if lacking:
            listed = ", ".join(lacking[:2]) + (f" and {len(lacking) - 2} more" if len(lacking) > 2 else "")
            absent.append(f"toolchain {name} ({listed} missing)")
        elif shortfall is not None:
            absent.append(f"toolchain {name} ({shortfall})")
    return absent


def _conditions(when: Any) -> str:
    parts = [f"{key} {', '.join(value) if isinstance(value, tuple) else value}"
             for key in ("arch", "target_arch", "os_id", "os_version", "glibc", "variant")
             if (value := getattr(when, key))]
    return "; ".join(parts)


def with_ops(env: dict[str, str], ops: EnvOps, label: str = "check", workdir: Path | None = None) -> dict[str, str]:
    """A check's own env operations over the run-time environment (every operation, sourcing included)."""
    from ...envops import EnvLayer, apply_layers

    if ops.is_empty():
        return env
    return dict(apply_layers([EnvLayer(ops, f"checks.{label}.env")], env, workdir=workdir).env)


def _run(ctx: StageContext, options: RunOptions, check: Check, argv: list[str], env: dict[str, str]) -> Run:
    timeout = options.timeout or check.timeout
    lines: list[str] = []
    root = ctx.workspace.root if ctx.workspace.root.is_dir() else Path.cwd()
    cwd = root / check.cwd if check.cwd else root
    with ctx.ui.progress(f"validate {check.label}") as task:
        def on_line(line: str) -> None:
            lines.append(line)
            if options.verbose:
                ctx.ui.info(f"  {line}")
            elif not line.startswith(RESULT_MARKER):
                # a terminal shows the latest line; a log gets "running" once, then a line every 10 s
                task.update(0, None, detail=line[:60] if ctx.ui.interactive else "running")

        result = run_logged(argv, cwd=cwd, env=env, log=log_path(ctx.workspace.logs_dir, f"validate-{check.label}"),
                            on_line=on_line, timeout_s=timeout,
                            on_idle=lambda quiet: task.update(0, None, detail=f"running, no output for {quiet:.0f} s"),
                            header=[f"{k}={v}" for k, v in sorted({**ctx.recipe.runtime.env.set,
                                                                    **check.env.set}.items())])
    return Run(result, lines, timeout)


def _common(check: Check, run: Run) -> dict[str, Any]:
    return {"kernel": check.label, "required": check.required, "seconds": run.result.seconds, "log": run.result.log,
            "output": run.output}


def _died(recipe: Recipe, check: Check, run: Run) -> CheckResult | None:
    """A timeout or SIGILL: the same for every kind of check."""
    if run.result.timed_out:
        return CheckResult(status="fail", figure="timeout", message=f"timed out after {run.timeout:g} s (stopped)",
                           fix="look at the log for where it stopped; if it was only slow (a first JIT compile on "
                           "a throttled or little core), pass --timeout or raise the check's `timeout` "
                           "(flagtree-cpu doctor --only cpu.topology --only cpu.governor)", **_common(check, run))
    if run.result.returncode == -signal.SIGILL:
        features = recipe.platform.target.cpu_features
        needs = f" (the recipe's target needs {', '.join(features)})" if features else ""
        return CheckResult(status="fail", figure="SIGILL", message="killed by SIGILL (illegal instruction): this "
                           f"CPU lacks an instruction the code uses{needs}",
                           fix="flagtree-cpu doctor --only cpu.features   # run on a CPU that has them, or rebuild "
                           "for this one", **_common(check, run))
    return None


def _crashed(recipe: Recipe, check: Check, run: Run, fallback: str, fix: str) -> CheckResult:
    """A process that ended without a verdict: a known failure from its output, or ``fallback``."""
    diagnosis = diagnose(run.output, signatures=signatures_for(recipe, "run"))
    how = f"killed by {run.result.signal_name}" if run.result.signal_name else f"exit status {run.result.returncode}"
    if diagnosis.signature is not None:
        return CheckResult(status="fail", figure=diagnosis.signature.id, message=f"{diagnosis.signature.cause} "
                           f"({how})", fix=diagnosis.signature.fix,
                           details={"signature": diagnosis.signature.id, "excerpt": list(diagnosis.excerpt)},
                           **_common(check, run))
    last = next((line.strip() for line in reversed(run.output.splitlines()) if line.strip()), "no output")
    return CheckResult(status="fail", figure="crashed", message=f"{fallback} ({how}): {last}", fix=fix,
                       details={"excerpt": list(diagnosis.excerpt)}, **_common(check, run))


def _preset_verdict(recipe: Recipe, check: Check, run: Run) -> CheckResult:
    verdict = run.marker()
    if verdict is None or verdict.get("status") not in ("pass", "fail", "skip"):
        return _crashed(recipe, check, run, "crashed", f"read the check's output: {run.result.log}")
    details = verdict.get("details")
    return CheckResult(status=verdict["status"], figure=str(verdict.get("figure", "")),
                       message=str(verdict.get("message", "")), fix=str(verdict.get("fix", "")),
                       details=details if isinstance(details, dict) else {}, **_common(check, run))


def _import_verdict(recipe: Recipe, options: RunOptions, check: Check, run: Run) -> CheckResult:
    assert check.import_ is not None
    module, wanted = check.import_.module, check.import_.version
    found = run.marker()
    if found is None or run.result.returncode != 0:
        return _crashed(recipe, check, run, f"cannot import {module}",
                        f"install {module} into {options.python}, or pass --python with the interpreter it is in")
    version = found.get("version")
    common = {**_common(check, run), "details": found}
    figure = f"{module} {version}" if version else module
    if wanted is None:
        return CheckResult(status="pass", figure=figure, **common)
    try:
        fits = version is not None and SpecifierSet(wanted).contains(Version(str(version)), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        fits = False
    if fits:
        return CheckResult(status="pass", figure=figure, **common)
    seen = f"{module} {version}" if version else f"{module} has no __version__"
    return CheckResult(status="fail", figure=figure, message=f"{seen}, expected {wanted} ({found.get('file')})",
                       fix=f"install a {module} in {wanted} into {options.python}, or pass --python with the "
                       "interpreter that has it", **common)


def _argv_verdict(recipe: Recipe, check: Check, run: Run) -> CheckResult:
    judgement = judge_output(check.expect, run.result.returncode, run.output)
    common = {**_common(check, run), "details": judgement.details}
    if not judgement.problems:
        return CheckResult(status="pass", figure=judgement.figure, **common)
    if run.result.returncode != check.expect.exit:
        diagnosis = diagnose(run.output, signatures=signatures_for(recipe, "run"))
        if diagnosis.signature is not None:
            return CheckResult(status="fail", figure=diagnosis.signature.id, fix=diagnosis.signature.fix,
                               message=f"{diagnosis.signature.cause} ({'; '.join(judgement.problems)})",
                               **{**common, "details": {**judgement.details, "signature": diagnosis.signature.id,
                                                        "excerpt": list(diagnosis.excerpt)}})
    return CheckResult(status="fail", figure=judgement.figure, message="; ".join(judgement.problems),
                       fix=f"read the check's output: {run.result.log}", **common)


def _wheel(ctx: StageContext, check: Check) -> CheckResult:
    assert check.wheel is not None
    pattern = check.wheel.path
    if not os.path.isabs(pattern):
        pattern = str(ctx.workspace.root / pattern)
    wheels = sorted(Path(p) for p in glob.glob(pattern))
    if not wheels:
        return CheckResult(check.label, "fail", check.required, "no wheel", f"no wheel matches {pattern}",
                           fix="build the wheel first (flagtree-cpu build --wheel DIR), or correct the check's "
                           "`wheel.path`")
    judgement = judge_wheels(check.wheel, wheels)
    status = "fail" if judgement.problems else "pass"
    return CheckResult(check.label, status, check.required, judgement.figure, "; ".join(judgement.problems),
                       fix="the wheel holds objects built for another machine: build it with the target's "
                       "toolchain (cross compiler, sysroot)" if judgement.problems else "", details=judgement.details)
