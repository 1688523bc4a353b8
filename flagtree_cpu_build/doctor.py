"""doctor: named, read-only checks of host, toolchain and workspace, each with a fix.

Every check has a stable id (``cpu.features``), an area, and returns a status (ok, warn,
fail, skip), a one-line detail and — for warn and fail — a copy-pasteable fix. Checks run
concurrently (the network probes overlap everything else); a check that crashes is
reported as that check's failure, never as a crash of doctor. Nothing is written,
downloaded or built. The JSON document is versioned (``DOCTOR_SCHEMA``).

The checks themselves live in ``doctor_machine`` (what a board is: host, CPU, system
packages, memory — readable from a ``--sysroot`` snapshot), ``doctor_local`` (this machine's
tools, Python, C/C++ runtime, disk), ``doctor_network`` and ``doctor_workspace``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import __version__
from .cpuinfo import CpuFacts
from .host import HostFacts
from .mirrors import MirrorRule
from .recipe import Recipe
from .workspace import Workspace

Status = Literal["ok", "warn", "fail", "skip"]
AREAS = ("host", "cpu", "toolchain", "system", "python", "runtime", "resources", "network", "workspace")
SCHEMA_ID = "flagtree-cpu/doctor/v1"


@dataclass(frozen=True)
class Outcome:
    status: Status
    detail: str
    fix: str | None = None


def ok(detail: str) -> Outcome:
    return Outcome("ok", detail)


def warn(detail: str, fix: str) -> Outcome:
    return Outcome("warn", detail, fix)


def fail(detail: str, fix: str) -> Outcome:
    return Outcome("fail", detail, fix)


def skip(detail: str) -> Outcome:
    return Outcome("skip", detail)


@dataclass
class DoctorContext:
    recipe: Recipe  # variants selected for the (possibly snapshot) host, placeholders filled in
    workspace: Workspace
    host: HostFacts
    cpu: CpuFacts
    sysroot: Path
    python: Path
    environ: Mapping[str, str]
    offline: bool = False
    network_timeout_s: float = 1.5
    mirrors: tuple[MirrorRule, ...] = ()  # --mirror and FLAGTREE_CPU_MIRRORS, parsed: what downloads would try
    # whose rights a fix runs with (None: unknown, as for a snapshot made by an older tool): a field so
    # tests see both forms of a privileged fix without being root or not
    euid: int | None = field(default_factory=os.geteuid)
    cache: dict[str, Any] = field(default_factory=dict)  # shared answers (one Python query for many checks)

    @property
    def live(self) -> bool:
        """False for a --sysroot snapshot: this machine's tools, Python and workspace are not the board's."""
        return self.sysroot == Path("/")

    def as_root(self, command: str) -> str:
        """``command`` as a fix runs it with root's rights: through sudo, except for root itself
        (a container's root usually has no sudo at all)."""
        return command if self.euid == 0 else f"sudo {command}"


@dataclass(frozen=True)
class Check:
    id: str
    area: str
    title: str
    run: Callable[[DoctorContext], Outcome]
    live_only: bool = False  # skipped for a --sysroot snapshot


CHECKS: list[Check] = []


def check(id: str, area: str, title: str, *, live_only: bool = False) -> Callable:
    """Register a check: ``@check("cpu.features", "cpu", "CPU features the build needs")``."""
    assert area in AREAS, area

    def register(fn: Callable[[DoctorContext], Outcome]) -> Callable[[DoctorContext], Outcome]:
        CHECKS.append(Check(id, area, title, fn, live_only))
        return fn

    return register


@dataclass(frozen=True)
class Finding:
    id: str
    area: str
    title: str
    status: Status
    detail: str
    fix: str | None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "area": self.area, "title": self.title, "status": self.status,
                "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class DoctorReport:
    findings: tuple[Finding, ...]
    seconds: float
    recipe: str
    sysroot: str

    @property
    def failed(self) -> bool:
        return any(f.status == "fail" for f in self.findings)

    def summary(self) -> dict[str, int]:
        return {s: sum(f.status == s for f in self.findings) for s in ("ok", "warn", "fail", "skip")}

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA_ID, "tool_version": __version__, "recipe": self.recipe, "sysroot": self.sysroot,
                "seconds": round(self.seconds, 3), "ok": not self.failed, "summary": self.summary(),
                "checks": [f.to_json() for f in self.findings]}


def all_checks() -> list[Check]:
    from . import (  # noqa: F401 - importing registers the checks
        doctor_local,
        doctor_machine,
        doctor_network,
        doctor_workspace,
    )

    return sorted(CHECKS, key=lambda c: (AREAS.index(c.area), CHECKS.index(c)))


def run_doctor(ctx: DoctorContext, only: Sequence[str] = ()) -> DoctorReport:
    start = time.monotonic()
    checks = all_checks()
    if only:
        known = {c.id for c in checks}
        unknown = [i for i in only if i not in known]
        if unknown:
            from .errors import UsageError
            from .recipe_schema import suggest

            raise UsageError(f"no doctor check named {unknown[0]!r}{suggest(unknown[0], known)}",
                             fix="`flagtree-cpu doctor --list` lists them")
        checks = [c for c in checks if c.id in only]
    with ThreadPoolExecutor(max_workers=12) as pool:
        outcomes = list(pool.map(lambda c: _run_one(c, ctx), checks))
    findings = tuple(Finding(c.id, c.area, c.title, o.status, o.detail, o.fix) for c, o in zip(checks, outcomes,
                                                                                                strict=True))
    return DoctorReport(findings, time.monotonic() - start, ctx.recipe.name, str(ctx.sysroot))


def _run_one(check_: Check, ctx: DoctorContext) -> Outcome:
    if check_.live_only and not ctx.live:
        return skip("not part of a --sysroot snapshot (checked on the machine itself)")
    try:
        return check_.run(ctx)
    except Exception as exc:  # noqa: BLE001 - one broken check must not take doctor down
        return fail(f"the check itself failed: {type(exc).__name__}: {exc}",
                    "this is a bug in flagtree-cpu's doctor: please report it with `flagtree-cpu doctor --json`")


DOCTOR_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://flagtree-cpu.invalid/schema/doctor-v1.json",
    "title": "flagtree-cpu doctor --json (version 1)",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "tool_version", "recipe", "sysroot", "seconds", "ok", "summary", "checks"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "tool_version": {"type": "string"},
        "recipe": {"type": "string", "description": "the recipe the checks were made against"},
        "sysroot": {"type": "string", "description": "where /proc, /sys and /etc were read from"},
        "seconds": {"type": "number", "minimum": 0},
        "ok": {"type": "boolean", "description": "false when any check failed (exit code 7)"},
        "summary": {
            "type": "object", "additionalProperties": False, "required": ["ok", "warn", "fail", "skip"],
            "properties": {s: {"type": "integer", "minimum": 0} for s in ("ok", "warn", "fail", "skip")},
        },
        "checks": {
            "type": "array",
            "items": {
                "type": "object", "additionalProperties": False,
                "required": ["id", "area", "title", "status", "detail", "fix"],
                "properties": {
                    "id": {"type": "string", "pattern": r"^[a-z]+\.[a-z0-9-]+$", "description": "stable check id"},
                    "area": {"enum": list(AREAS)},
                    "title": {"type": "string"},
                    "status": {"enum": ["ok", "warn", "fail", "skip"]},
                    "detail": {"type": "string"},
                    "fix": {"type": ["string", "null"], "description": "a copy-pasteable fix for warn and fail"},
                },
            },
        },
    },
}
