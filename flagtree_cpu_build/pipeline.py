"""setup: the stages in order — preflight, sources ∥ artifacts, links, python env, build, validate.

Each stage is the same function its subcommand calls, so `setup` can never drift from
`sync`, `fetch`, `link`, `build` and `validate`. What this module adds:

- a preflight (``preflight``: the fast, blocking subset of doctor) that lists every host
  problem before anything is changed;
- the LLVM download running in a worker thread while the main thread clones, each with its
  own row in one live display; Ctrl-C stops both (the download keeps its partial file);
- resumability for free: every stage skips what is already done, so a re-run after a
  failure or Ctrl-C continues where it stopped, and a re-run when everything is current
  does no network I/O and runs no pip and no build;
- a report: per-stage status, detail and time, the commits and artifact digests, the
  validation results, and the failure with its diagnosis (`--json`, and ::error on GitHub).

`run_setup` never raises for a stage failure: the report carries the error (its exit code decides
the process's), so the summary can be shown whatever happened."""

from __future__ import annotations

import os
import shlex
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import pythonenv
from .errors import BuildError, FlagtreeCpuError, Interrupted, Terminated, ValidationFailed
from .preflight import run_preflight
from .setup_report import SetupReport, StageRecord, collect_pins, failed_stage, is_fresh, junit_without_kernels, save
from .stages import Action, StageContext, StageResult

PLAN_SCHEMA = "flagtree-cpu/setup-plan/v1"
STAGES = ("preflight", "sources", "artifacts", "links", "python", "build", "validate")

@dataclass(frozen=True)
class SetupOptions:
    python: Path
    offline: bool = False
    frozen: bool = False
    require_hashes: bool = False
    update: bool = False
    allow_dirty: bool = False
    skip_build: bool = False  # also skips the python env and validation: there is nothing new to validate
    skip_validate: bool = False
    ignore_host: bool = False
    install_system_packages: bool = False
    git_cache: Path | None = None
    cache_dir: Path | None = None
    mirrors: tuple[Any, ...] = ()
    jobs: int = 1  # MAX_JOBS the build gets (for the out-of-memory advice)
    model: Path | None = None
    junit: Path | None = None
    timeout: float | None = None
    verbose: bool = False

    @property
    def validating(self) -> bool:
        return not (self.skip_build or self.skip_validate)


def run_setup(ctx: StageContext, options: SetupOptions) -> SetupReport:
    start = time.monotonic()
    fresh = is_fresh(ctx.workspace)
    report = SetupReport(ctx.recipe.name, ctx.workspace.root, options.python,
                         datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         [StageRecord(stage, "not run") for stage in STAGES])
    steps = [("preflight", lambda: run_preflight(ctx, options)),
             ("sources", lambda: _sources_and_artifacts(ctx, options, report)),
             ("links", lambda: _links(ctx)),
             ("python", lambda: _python_env(ctx, options)),
             ("build", lambda: _build(ctx, options)),
             ("validate", lambda: _validate(ctx, options, report))]
    current = "preflight"
    try:
        for current, step in steps:
            with ctx.ui.group(f"flagtree-cpu setup: {current}"):
                began = time.monotonic()
                result = step()
                if result is not None:  # sources ∥ artifacts fill in their own records
                    _finish(report.record(current), result, time.monotonic() - began, ctx)
    except KeyboardInterrupt as exc:
        ctx.ui.cancel.set()
        _mark_unfinished(report, current, "interrupted", exc.name if isinstance(exc, Terminated) else "Ctrl-C")
        # name what was running: with sources ∥ artifacts, only the one that had not finished
        running = [r.stage for r in report.records if r.status == "interrupted"] or [current]
        report.error = Interrupted(f"setup ({' and '.join(running)})", cause=exc)
        report.error.fix = ("run the same command again: finished stages are kept and a download resumes where it "
                            "stopped")
    except FlagtreeCpuError as exc:
        _mark_unfinished(report, current, "failed", exc.message)
        report.error = exc
        ctx.ui.annotate_error(f"flagtree-cpu setup: {failed_stage(report)} failed", exc)
    report.seconds = time.monotonic() - start
    collect_pins(ctx, report)
    if not (fresh and report.record("preflight").status != "ok" and report.record("sources").status == "not run"):
        save(ctx, report)  # a new workspace that stopped at preflight is left as it was found: not there
    if options.junit is not None and not report.junit_written:
        junit_without_kernels(ctx, options.junit, report)
    return report


