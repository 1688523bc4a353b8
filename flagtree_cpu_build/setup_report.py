"""The report of one `setup` run: each stage's record, the pins the workspace holds, the error; where
it is kept (``logs/setup-<time>.json`` and ``.flagtree-cpu/last-setup.json``), and the JUnit file CI
uploads when the checks did not run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .errors import FlagtreeCpuError
from .lockfile import read_lock
from .logfiles import new_log_path
from .stagekit.stage import StageContext, StageResult
from .state import make_state_dir, write_state

SETUP_SCHEMA = "flagtree-cpu/setup/v1"


@dataclass
class StageRecord:
    stage: str
    status: str  # ok, created, updated, skipped, failed, interrupted, not run
    detail: str = ""
    seconds: float = 0.0
    result: StageResult | None = None

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "status": self.status, "detail": self.detail, "seconds": round(self.seconds, 3),
                "actions": [a.to_json() for a in self.result.actions] if self.result else [],
                "warnings": list(self.result.warnings) if self.result else []}


@dataclass
class SetupReport:
    recipe: str
    workspace: Path
    python: Path
    started: str
    records: list[StageRecord] = field(default_factory=list)
    seconds: float = 0.0
    error: FlagtreeCpuError | None = None
    validation: dict[str, Any] | None = None
    commits: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    junit_written: bool = False
    variant: str | None = None  # the recipe's variant (--variant, else its default)
    bundle: dict[str, Any] | None = None  # setup --bundle: what was imported, and its authenticity

    @property
    def ok(self) -> bool:
        return self.error is None

    def record(self, stage: str) -> StageRecord:
        return next(r for r in self.records if r.stage == stage)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SETUP_SCHEMA, "tool_version": __version__, "ok": self.ok, "recipe": self.recipe,
                "variant": self.variant,
                "workspace": str(self.workspace), "python": str(self.python), "started": self.started,
                "seconds": round(self.seconds, 3), "stages": [r.to_json() for r in self.records],
                "commits": self.commits, "artifacts": self.artifacts, "validation": self.validation,
                "logs": str(self.workspace / "logs"), "error": self.error.to_json() if self.error else None,
                "bundle": self.bundle}


def failed_stage(report: SetupReport) -> str:
    return next((r.stage for r in report.records if r.status in ("failed", "interrupted")), "setup")


def junit_without_kernels(ctx: StageContext, path: Path, report: SetupReport) -> None:
    """CI uploads the --junit file whatever happened: when the checks did not run, the file says why
    (a skipped case for --skip-build/--skip-validate, an error case when setup stopped before them)."""
    from .stages.validate.junit import write_junit_verdict

    record = report.record("validate")
    if report.error is None:
        write_junit_verdict(path, ctx.recipe.name, "skipped", f"validation did not run: {record.detail}")
    else:
        error = report.error
        text = "\n".join([*error.details, f"fix: {error.fix}" if error.fix else ""])
        write_junit_verdict(path, ctx.recipe.name, "error",
                            f"setup stopped at {failed_stage(report)} before validation: {error.message}", text)


def collect_pins(ctx: StageContext, report: SetupReport) -> None:
    """The commits and artifact digests the workspace holds now, from the lock file."""
    try:
        lock = read_lock(ctx.workspace.lock_file) if ctx.workspace.lock_file.is_file() else None
    except FlagtreeCpuError:
        return
    if lock is None:
        return
    report.commits = {name: entry.commit for name, entry in lock.sources.items()}
    report.artifacts = {name: {"sha256": entry.sha256, "url": entry.url, "size": entry.size}
                        for name, entry in lock.artifacts.items()}


def is_fresh(ws: Any) -> bool:
    """Nothing in the workspace yet but the lock this run holds (and the record of its recipe)."""
    from .workspace_record import RECORD_NAME

    held = {p.name for p in ws.state_dir.iterdir()} if ws.state_dir.is_dir() else set()
    return held <= {ws.busy_lock.name, RECORD_NAME} and not ws.logs_dir.exists()


def save(ctx: StageContext, report: SetupReport) -> None:
    """The report next to the logs (one per run) and as .flagtree-cpu/last-setup.json."""
    if not ctx.workspace.state_dir.is_dir():
        return
    document = report.to_json()
    make_state_dir(ctx.workspace.logs_dir)
    write_state(new_log_path(ctx.workspace.logs_dir, "setup", ".json"), document)
    write_state(ctx.workspace.recipe_state / "last-setup.json", document)
