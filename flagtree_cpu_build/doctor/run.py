"""Running the doctor checks: all of them concurrently, each crash contained, into one report.

Checks run concurrently (the network probes overlap everything else); a check that crashes
is reported as that check's failure, never as a crash of doctor. The JSON document is
versioned (``DOCTOR_SCHEMA``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..interrupts import block_interrupts
from . import kit
from .kit import AREAS, Check, DoctorContext, Outcome, Status, fail, skip

SCHEMA_ID = "flagtree-cpu/doctor/v1"


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
    from . import farm, interpreter, local, machine, network, workspace  # noqa: F401 - importing registers the checks

    checks = kit.CHECKS  # looked up now, not bound at import: the registry may be replaced (tests do)
    # Within an area, checks keep the order of their module in _MODULES, then their order in it: the order
    # the modules happened to be imported in (another command may import one first) must not reorder them.
    modules = [m.rsplit(".", 1)[-1] for m in _MODULES]

    def rank(c: Check) -> tuple[int, int, int]:
        module = c.run.__module__.rsplit(".", 1)[-1]
        return (AREAS.index(c.area), modules.index(module) if module in modules else len(modules), checks.index(c))

    return sorted(checks, key=rank)


_MODULES = ("interpreter", "local", "machine", "network", "workspace")


def run_doctor(ctx: DoctorContext, only: Sequence[str] = ()) -> DoctorReport:
    start = time.monotonic()
    checks = all_checks()
    if only:
        known = {c.id for c in checks}
        unknown = [i for i in only if i not in known]
        if unknown:
            from ..errors import UsageError
            from ..recipe.schema import suggest

            raise UsageError(f"no doctor check named {unknown[0]!r}{suggest(unknown[0], known)}",
                             fix="`flagtree-cpu doctor --list` lists them")
        checks = [c for c in checks if c.id in only]
    with ThreadPoolExecutor(max_workers=12, initializer=block_interrupts) as pool:
        outcomes = list(pool.map(lambda c: _run_one(c, ctx), checks))
    findings = tuple(Finding(c.id, c.area, c.title, o.status, o.detail, o.fix) for c, o in zip(checks, outcomes,
                                                                                                strict=True))
    return DoctorReport(findings, time.monotonic() - start, ctx.recipe.name, str(ctx.sysroot))


def _run_one(check_: Check, ctx: DoctorContext) -> Outcome:
    if check_.live_only and not ctx.live:
        return skip("not part of a --sysroot snapshot (checked on the machine itself)")
    from ..errors import FlagtreeCpuError

    try:
        return check_.run(ctx)
    except FlagtreeCpuError as exc:  # a known problem (a damaged lock file, ...): its message and fix
        return fail(exc.message, exc.fix)
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