def _finish(record: StageRecord, result: StageResult, seconds: float, ctx: StageContext) -> None:
    record.status, record.detail, record.seconds, record.result = result.status, _summary(result), seconds, result
    for warning in result.warnings:
        ctx.ui.warn(warning)
    ctx.ui.info(f"{record.stage}: {record.status} ({seconds:.1f}s)")  # the detail is in the summary table
    if ctx.ui.verbose and not ctx.ui.json_mode:
        ctx.ui.table([record.stage, "status", "detail"], [[a.subject, ctx.ui.styled(a.status), a.detail]
                                                          for a in result.actions])


def _summary(result: StageResult) -> str:
    """One line for the summary table: what changed, or that everything was already there."""
    if len(result.actions) == 1:
        return result.actions[0].detail or result.actions[0].status
    items = [a for a in result.actions if not a.data.get("check")]  # compatibility checks are not items
    checks = [a for a in result.actions if a.data.get("check")]
    changed = [a for a in items if a.status in ("created", "updated")]
    skipped = [a for a in items if a.status == "skipped"]
    if len(changed) > 3:  # twelve links: a count, not a list
        parts = [f"{sum(a.status == s for a in changed)} {s}" for s in ("created", "updated")
                 if any(a.status == s for a in changed)]
    else:
        parts = [f"{a.subject} {a.status}" for a in changed]
    parts += [f"{a.subject} skipped ({a.detail})" for a in skipped]
    current = len(items) - len(changed) - len(skipped)
    if current:
        parts.append(f"{current} already current" if parts else f"all {current} current")
    parts += [a.detail if a.subject in a.detail else f"{a.subject}: {a.detail}" for a in checks]
    return ", ".join(parts) or "nothing to do"


def _mark_unfinished(report: SetupReport, current: str, status: str, detail: str) -> None:
    for record in report.records:
        if record.status == "not run" and record.stage == current:
            record.status, record.detail = status, detail
    if current == "sources":  # the concurrent pair: whichever did not finish
        for record in (report.record("sources"), report.record("artifacts")):
            if record.status == "not run":
                record.status, record.detail = status, detail


def _skipped(stage: str, why: str) -> StageResult:
    return StageResult(stage, (Action(stage, "skipped", why),))


# --- sources ∥ artifacts -------------------------------------------------------------------------


def _sources_and_artifacts(ctx: StageContext, options: SetupOptions, report: SetupReport) -> None:
    """Clone in this thread while the LLVM tarball downloads in another; both finish before either fails.

    A failure in one lets the other finish (a complete download is kept for the re-run); Ctrl-C
    cancels the worker at its next progress update and waits briefly for it to leave its partial
    file in order."""
    from .fetch import FetchOptions, run_fetch
    from .sources import SyncOptions, run_sync

    sync_options = SyncOptions(update=options.update, frozen=options.frozen, offline=options.offline,
                               allow_dirty=options.allow_dirty, git_cache=options.git_cache)
    fetch_options = FetchOptions(offline=options.offline, require_hashes=options.require_hashes,
                                 frozen=options.frozen, cache_dir=options.cache_dir, mirrors=options.mirrors)
    fetched: dict[str, Any] = {}
    # Waited on instead of Thread.join: a join interrupted by Ctrl-C marks the thread as stopped in
    # CPython 3.11, so a second join returns at once while the worker is still cleaning up.
    done = threading.Event()

    def fetch_worker() -> None:
        began = time.monotonic()
        try:
            fetched["result"] = run_fetch(ctx, fetch_options)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which decides
            fetched["error"] = exc
        finally:
            fetched["seconds"] = time.monotonic() - began
            done.set()

    if not ctx.recipe.artifacts:
        fetched.update(result=_skipped("fetch", "the recipe has no artifacts"), seconds=0.0)
        done.set()
    worker = threading.Thread(target=fetch_worker, name="flagtree-cpu fetch", daemon=True)
    sync_error: FlagtreeCpuError | None = None
    with ctx.ui.concurrent():
        if ctx.recipe.artifacts:
            worker.start()
        try:
            began = time.monotonic()
            try:
                synced = run_sync(ctx, sync_options)
                _finish(report.record("sources"), synced, time.monotonic() - began, ctx)
            except FlagtreeCpuError as exc:
                sync_error = exc
                record = report.record("sources")
                record.status, record.detail, record.seconds = "failed", exc.message, time.monotonic() - began
            done.wait()
        except KeyboardInterrupt:
            ctx.ui.cancel.set()
            done.wait(timeout=15)  # its next progress update stops it; let it leave its files in order
            raise
    error = fetched.get("error")
    record = report.record("artifacts")
    if isinstance(error, KeyboardInterrupt):
        raise error
    if error is not None:
        record.status, record.seconds = "failed", fetched["seconds"]
        record.detail = error.message if isinstance(error, FlagtreeCpuError) else repr(error)
    else:
        _finish(record, fetched["result"], fetched["seconds"], ctx)
    if sync_error is not None:
        if isinstance(error, FlagtreeCpuError):
            ctx.ui.error(error)  # the first error decides the exit code; the second is still shown
        raise sync_error
    if error is not None:
        raise error


