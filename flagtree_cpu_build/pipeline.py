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

import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from .errors import FlagtreeCpuError, Interrupted, Terminated, ValidationFailed
from .install_board import Board, install_only_board, take
from .interrupts import Latch, interrupts_deferred
from .no_network import NO_NETWORK_FIX, one_error
from .preflight import run_preflight
from .setup_report import SetupReport, StageRecord, collect_pins, failed_stage, is_fresh, junit_without_kernels, save
from .stagekit.stage import Action, RunOptions, Stage, StageContext, StageResult
from .stages.registry import STAGE_NAMES, STAGES, run_stage
from .table_layout import LABEL, PATH, Column

PLAN_SCHEMA = "flagtree-cpu/setup-plan/v1"
__all__ = ["PLAN_SCHEMA", "run_setup"]


def run_setup(ctx: StageContext, options: RunOptions, bundle: dict[str, Any] | None = None) -> SetupReport:
    """Every stage in order; ``bundle``: what `setup --bundle` imported first (kept in the saved report too)."""
    start = time.monotonic()
    fresh = is_fresh(ctx.workspace)
    report = SetupReport(ctx.recipe.name, ctx.workspace.root, options.python,
                         datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         [StageRecord(stage, "not run") for stage in STAGE_NAMES], variant=ctx.recipe.variant,
                         bundle=bundle)
    if ctx.base is not None:  # a stacked recipe: its base is set up first, as one row of this report
        report.records.insert(1, StageRecord("base", "not run"))
    current = ["preflight"]  # the stages running now
    try:
        board = install_only_board(ctx, options)  # asked first: an install-only board's preflight judges less
        _preflight(ctx, options, report, install_only=board is not None)
        if ctx.base is not None:
            current = ["base"]
            ctx = _set_up_base(ctx, options, report)
        reading, others = _read_split(ctx)
        reads = bool(reading)
        current = ["build"]
        taken = board is not None and _install_only(ctx, options, report, board)
        if board is not None and not taken:  # the wheelhouse did not deliver: the usual path, judged as usual
            current = ["preflight"]
            _preflight(ctx, options, report, install_only=False)
            current = ["build"]
        for group in _in_turn(STAGES[-1:] if taken else STAGES, apart=reads and not others):
            current = [stage.name for stage in group]
            with ctx.ui.group(f"flagtree-cpu setup: {group[0].name}"):
                if len(group) > 1:  # the artifacts that read a source's file wait for it; the others go beside
                    _side_by_side(ctx, options, report, group, _only(ctx, others) if reads else ctx)
                    if reads and ctx.reopen is not None:
                        ctx = ctx.reopen()  # the values those artifacts read, from the files sync checked out
                        current = [group[1].name]
                        _then_reading(ctx, options, report, group[1], reading)
                    continue
                stage, began = group[0], time.monotonic()
                why = stage.skip(options)
                result = _skipped(stage.command, why) if why else _run(stage, ctx, options, report)
                _finish(report.record(stage.name), result, time.monotonic() - began, ctx)
            if reads and stage.name == "sources" and ctx.reopen is not None:
                ctx = ctx.reopen()  # the values the artifacts read, from the files sync just checked out
    except KeyboardInterrupt as exc:
        ctx.ui.cancel.set()
        _mark_unfinished(report, current, "interrupted", exc.name if isinstance(exc, Terminated) else "Ctrl-C")
        # name what was running: with sources ∥ artifacts, only the one that had not finished
        running = [r.stage for r in report.records if r.status == "interrupted"] or current
        report.error = Interrupted(f"setup ({' and '.join(running)})", cause=exc)
        report.error.fix = ("run the same command again: finished stages are kept and a download resumes where it "
                            "stopped")
    except FlagtreeCpuError as exc:
        if current == ["sources"] and _reads_sources(ctx) and exc.unresolved_hosts:
            # no network, and the downloads wait for the sources: the ways forward of a machine without network
            exc.details = (*exc.details, _waiting_downloads(ctx, options))
            exc.fix = NO_NETWORK_FIX
        _mark_unfinished(report, current, "failed", exc.message)
        exc.fix = ctx.ui.in_context(exc.fix)  # the report (and last-setup.json) keep the fix as the user copies it
        report.error = exc
        ctx.ui.annotate_error(f"flagtree-cpu setup: {failed_stage(report)} failed", exc)
    report.seconds = time.monotonic() - start
    collect_pins(ctx, report)
    if not (fresh and report.record("preflight").status != "ok" and report.record("sources").status == "not run"):
        save(ctx, report)  # a new workspace that stopped at preflight is left as it was found: not there
    if options.junit is not None and not report.junit_written:
        junit_without_kernels(ctx, options.junit, report)
    return report


