"""doctor: named, read-only checks of host, toolchain and workspace, each with a fix.

What a check asks for is the recipe's (its platform, toolchains, build hazards, run-time environment,
resources): no project's rules live in the checks themselves.

Every check has a stable id (``cpu.features``), an area, and returns a status (ok, warn,
fail, skip), a one-line detail and — for warn and fail — a copy-pasteable fix. Nothing is
written, downloaded or built.

    kit        what a check gets and returns, and the @check registry (below every check)
    facts      answers several checks share (the target Python's facts, disk paths)
    machine    what a board is: host, CPU, system packages, memory (readable from a --sysroot snapshot)
    local      this machine's tools, C/C++ runtime, disk
    interpreter the target Python: version, prerequisites, preinstalled vendor packages
    network    can clones and downloads reach what they would use
    workspace  sources, links, the published downloads, the last build, the build and run-time environment
    run        imports the check modules (registering them), runs them, the report and its JSON Schema
"""

from __future__ import annotations

from .kit import AREAS, Check, DoctorContext, Outcome, Status
from .run import DOCTOR_SCHEMA, SCHEMA_ID, DoctorReport, Finding, all_checks, run_doctor

__all__ = [
    "AREAS",
    "DOCTOR_SCHEMA",
    "SCHEMA_ID",
    "Check",
    "DoctorContext",
    "DoctorReport",
    "Finding",
    "Outcome",
    "Status",
    "all_checks",
    "run_doctor",
]