# --- links, python env, build, validate -----------------------------------------------------------


def _links(ctx: StageContext) -> StageResult:
    from .links import run_link

    if ctx.recipe.links is None:
        return _skipped("link", "the recipe has no links")
    return run_link(ctx)[1]


def _python_env(ctx: StageContext, options: SetupOptions) -> StageResult:
    """The guide's steps 1.1-1.2: the venv, then the build and run-time Python prerequisites."""
    if options.skip_build:
        return _skipped("python", "--skip-build")
    recipe, ws = ctx.recipe, ctx.workspace
    actions = []
    created = not options.python.exists()
    pythonenv.ensure_interpreter(options.python, ws, recipe.python.requires, ctx.ui)
    if created:
        actions.append(Action("venv", "created", str(options.python.parent.parent)))
    # run-time ones only when the kernels will run: with --skip-validate nothing here uses them, and
    # torch is a large download from an index that may not be reachable
    wanted = list(recipe.python.build) + (list(recipe.python.runtime) if options.validating else [])
    path = os.pathsep.join([str(options.python.parent), os.environ.get("PATH", "")])
    report = pythonenv.check(options.python, wanted, path)
    if report.missing:
        commands = pythonenv.install_commands(options.python, report.missing)
        if options.offline:
            raise BuildError(f"{len(report.missing)} Python prerequisites are missing in {options.python} and "
                             "--offline forbids pip", details=tuple(p.describe() for p in report.missing),
                             fix=" && ".join(shlex.join(c) for c in commands) + "   (with PIP_FIND_LINKS=<wheel "
                             "folder> PIP_NO_INDEX=1 on an air-gapped machine), then setup --offline again")
        names = ", ".join(p.name for p in report.missing)
        pythonenv.install_and_recheck(report, ws, ctx.ui, lambda: pythonenv.check(options.python, wanted, path))
        actions.append(Action("prerequisites", "created", f"installed {names}"))
    else:
        actions.append(Action("prerequisites", "ok", f"Python {report.version}; all {len(wanted)} present"))
    if recipe.python.runtime and not options.validating:
        actions.append(Action("run-time prerequisites", "skipped", "--skip-validate: not installed "
                              "(`flagtree-cpu validate --install-prereqs` installs them)"))
    return StageResult("python", tuple(actions))


def _build(ctx: StageContext, options: SetupOptions) -> StageResult:
    from .build import BuildOptions, run_build

    if options.skip_build:
        return _skipped("build", "--skip-build")
    return run_build(ctx, BuildOptions(python=options.python, offline=options.offline,
                                       ignore_host=options.ignore_host, verbose=options.verbose, jobs=options.jobs))


def _validate(ctx: StageContext, options: SetupOptions, report: SetupReport) -> StageResult:
    from .junit import write_junit
    from .validate import ValidateOptions, configured, current_validation, run_validate

    if not options.validating:
        return _skipped("validate", "--skip-build" if options.skip_build else "--skip-validate")
    if not configured(ctx.recipe):
        return _skipped("validate", "the recipe has no validation kernels")
    last = current_validation(ctx, options.python, options.model) if options.junit is None else None
    if last is not None:  # a JUnit report is for this run: --junit always runs the kernels
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
        details = []
        for r in validation.failed:
            details += [f"{r.kernel}: {r.message}"] + ([f"   fix: {r.fix}"] if r.fix else []) + \
                       ([f"   log: {r.log}"] if r.log else [])
        raise ValidationFailed(f"{len(validation.failed)} required validation kernel"
                               f"{'s' if len(validation.failed) > 1 else ''} failed", details=tuple(details),
                               fix="fix the cause above, then `flagtree-cpu setup` again (or `flagtree-cpu validate` "
                               "to re-run just the kernels)")
    counts = validation.counts()
    detail = f"{counts['pass']} passed" + (f", {counts['fail']} optional failed" if counts["fail"] else "")
    skipped = [f"{r.kernel}: {r.message}" for r in validation.results if r.status == "skip"]
    if skipped:
        detail += f", {len(skipped)} skipped ({'; '.join(skipped)})"
    return StageResult("validate", (Action("kernels", "created", detail, {"report": validation.to_json()}),),
                       validation.warnings)
