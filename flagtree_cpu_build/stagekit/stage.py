"""What every stage returns, and what it is given.

A stage (``run_sync``, ``run_link``, ``run_fetch``, ...) inspects the world,
does only what is missing, and returns a ``StageResult`` listing each thing it looked
at and what it did. ``setup`` is these stages in order; the CLI renders the result as
a table or JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # types only: the stage list is read by `--help`, which must not load the recipe model
    from ..errors import FlagtreeCpuError
    from ..host import HostFacts
    from ..lockfile import Lock
    from ..mirrors import MirrorRule
    from ..recipe import Recipe
    from ..ui import UI
    from ..workspace import Workspace
    from .plan import PlanItem

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
    record: dict[str, Any] = field(default_factory=dict)  # what setup's report keeps of it (the validation)

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
    # the same context opened again, reading the workspace anew: `setup` asks it once the sources are synced, when
    # an artifact reads its url or path from a source's file (``recipe/reads``); the build asks it with a compile
    # farm's slots (``reopen(farm_slots=N)``: each build's {jobs} grows by N)
    reopen: Callable[..., StageContext] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SyncExtras:
    """`sync`'s own flags."""

    source_paths: Mapping[str, Path] = field(default_factory=dict)  # --source-path: name -> an existing clone


@dataclass(frozen=True)
class FetchExtras:
    """`fetch`'s own flags."""

    from_files: Mapping[str, Path] = field(default_factory=dict)  # --from: artifact name -> a file downloaded by hand
    replace: tuple[str, ...] = ()  # --replace: artifacts whose tree another recipe or workspace published


@dataclass(frozen=True)
class BuildExtras:
    """`build`'s own flags."""

    wheel_dir: Path | None = None  # --wheel DIR: a wheel instead of the editable install
    publish: str | None = None  # --publish FOLDER: publish the wheel built (prebuilt.py)
    only: str | None = None  # --only NAME: that build and the builds it needs (recipe/builds.py)


@dataclass(frozen=True)
class ValidateExtras:
    """`validate`'s own flags."""

    checks: tuple[str, ...] = ()  # --check/--kernel: names; empty: every check of the recipe
    install_prereqs: bool = False  # --install-prereqs: the run-time prerequisites first


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Everything a user can set for any stage, passed whole: each stage (and its plan) reads what it needs.

    One object from the command line to where a flag takes effect, as cibuildwheel's platforms read its
    ``BuildOptions``: a new option shared by stages is one field here, its CLI alias, and the stage that reads
    it. Flags only one command has sit in that command's extras (``sync``, ``fetch``, ``build``, ``validate``)."""

    python: Path  # the target interpreter (the workspace venv unless --python)
    offline: bool = False  # no network: what is missing is listed, never fetched
    frozen: bool = False  # the lock must already say everything; never write it
    require_hashes: bool = False  # every download needs a known sha256
    update: bool = False  # re-resolve unpinned refs instead of reading the lock
    allow_dirty: bool = False  # move checkouts with changes to tracked files
    force: bool = False  # sync: move checkouts git would refuse to; build: build although up to date
    ignore_host: bool = False  # go on on a machine preflight finds unsuitable
    install_system_packages: bool = False  # setup runs apt-get for the recipe's missing packages
    skip_build: bool = False  # setup stops after sources, downloads and links (no venv, build or validation)
    skip_validate: bool = False  # setup does not run the validation kernels
    runtime_flag: str = "--skip-validate"  # the flag that turned the run-time prerequisites off, for the report
    verbose: bool = False
    jobs: int = 1  # MAX_JOBS the build gets (for the out-of-memory advice)
    git_cache: Path | None = None
    cache_dir: Path | None = None  # the per-user cache root; downloads live in <root>/downloads
    mirrors: tuple[MirrorRule, ...] = ()  # asked before the original URL
    compile_cache: str | None = None  # --compile-cache URL (compile_cache.py; never a stamp input)
    compile_farm: str | None = None  # --compile-farm HOSTS (compile_farm.py; never a stamp input)
    installer: str | None = None  # --installer auto|uv|pip (installer.py); None: $FLAGTREE_CPU_INSTALLER, recipe, auto
    wheelhouse: str | None = None  # --wheelhouse DIR|URL: install a fitting published build instead (prebuilt.py)
    model: Path | None = None  # the validation's model kernel
    junit: Path | None = None  # write the validation as JUnit XML
    timeout: float | None = None  # per validation kernel
    ask_network: bool = False  # a plan (dry run online) may resolve refs and ask servers for download sizes
    # the plan is the one the run that follows acts on (``registry.run_stage``), not one for status or a dry run:
    # the sources plan resolves unpinned refs now (unless --offline or --frozen) and skips counting local
    # changes where they decide nothing
    for_run: bool = False
    sync: SyncExtras = field(default_factory=SyncExtras)
    fetch: FetchExtras = field(default_factory=FetchExtras)
    build: BuildExtras = field(default_factory=BuildExtras)
    validate: ValidateExtras = field(default_factory=ValidateExtras)

    @property
    def validating(self) -> bool:
        """Setup runs the validation kernels (and so needs the run-time prerequisites)."""
        return not (self.skip_build or self.skip_validate)


def _never_skipped(options: RunOptions) -> str | None:
    return None


@dataclass(frozen=True)
class Stage:
    """One stage, whole: everything setup, status, the dry run and the CLI know about it (``registry.STAGES``
    lists them in order). ``plan`` is read-only; ``run`` acts on the items ``plan`` returned."""

    name: str  # setup's report row and the dry run's name for it
    command: str  # the subcommand that runs it alone
    area: str  # the ``PlanItem.area`` of its plan items
    error: type[FlagtreeCpuError]  # what it stops with: its exit code is ``error.exit_code``
    plan: Callable[[StageContext, Lock | None, RunOptions, list[PlanItem]], list[PlanItem]]
    run: Callable[[StageContext, RunOptions, list[PlanItem]], StageResult]
    skip: Callable[[RunOptions], str | None] = _never_skipped  # why setup skips it with these options
    concurrent: bool = False  # runs side by side with the next concurrent stage in setup