def _preflight(ctx: StageContext, options: RunOptions, report: SetupReport, *, install_only: bool) -> None:
    with ctx.ui.group("flagtree-cpu setup: preflight"):
        began = time.monotonic()
        _finish(report.record("preflight"), run_preflight(ctx, options, install_only=install_only),
                time.monotonic() - began, ctx)


def _install_only(ctx: StageContext, options: RunOptions, report: SetupReport, board: Board) -> bool:
    """An install-only board: the wheelhouse's build of the lock's pins installed (or found installed), sync,
    fetch, link and the python stage's build prerequisites skipped; True when it was (validation follows)."""
    from .stages.build import install_only

    began = time.monotonic()
    with ctx.ui.group("flagtree-cpu setup: install-only"):
        result = take(ctx, options, board, runtime=options.validating)
    if result is None:
        return False
    record = result.actions[0].data["wheelhouse"]
    for stage in STAGES[:-2]:
        _finish(report.record(stage.name), install_only.skipped_result(stage.name, record), 0.0, ctx)
    _finish(report.record(STAGES[-2].name), result, time.monotonic() - began, ctx)
    return True


def _set_up_base(ctx: StageContext, options: RunOptions, report: SetupReport) -> StageContext:
    """The base recipe's own setup (its state, its stamp; not its validation), then ``ctx`` constrained by
    what the base holds now."""

    from .stacking import restack

    assert ctx.base is not None
    name, began = ctx.base.recipe.name, time.monotonic()
    with ctx.ui.group(f"flagtree-cpu setup: base recipe {name}"):
        done = run_setup(ctx.base, replace(options, skip_validate=True, junit=None))
    record = report.record("base")
    record.seconds = time.monotonic() - began
    if done.error is not None:
        record.status, record.detail = "failed", f"{name}: {failed_stage(done)} failed"
        raise done.error
    changed = [r.stage for r in done.records if r.status in ("created", "updated")]
    record.status = "updated" if changed else "ok"
    record.detail = f"{name}: " + (f"{', '.join(changed)} changed" if changed else "all current")
    ctx.ui.info(f"base: {record.detail} ({record.seconds:.1f}s)")
    return restack(ctx)


def _run(stage: Stage, ctx: StageContext, options: RunOptions, report: SetupReport) -> StageResult:
    """The stage planned and run on its plan; what it hands setup's report (the validation) is kept, also
    when it fails."""
    try:
        result = run_stage(stage, ctx, options)
    except ValidationFailed as exc:
        _keep(report, exc.record or {})
        raise
    _keep(report, result.record)
    return result


def _keep(report: SetupReport, record: dict[str, Any]) -> None:
    if "validation" in record:
        report.validation = record["validation"]
    report.junit_written = report.junit_written or bool(record.get("junit_written"))


def _finish(record: StageRecord, result: StageResult, seconds: float, ctx: StageContext) -> None:
    record.status, record.detail, record.seconds, record.result = result.status, _summary(result), seconds, result
    for warning in result.warnings:
        ctx.ui.warn(warning)
    ctx.ui.info(f"{record.stage}: {record.status} ({seconds:.1f}s)")  # the detail is in the summary table
    if ctx.ui.verbose and not ctx.ui.json_mode:
        ctx.ui.table([Column(record.stage, PATH), Column("status", LABEL), "detail"],
                     [[a.subject, ctx.ui.styled(a.status), a.detail] for a in result.actions])


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


def _mark_unfinished(report: SetupReport, current: list[str], status: str, detail: str) -> None:
    """The stages that were running when setup stopped (both of a side-by-side pair: whichever had not
    finished) get ``status``."""
    for record in report.records:
        if record.status == "not run" and record.stage in current:
            record.status, record.detail = status, detail


def _skipped(stage: str, why: str) -> StageResult:
    return StageResult(stage, (Action(stage, "skipped", why),))


# --- stages side by side (sources ∥ artifacts) ---------------------------------------------------------


def _reads_sources(ctx: StageContext) -> bool:
    """Whether an artifact's url, path or digest is read from a source's file: then it is fetched after sync."""
    return any(a.read_names for a in ctx.recipe.artifacts.values())


def _read_split(ctx: StageContext) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The artifacts that read a source's file (fetched after sync), and the others (fetched beside it)."""
    reading = tuple(n for n, a in ctx.recipe.artifacts.items() if a.read_names)
    return reading, tuple(n for n in ctx.recipe.artifacts if n not in reading)


def _only(ctx: StageContext, names: tuple[str, ...]) -> StageContext:
    """``ctx`` whose recipe holds only the artifacts ``names`` (a stage run on part of them)."""

    return replace(ctx, recipe=replace(ctx.recipe, artifacts={n: ctx.recipe.artifacts[n] for n in names}))


