"""What every stage returns, and what it is given.

A stage (``run_sync``, ``run_link``, ``run_fetch``, ...) inspects the world,
does only what is missing, and returns a ``StageResult`` listing each thing it looked
at and what it did. ``setup`` is these stages in order; the CLI renders the result as
a table or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .host import HostFacts
from .recipe import Recipe
from .ui import UI
from .workspace import Workspace

if TYPE_CHECKING:
    from .mirrors import MirrorRule

Status = Literal["ok", "created", "updated", "skipped"]
_RANK = {"ok": 0, "skipped": 0, "updated": 1, "created": 2}


@dataclass(frozen=True)
class Action:
    subject: str  # what was looked at: a source name, a link path, an artifact
    status: Status
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # machine-readable facts (commits, paths)

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "status": self.status, "detail": self.detail, **self.data}


@dataclass(frozen=True)
class StageResult:
    stage: str
    actions: tuple[Action, ...]
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def status(self) -> Status:
        if not self.actions:
            return "skipped"
        return max((a.status for a in self.actions), key=lambda s: _RANK[s])

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "status": self.status, "seconds": round(self.seconds, 3),
                "actions": [a.to_json() for a in self.actions], "warnings": list(self.warnings)}


@dataclass(frozen=True)
class StageContext:
    """The recipe (artifact variants selected, placeholders filled in) and where it applies."""

    recipe: Recipe
    workspace: Workspace
    host: HostFacts
    ui: UI
    # a stacked recipe's base (``extends``), opened for the same workspace: `setup` sets it up first
    base: StageContext | None = None


@dataclass(frozen=True)
class BuildOptions:
    """What the build stage is asked to do (`build`, and setup's build stage)."""

    python: Path
    offline: bool = False
    force: bool = False
    ignore_host: bool = False
    wheel_dir: Path | None = None
    verbose: bool = False
    jobs: int = 1  # what the environment got; for the out-of-memory advice
    compile_cache: str | None = None  # --compile-cache URL (compile_cache.py; never a stamp input)
    wheelhouse: str | None = None  # --wheelhouse: install a fitting published build instead (prebuilt.py)
    publish: str | None = None  # --publish FOLDER: publish the wheel built (prebuilt.py)


@dataclass(frozen=True)
class SetupOptions:
    python: Path
    offline: bool = False
    frozen: bool = False
    require_hashes: bool = False
    update: bool = False
    allow_dirty: bool = False
    skip_build: bool = False  # also skips the python env and validation: there is nothing new to validate
    skip_validate: bool = False
    ignore_host: bool = False
    install_system_packages: bool = False
    git_cache: Path | None = None
    cache_dir: Path | None = None
    mirrors: tuple[MirrorRule, ...] = ()
    jobs: int = 1  # MAX_JOBS the build gets (for the out-of-memory advice)
    model: Path | None = None
    junit: Path | None = None
    timeout: float | None = None
    verbose: bool = False
    compile_cache: str | None = None  # --compile-cache URL, for the build stage
    wheelhouse: str | None = None  # --wheelhouse DIR|URL, for the build stage (prebuilt.py)

    @property
    def validating(self) -> bool:
        return not (self.skip_build or self.skip_validate)
