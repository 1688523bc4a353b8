"""Renderers: a command's result object as tables and lines for people (stderr; a listing's table, the product of
`recipe list`, `status`, `doctor`, `lock` and `validate --list`, on stdout), or as the ``result`` of the --json
envelope. They decide nothing about exit codes and call no core function."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from ..table_layout import LABEL, PATH, Column
from ..ui import UI

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..clean import CleanReport
    from ..doctor import Check, DoctorReport
    from ..preflight import Stop
    from ..setup_plan import SetupPlan
    from ..setup_report import SetupReport
    from ..snapshot import SnapshotWritten
    from ..stagekit.plan import PlanItem
    from ..stagekit.stage import StageResult
    from ..stages.links.link import LinkPlan
    from ..stages.validate.validate import ValidationReport
    from ..status import WorkspaceStatus


def count(n: int, noun: str) -> str:
    """``1 artifact``, ``2 artifacts``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def stage_result(ui: UI, result: StageResult, subject: str, *, listing: bool = False) -> None:
    """A stage's actions as a table, its warnings, and a one-line summary (sync, fetch, build, lock, python).
    ``listing``: the table is the command's product (lock's sources and their commits), on stdout."""
    if ui.json_mode:
        ui.emit_json(result.to_json())
        return
    ui.table([Column(subject, PATH), Column("status", LABEL), "detail"],
             [[a.subject, ui.styled(a.status), a.detail] for a in result.actions], listing=listing)
    for warning in result.warnings:
        ui.warn(warning)
    ui.info(f"{result.stage}: {result.status} in {result.seconds:.2f}s")


def setup(ui: UI, report: SetupReport) -> None:
    if ui.json_mode:
        ui.emit_json(report.to_json())
        return
    rows = [[r.stage, ui.styled(r.status), r.detail, f"{r.seconds:.1f}s" if r.seconds else ""] for r in report.records]
    ui.table([Column("stage", LABEL), Column("status", LABEL), "detail", Column("time", LABEL)], rows,
             title=f"setup of {report.recipe} in {report.workspace}")
    ui.info(f"logs: {report.workspace / 'logs'} (this run's report: .flagtree-cpu/last-setup.json)")
    if report.error is None:
        ui.success(f"setup finished in {report.seconds:.1f}s")
        ui.info("next:")  # each with this run's -w, --recipe, --variant, --lock-file: they work from any folder
        if report.record("build").status not in ("skipped", "not run"):
            ui.info(f"  source {shlex.quote(str(report.python.parent / 'activate'))}")
        ui.info(f'  eval "$({ui.in_context("flagtree-cpu env")})"   # the run-time variables of the recipe')
        ui.info(f"  {ui.in_context('flagtree-cpu status')}")


def setup_plan(ui: UI, plan: SetupPlan) -> None:
    """`setup --dry-run`: each item's action and why, the download size, where setup would stop."""
    from rich.text import Text

    from ..progress import human_bytes

    if ui.json_mode:
        ui.emit_json(plan.to_json())
        return
    status, preflight, stops = plan.status, plan.preflight, plan.preflight_stops
    failing = [f for f in preflight.findings if f.status == "fail"]
    rows: list[list[str | Text]] = [["preflight", f"stop: {f.id}", f.detail] for f in stops] or \
        [["preflight", "", f"{preflight.summary()['ok']} of {len(preflight.findings)} checks ok"
          + (f", {len(failing)} failed (ignored: --ignore-host)" if failing else "")]]
    for item in status.items:
        doing = item.action or Text.assemble(f"{item.subject}: ", ui.styled(item.state))
        rows.append([item.area, doing, f"{item.reason}: {item.detail}" if item.reason else item.detail])
    ui.table([Column("stage", LABEL), "would do", "why"], rows,
             title=f"setup plan for {status.recipe} in {status.workspace}")
    size = status.download_bytes
    if any(i.action.startswith(("download", "resume")) for i in status.items):
        ui.info(f"download: {human_bytes(size) if size is not None else 'size unknown'}")
    if plan.install_only:
        ui.info(plan.install_only)
    if plan.stop:
        ui.warn(f"setup would stop at {plan.stop.stage} (exit code {plan.stop.exit_code}): {plan.stop.reason}")
    ui.info("nothing to do: everything is current" if status.current and not stops
            else "nothing was changed (--dry-run)")


def stage_plan(ui: UI, command: str, items: Sequence[PlanItem], stop: Stop | None) -> None:
    """`sync --dry-run`, `fetch --dry-run`: each item's action and why, where the run would stop."""
    if ui.json_mode:
        ui.emit_json({"command": command, "changes_nothing": True, "items": [i.to_json() for i in items],
                      "would_stop": stop.to_json() if stop else None})
        return
    rows = [[i.subject, i.action or ui.styled(i.state), f"{i.reason}: {i.detail}" if i.reason else i.detail]
            for i in items]
    ui.table([Column("item", PATH), "would do", "why"], rows, title=f"{command} plan")
    if stop is not None:
        ui.warn(f"{command} would stop (exit code {stop.exit_code}): {stop.reason}")
    current = all(i.current for i in items)
    ui.info("nothing to do: everything is current" if current else "nothing was changed (--dry-run)")


def status(ui: UI, found: WorkspaceStatus) -> None:
    if ui.json_mode:
        ui.emit_json(found.to_json())
        return
    ui.table([Column("area", LABEL), Column("item", PATH), Column("state", LABEL), "detail"],
             [[i.area, i.subject, ui.styled(i.state), i.detail] for i in found.items],
             title=f"{found.recipe} in {found.workspace}", listing=True)
    behind = [i for i in found.items if not i.current]
    if not behind:
        ui.success("everything is current")
    else:
        ui.info(f"{len(behind)} of {len(found.items)} items are not current: `flagtree-cpu setup` brings them "
                "up to date (`setup --dry-run` shows how)")