def _then_reading(ctx: StageContext, options: RunOptions, report: SetupReport, stage: Stage,
                  reading: tuple[str, ...]) -> None:
    """The artifacts that read a source's file, fetched now that sync checked it out: their actions join those of
    the artifacts fetched beside the clones, in the stage's one row."""
    if stage.skip(options):
        return
    record = report.record(stage.name)
    before, seconds = record.result, record.seconds or 0.0
    began = time.monotonic()
    try:
        result = _run(stage, _only(ctx, reading), options, report)
    except FlagtreeCpuError as exc:
        record.status, record.detail = "failed", exc.message
        record.seconds = seconds + time.monotonic() - began
        raise
    if before is not None:
        result = StageResult(result.stage, before.actions + result.actions, before.warnings + result.warnings,
                             before.seconds + result.seconds)
    _finish(record, result, seconds + time.monotonic() - began, ctx)


def _waiting_downloads(ctx: StageContext, options: RunOptions) -> str:
    """What a run without network did not try yet: the downloads that wait for the sources, by host (not asked:
    their names come from the sources' files)."""
    from urllib.parse import urlsplit

    from .mirrors import candidate_urls

    hosts = dict.fromkeys(urlsplit(candidate_urls(a.url, options.mirrors)[0]).hostname or a.url
                          for a in ctx.recipe.artifacts.values())
    return (f"artifacts: not tried yet (they read their names from the sources' files after sync); they download "
            f"from {', '.join(h for h in hosts if h)}")


def _in_turn(stages: tuple[Stage, ...], *, apart: bool = False) -> list[list[Stage]]:
    """The stages in order, consecutive ``concurrent`` ones grouped to run side by side (``apart``: none)."""
    groups: list[list[Stage]] = []
    for stage in stages:
        if not apart and stage.concurrent and groups and groups[-1][-1].concurrent:
            groups[-1].append(stage)
        else:
            groups.append([stage])
    return groups


def _side_by_side(ctx: StageContext, options: RunOptions, report: SetupReport, group: list[Stage],
                  second_ctx: StageContext | None = None) -> None:
    """The first stage (the clones) in this thread while the second (the LLVM download) runs in another;
    both finish before either fails.

    A failure in one lets the other finish (a complete download is kept for the re-run); Ctrl-C
    cancels the worker at its next progress update and waits briefly for it to leave its partial
    file in order."""
    first, second = group
    fetched: dict[str, Any] = {}
    # Waited on instead of Thread.join: a join interrupted by Ctrl-C marks the thread as stopped in
    # CPython 3.11, so a second join returns at once while the worker is still cleaning up. A Latch, not an
    # Event: a Ctrl-C inside Event.wait can leave its lock held, and the next wait then blocks on itself.
    done = Latch()

    def worker() -> None:
        began = time.monotonic()
        try:
            fetched["result"] = _run(second, second_ctx or ctx, options, report)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which decides
            fetched["error"] = exc
        finally:
            fetched["seconds"] = time.monotonic() - began
            done.set()

    thread = threading.Thread(target=worker, name=f"flagtree-cpu {second.command}", daemon=True)
    first_error: FlagtreeCpuError | None = None
    with ctx.ui.concurrent():
        try:
            with interrupts_deferred():  # Thread.start waits on an Event: a Ctrl-C there strands the worker
                thread.start()
            began = time.monotonic()
            try:
                _finish(report.record(first.name), _run(first, ctx, options, report), time.monotonic() - began, ctx)
            except FlagtreeCpuError as exc:
                first_error = exc
                record = report.record(first.name)
                record.status, record.detail, record.seconds = "failed", exc.message, time.monotonic() - began
            done.wait()
        except KeyboardInterrupt:
            ctx.ui.cancel.set()
            done.wait(timeout=15)  # its next progress update stops it; let it leave its files in order
            raise
    error = fetched.get("error")
    record = report.record(second.name)
    if isinstance(error, KeyboardInterrupt):
        raise error
    if error is not None:
        record.status, record.seconds = "failed", fetched["seconds"]
        record.detail = error.message if isinstance(error, FlagtreeCpuError) else repr(error)
    else:
        _finish(record, fetched["result"], fetched["seconds"], ctx)
    if first_error is not None:
        if isinstance(error, FlagtreeCpuError):
            merged = one_error([(first.name, first_error), (second.name, error)])
            if merged is not None:  # no network: one error naming every host, not one per stage
                raise merged
            ctx.ui.error(error)  # the first error decides the exit code; the second is still shown
        raise first_error
    if error is not None:
        raise error
