"""Judging a check without running anything: a command's output against its ``expect`` (exit status,
patterns, pytest's counts), and a wheel's ELF objects against the target architecture.

Every problem names what was expected and what was seen.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...elfinfo import machine_of
from ...recipe import Expect, WheelCheck

# pytest's last line: "=== 7 passed, 1 skipped in 0.12s ===", or with -q "7 passed in 0.1s"
_SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+|no tests ran)(?:, \d+ \w+)*)\s+in\s+[\d.]+\s*s\b.*?=*\s*$")
_COUNT = re.compile(r"(\d+) (\w+)")
_SINGULAR = {"error": "errors", "warning": "warnings"}


def pytest_counts(output: str) -> dict[str, int] | None:
    """The counts of pytest's final summary line (the last one in the output); None when there is none."""
    for line in reversed(output.splitlines()):
        match = _SUMMARY.match(line.strip())
        if match:
            return {_SINGULAR.get(word, word): int(n) for n, word in _COUNT.findall(match.group("body"))}
    return None


@dataclass(frozen=True)
class Judgement:
    problems: tuple[str, ...]  # empty: it passed
    figure: str
    details: dict[str, Any] = field(default_factory=dict)


def judge_output(expect: Expect, returncode: int, output: str) -> Judgement:
    """A command's exit status and output against what the check expects."""
    problems: list[str] = []
    details: dict[str, Any] = {"exit": returncode}
    figure = f"exit {returncode}"
    if returncode != expect.exit:
        problems.append(f"exit status {returncode}, expected {expect.exit}")
    if expect.output is not None and not re.search(expect.output, output, re.MULTILINE):
        problems.append(f"no output matches /{expect.output}/ (last line: {_last_line(output)})")
    if expect.absent is not None:
        found = re.search(expect.absent, output, re.MULTILINE)
        if found:
            problems.append(f"the output has /{expect.absent}/, which must not occur: {_line_of(output, found)}")
    if expect.pytest is not None:
        counts = pytest_counts(output)
        if counts is None:
            problems.append("no pytest summary in the output (expected a line like \"7 passed in 0.12s\")")
        else:
            details["pytest"] = counts
            figure = ", ".join(f"{n} {word}" for word, n in counts.items()) or "no tests ran"
            wrong = {k: v for k, v in expect.pytest.items() if counts.get(k, 0) != v}
            if wrong:
                seen = ", ".join(f"{k}={counts.get(k, 0)}" for k in wrong)
                problems.append(f"pytest counts {', '.join(f'{k}={v}' for k, v in wrong.items())} expected, "
                                f"saw {seen}")
    return Judgement(tuple(problems), figure, details)


def _last_line(output: str) -> str:
    return next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")


def _line_of(output: str, match: re.Match[str]) -> str:
    start = output.rfind("\n", 0, match.start()) + 1
    end = output.find("\n", match.end())
    return output[start:end if end >= 0 else None].strip()


# --- wheels ------------------------------------------------------------------------------------------------


def platform_tags(wheel: Path) -> tuple[str, ...]:
    """``pkg-1.0-cp311-cp311-linux_riscv64.whl`` -> ``("linux_riscv64",)`` (compressed tag sets split)."""
    parts = wheel.name[:-len(".whl")].split("-") if wheel.name.endswith(".whl") else []
    return tuple(parts[-1].split(".")) if len(parts) >= 5 else ()


def elf_machines(wheel: Path) -> dict[str, str]:
    """Member name -> architecture, for every member of the wheel that is an ELF file (read from its header,
    without unpacking the wheel)."""
    machines: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or info.file_size < 20:
                continue
            with archive.open(info) as member:
                machine = machine_of(member.read(20))
            if machine is not None:
                machines[info.filename] = machine
    return machines


def judge_wheels(spec: WheelCheck, wheels: Sequence[Path]) -> Judgement:
    """Every wheel's ELF objects and platform tags against the check (the wheels exist)."""
    problems: list[str] = []
    objects: dict[str, dict[str, str]] = {}
    for wheel in wheels:
        try:
            machines = elf_machines(wheel)
        except (zipfile.BadZipFile, OSError) as exc:
            problems.append(f"{wheel}: not a readable wheel ({exc})")
            continue
        objects[wheel.name] = machines
        if spec.arch is not None:
            wrong = [f"{name} ({arch})" for name, arch in machines.items() if arch != spec.arch]
            if wrong:
                problems.append(f"{wheel.name}: {len(wrong)} object(s) not for {spec.arch}: {_few(wrong)}")
        forbidden = [f"{name} ({arch})" for name, arch in machines.items() if arch in spec.forbid]
        if forbidden:
            problems.append(f"{wheel.name}: {len(forbidden)} object(s) for {', '.join(spec.forbid)}, which "
                            f"must not be there: {_few(forbidden)}")
        tags = platform_tags(wheel)
        absent = [t for t in spec.tags if t not in tags]
        if absent:
            problems.append(f"{wheel.name} is tagged {'.'.join(tags) or 'with no platform'}, not "
                            f"{', '.join(absent)}")
    count = sum(len(m) for m in objects.values())
    arches = sorted({a for m in objects.values() for a in m.values()})
    figure = (f"{len(wheels)} wheel{'s' if len(wheels) != 1 else ''}, {count} ELF object{'s' if count != 1 else ''}"
              + (f" ({', '.join(arches)})" if arches else ""))
    return Judgement(tuple(problems), figure, {"wheels": {name: dict(m) for name, m in objects.items()}})


def _few(items: list[str], most: int = 5) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")
