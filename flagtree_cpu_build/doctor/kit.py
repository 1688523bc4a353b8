"""The doctor check kit: what a check receives, returns and registers with.

A check is a function ``DoctorContext -> Outcome`` registered with ``@check(id, area, title)``.
The check modules (``machine``, ``local``, ``network``, ``workspace``) import only this kit
(and ``facts``) from the package; ``run`` imports them to register their checks, so the kit
sits below its checks and nothing here imports a check module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..cpuinfo import CpuFacts
from ..host import HostFacts
from ..recipe import Recipe
from ..stagekit.stage import RunOptions
from ..workspace import Workspace

Status = Literal["ok", "warn", "fail", "skip"]
AREAS = ("host", "cpu", "toolchain", "system", "python", "runtime", "resources", "network", "workspace")
BUILD = ("build",)  # a check's ``blocks`` for what only the build (and so what runs its products) needs
# the pseudo-stage of an install-only board (``preflight.install_only_stages``): it installs a published build and
# runs it, compiling nothing; a check blocking INSTALL judges what running the products needs (the CPU, the
# interpreter, devices), not what building them needs (a compiler, cmake, memory for the build, git)
INSTALL = "install"
RUN = (*BUILD, INSTALL)


@dataclass(frozen=True)
class Outcome:
    status: Status
    detail: str
    fix: str | None = None


def with_article(word: str) -> str:
    """``word`` with its indefinite article, as the arch names are said: an x86_64, an aarch64, a riscv64."""
    return f"{'an' if word[:1] in ('a', 'e', 'i', 'o', 'x') else 'a'} {word}"


def ok(detail: str) -> Outcome:
    return Outcome("ok", detail)


def warn(detail: str, fix: str) -> Outcome:
    return Outcome("warn", detail, fix)


def fail(detail: str, fix: str) -> Outcome:
    return Outcome("fail", detail, fix)


def skip(detail: str) -> Outcome:
    return Outcome("skip", detail)


# a package manager's command at the start of a fix or of one of its commands (after &&, ; or ||)
_PACKAGE_MANAGER = re.compile(r"(^|&&\s*|;\s*|\|\|\s*)((?:apt-get|apt|dnf|yum|zypper|apk|pacman) )")


@dataclass
class DoctorContext:
    recipe: Recipe  # variants selected for the (possibly snapshot) host, placeholders filled in
    workspace: Workspace
    host: HostFacts
    cpu: CpuFacts
    sysroot: Path
    options: RunOptions  # what the command was given: the interpreter, --offline, the mirrors downloads would try
    environ: Mapping[str, str]
    network_timeout_s: float = 1.5
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

    def root_fix(self, text: str) -> str:
        """A recipe's fix text, written as root runs it, for this user: each package-manager command in it
        (at the start, or after ``&&``, ``;`` or ``||``) goes through sudo unless doctor runs as root."""
        if self.euid == 0 or not text:
            return text
        return _PACKAGE_MANAGER.sub(lambda m: f"{m.group(1)}sudo {m.group(2)}", text)


@dataclass(frozen=True)
class Check:
    id: str
    area: str
    title: str
    run: Callable[[DoctorContext], Outcome]
    live_only: bool = False  # skipped for a --sysroot snapshot
    # the stages (registry names) a failure of this check would make fail: setup's and build's preflights run
    # the checks that block a stage about to run, so doctor's rule list is theirs too; () never blocks a stage
    blocks: tuple[str, ...] = ()


CHECKS: list[Check] = []


def check(id: str, area: str, title: str, *, live_only: bool = False, blocks: tuple[str, ...] = ()) -> Callable:
    """Register a check: ``@check("cpu.features", "cpu", "CPU features the build needs", blocks=("build",))``."""
    assert area in AREAS, area

    def register(fn: Callable[[DoctorContext], Outcome]) -> Callable[[DoctorContext], Outcome]:
        CHECKS.append(Check(id, area, title, fn, live_only, blocks))
        return fn

    return register
