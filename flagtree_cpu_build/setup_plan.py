"""`setup --dry-run`: what setup would do, item by item, and where it would stop — changing nothing.

The preflight's checks (the same ones setup runs first) and every stage's plan (``registry.plan_all``
through ``status.inspect_workspace``), read once. The dry run exits as the real run would: 7 when
the preflight would stop it, a stage's code for the first item that would (``would_stop``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .doctor import DoctorReport, Finding
    from .preflight import Stop
    from .stagekit.plan import PlanItem
    from .stagekit.stage import RunOptions, StageContext
    from .status import WorkspaceStatus


@dataclass(frozen=True)
class SetupPlan:
    status: WorkspaceStatus
    preflight: DoctorReport
    preflight_stops: tuple[Finding, ...]  # the failed checks that would stop setup (--ignore-host: git only)
    stop: Stop | None  # where setup would stop, and with which error; None: it would not
    install_only: str = ""  # what the wheelhouse answered for the lock's pins (install_only.py); "": none is configured

    @property
    def exit_code(self) -> int | None:
        """The code setup would stop with, None when it would go through."""
        return self.stop.exit_code if self.stop else None

    def to_json(self) -> dict[str, object]:
        from .pipeline import PLAN_SCHEMA

        return {**self.status.to_json(), "schema": PLAN_SCHEMA, "changes_nothing": True,
                "preflight": {"ok": not self.preflight_stops, "checks": [f.to_json() for f in self.preflight.findings]},
                "would_stop": self.stop.to_json() if self.stop else None, "install_only": self.install_only or None}


def plan_setup(ctx: StageContext, options: RunOptions) -> SetupPlan:
    from dataclasses import replace

    from .preflight import blocking, install_only_stages, run_preflight_checks, skipped_note, would_stop
    from .status import inspect_workspace

    board, item, said = _install_only(ctx, options)
    # an install-only board compiles nothing: its preflight judges what running needs, as setup's will
    preflight = run_preflight_checks(ctx, options, install_only_stages(options) if board else None)
    if board and skipped_note(options):
        said = "; ".join(filter(None, (said, skipped_note(options))))
    stops = blocking(preflight.findings, options)
    status = inspect_workspace(ctx, replace(options, ask_network=not options.offline))
    if item is not None:  # nothing is synced, fetched or built: the install, then the checks
        status = replace(status, items=(item, *(i for i in status.items if i.area == "validation")))
    return SetupPlan(status, preflight, tuple(stops), would_stop(stops, status.items), said)


def _install_only(ctx: StageContext, options: RunOptions) -> tuple[bool, PlanItem | None, str]:
    """The wheelhouse asked (read-only) for the lock's pins, as setup will: whether this is an install-only board,
    the plan item of the install, or None and why not ("" when no wheelhouse is configured)."""
    from .stagekit.plan import PlanItem
    from .stages.build import install_only

    if options.skip_build or ctx.base is not None:
        return False, None, ""
    lock = install_only.workspace_lock(ctx.workspace)
    if install_only.installed(ctx, options, lock) is not None:
        return True, None, ""  # status (inspect_workspace) shows the install-only board already
    offer, why = install_only.ask(ctx, options, lock)
    if offer is None:
        return False, None, "" if why == install_only.NOT_CONFIGURED else f"not install-only: {why}"
    return True, PlanItem("build", offer.wheel, "missing", "the wheelhouse has the build of the lock's pins",
                          offer.says(), "install-only", {"install_only": {"wheelhouse": offer.location.given,
                                                                          "file": offer.entry["file"]}},
                          "created"), offer.says()