def links(ui: UI, plan: LinkPlan, result: StageResult, *, planning: bool) -> None:
    """The links: their plan (--dry-run, --check) or what was done (created, updated)."""
    states = [p.state for p in plan.links] if planning else [a.status for a in result.actions]
    if ui.json_mode:
        ui.emit_json({"root": str(plan.root), "all_ok": plan.all_ok,
                      "links": [{**p.to_json(), **({} if planning else {"done": state})}
                                for p, state in zip(plan.links, states, strict=True)],
                      "seconds": round(result.seconds, 3)})
        return
    ui.table([Column("link", PATH), Column("state", LABEL), "detail"],
             [[p.path, ui.styled(state), p.detail or ("" if p.state == "ok" else f"-> {p.target}")]
              for p, state in zip(plan.links, states, strict=True)])
    counts = {state: states.count(state) for state in dict.fromkeys(states)}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    ui.info(f"{len(plan.links)} links in {plan.root}: {summary}"
            + (" (nothing was changed)" if planning and not plan.all_ok else ""))


def validation(ui: UI, report: ValidationReport, junit: Path | None) -> None:
    if ui.json_mode:
        ui.emit_json(report.to_json())
        return
    symbols = {"pass": "pass", "fail": "FAIL", "skip": "skip"}
    rows = []
    for r in report.results:
        shown = symbols[r.status] if r.required or r.status != "fail" else "fail (optional)"
        rows.append([r.kernel, ui.styled(shown), r.figure or r.message, f"{r.seconds:.1f}s"])
    ui.table([Column("check", PATH), Column("status", LABEL), "result", Column("time", LABEL)], rows)
    for warning in report.warnings:
        ui.warn(warning)
    problems = [r for r in report.results if r.status == "fail"]
    for number, r in enumerate(problems, 1):
        ui.info(f"{number}. {r.kernel}: {r.message}" + (f"\n   log: {r.log}" if r.log else ""))
        if r.fix:
            ui.info(f"   fix: {ui.in_context(r.fix)}")
    counts = report.counts()
    ui.info(f"validate: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped in "
            f"{report.seconds:.1f}s with {report.python}" + (f"; JUnit report: {junit}" if junit else ""))


def check_listing(ui: UI, listing: dict[str, object], python: Path) -> None:
    """``validate --list``: the recipe's checks, then the preset library."""
    if ui.json_mode:
        ui.emit_json(listing)
        return
    checks: list[dict[str, object]] = listing["checks"]  # type: ignore[assignment]
    presets: list[dict[str, object]] = listing["presets"]  # type: ignore[assignment]
    ui.table([Column("check", PATH), Column("kind", LABEL), Column("preset", PATH), Column("required", LABEL),
              "proves"],
             [[c["name"], c["kind"], c["preset"] or "", "required" if c["required"] else "optional", c["proves"]]
              for c in checks], listing=True)
    ui.table([Column("preset", PATH), "proves"], [[p["preset"], p["proves"]] for p in presets], listing=True)
    ui.info(f"preset scripts: {listing['folder']} (run one by hand: {python} <script> --expect '{{...}}')")


def doctor(ui: UI, report: DoctorReport, areas: Sequence[str], board: str | None) -> None:
    from dataclasses import replace

    # each fix as the user copies it: with this run's -w, --recipe, --variant, --lock-file (--json's too)
    report = replace(report, findings=tuple(replace(f, fix=ui.in_context(f.fix)) for f in report.findings))
    if ui.json_mode:
        ui.emit_json(report.to_json())
        return
    ui.findings(report.findings, areas)
    counts = report.summary()
    ui.info(f"doctor: {counts['ok']} ok, {count(counts['warn'], 'warning')}, {counts['fail']} failed, "
            f"{counts['skip']} skipped in {report.seconds:.2f}s" + (f" (sysroot {board})" if board else ""))


def check_list(ui: UI, checks: Sequence[Check]) -> None:
    if ui.json_mode:
        ui.emit_json({"checks": [{"id": c.id, "area": c.area, "title": c.title} for c in checks]})
    else:
        ui.table([Column("check", LABEL), Column("area", LABEL), "what it looks at"],
                 [[c.id, c.area, c.title] for c in checks], listing=True)


def snapshot(ui: UI, written: SnapshotWritten) -> None:
    if ui.json_mode:
        ui.emit_json(written.to_json())
        return
    ui.success(f"snapshot: {written.path} ({len(written.files)} files, {written.size / 1024:.0f} KiB); "
               f"check this machine anywhere with `flagtree-cpu doctor --sysroot {written.path.name}`")
    if written.absent:
        ui.info(f"not on this machine (doctor reads them when present): {', '.join(written.absent)}")


def clean(ui: UI, report: CleanReport, *, asked_for_more: bool) -> None:
    from ..progress import human_bytes

    if ui.json_mode:
        ui.emit_json(report.to_json())
        return
    verb = "would remove" if report.dry_run else "removed"
    if report.items:
        ui.table([Column("", LABEL), Column("what", LABEL), Column("path", PATH), Column("size", LABEL), "why"],
                 [[ui.styled(verb if i.removed else "kept"), i.kind, str(i.path), human_bytes(i.size) if i.size else "",
                   i.reason] for i in report.items])
    removed = [i for i in report.items if i.removed]
    summary = f"{verb} {count(len(removed), 'item')}, {human_bytes(report.freed)}"
    if not removed:
        summary = "nothing to clean" + ("" if asked_for_more else " (see --downloads, --trees, --all)")
    ui.info(summary + (" (--dry-run: nothing was removed)" if report.dry_run and removed else ""))
