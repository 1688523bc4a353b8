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
    from .stagekit.stage import RunOptions, StageContext
    from .status import WorkspaceStatus


@dataclass(frozen=True)
class SetupPlan:
    status: WorkspaceStatus
    preflight: DoctorReport
    preflight_stops: tuple[Finding, ...]  # the failed checks that would stop setup (--ignore-host: git only)
    stop: Stop | None  # where setup would stop, and with which error; None: it would not

    @property
    def exit_code(self) -> int | None:
        """The code setup would stop with, None when it would go through."""
        return self.stop.exit_code if self.stop else None

    def to_json(self) -> dict[str, object]:
        from .pipeline import PLAN_SCHEMA

        return {**self.status.to_json(), "schema": PLAN_SCHEMA, "changes_nothing": True,
                "preflight": {"ok": not self.preflight_stops, "checks": [f.to_json() for f in self.preflight.findings]},
                "would_stop": self.stop.to_json() if self.stop else None}


def plan_setup(ctx: StageContext, options: RunOptions) -> SetupPlan:
    from dataclasses import replace

    from .preflight import blocking, run_preflight_checks, would_stop
    from .status import inspect_workspace

    preflight = run_preflight_checks(ctx, options)
    stops = blocking(preflight.findings, options)
    status = inspect_workspace(ctx, replace(options, ask_network=not options.offline))
    return SetupPlan(status, preflight, tuple(stops), would_stop(stops, status.items))
