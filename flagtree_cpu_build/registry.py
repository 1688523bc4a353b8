"""The stages, in setup's order: one list that `setup`, `status`, the dry run and the report derive from.

Each stage names the subcommand that runs it alone, plans (read-only: what it would do to each
item, see ``plans``), says when setup skips it, and runs. Adding a stage is a module with its
``plan_*``/``run_*``, an entry here and a command in the CLI.

``sources`` and ``artifacts`` run side by side in setup (``concurrent``): the clones need no
LLVM and the download needs no clone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .plans import PlanItem, Scope

if TYPE_CHECKING:
    from .lockfile import Lock
    from .setup_report import SetupReport
    from .stages import SetupOptions, StageContext, StageResult


class Stage(Protocol):
    name: str  # as setup's report and the dry run name it
    command: str  # the subcommand that runs it alone
    concurrent: bool  # runs side by side with the next concurrent stage in setup

    def plan(self, ctx: StageContext, lock: Lock | None, scope: Scope, earlier: list[PlanItem]) -> list[PlanItem]:
        """What the stage would do; ``earlier``: the plans of the stages before it."""

    def skip(self, options: SetupOptions) -> str | None:
        """Why setup skips the stage with these options; None when it runs."""

    def run(self, ctx: StageContext, options: SetupOptions, report: SetupReport) -> StageResult:
        """Do what the plan says is missing; the same function its subcommand calls."""


@dataclass(frozen=True)
class _Entry:
    name: str
    command: str
    plan: Callable[[StageContext, Lock | None, Scope, list[PlanItem]], list[PlanItem]]
    skip: Callable[[SetupOptions], str | None]
    run: Callable[[StageContext, SetupOptions, SetupReport], StageResult]
    concurrent: bool = False


def _ready(items: list[PlanItem], *areas: str) -> bool:
    return all(i.current for i in items if not areas or i.area in areas)


# --- each stage's plan, skip rule and run (imports are lazy: `--version` and `--help` stay fast) ---------------


def _plan_sources(ctx: StageContext, lock: Lock | None, scope: Scope, earlier: list[PlanItem]) -> list[PlanItem]:
    from .plans.sources import plan_sources

    return plan_sources(ctx, lock, scope)


def _run_sources(ctx: StageContext, options: SetupOptions, report: SetupReport) -> StageResult:
    from .lockfile import read_lock
    from .sources import SyncOptions, run_sync

    # the plan sync acts on: refs asked of the server unless --offline or --frozen forbid it
    scope = scope_of(options, ask_network=not options.frozen)
    plan = _plan_sources(ctx, read_lock(ctx.workspace.lock_file), scope, [])
    return run_sync(ctx, SyncOptions(update=options.update, frozen=options.frozen, offline=options.offline,
                                     allow_dirty=options.allow_dirty, git_cache=options.git_cache), plan)


def _plan_artifacts(ctx: StageContext, lock: Lock | None, scope: Scope, earlier: list[PlanItem]) -> list[PlanItem]:
    from .plans.artifacts import plan_artifacts

    return plan_artifacts(ctx.recipe, lock, scope)


def _run_artifacts(ctx: StageContext, options: SetupOptions, report: SetupReport) -> StageResult:
    from .fetch import FetchOptions, run_fetch
    from .stages import Action, StageResult

    if not ctx.recipe.artifacts:
        return StageResult("fetch", (Action("fetch", "skipped", "the recipe has no artifacts"),))
    return run_fetch(ctx, FetchOptions(offline=options.offline, require_hashes=options.require_hashes,
                                       frozen=options.frozen, cache_dir=options.cache_dir, mirrors=options.mirrors))


def _plan_links(ctx: StageContext, lock: Lock | None, scope: Scope, earlier: list[PlanItem]) -> list[PlanItem]:
    from .plans.links import plan_link_items

    return plan_link_items(ctx, sources_ready=_ready(earlier, "sources"))


def _run_links(ctx: StageContext, options: SetupOptions, report: SetupReport) -> StageResult:
    from .links import run_link
    from .stages import Action, StageResult

    if ctx.recipe.links is None:
        return StageResult("link", (Action("link", "skipped", "the recipe has no links"),))
    return run_link(ctx)[1]


def _plan_python(ctx: StageContext, lock: Lock | None, scope: Scope, earlier: list[PlanItem]) -> list[PlanItem]:
    from .python_stage import plan_python

    return [] if scope.skip_build else plan_python(ctx, scope.python, runtime=not scope.skip_validate)


def _run_python(ctx: StageContext, options: SetupOptions, report: SetupReport) -> StageResult:
    from .python_stage import PythonOptions, run_python

    return run_python(ctx, PythonOptions(options.python, offline=options.offline, runtime=options.validating))


def _plan_build(ctx: StageContext, lock: Lock | None, scope: Scope, earlier: list[PlanItem]) -> list[PlanItem]:
    from .plans.build import plan_build

    return plan_build(ctx, scope, earlier)


def _run_build(ctx: StageContext, options: SetupOptions, report: SetupReport) -> StageResult:
    from .build import BuildOptions, run_build

    return run_build(ctx, BuildOptions(python=options.python, offline=options.offline,
                                       ignore_host=options.ignore_host, verbose=options.verbose, jobs=options.jobs,
                                       compile_cache=options.compile_cache, wheelhouse=options.wheelhouse))


def _plan_validate(ctx: StageContext, lock: Lock | None, scope: Scope, earlier: list[PlanItem]) -> list[PlanItem]:
    from .plans.validation import plan_validate

    # the checks' last verdict stands while the build and the interpreter stay as they are
    built = [i for i in earlier if i.area in ("python", "build")]
    return plan_validate(ctx, scope, built_current=all(i.will == "ok" for i in built))


def _run_validate(ctx: StageContext, options: SetupOptions, report: SetupReport) -> StageResult:
    from .validate_stage import validate_for_setup

    return validate_for_setup(ctx, options, report)


def _skip_with_build(options: SetupOptions) -> str | None:
    return "--skip-build" if options.skip_build else None


def _skip_validate(options: SetupOptions) -> str | None:
    return "--skip-build" if options.skip_build else "--skip-validate" if options.skip_validate else None


def _never(options: SetupOptions) -> str | None:
    return None


STAGES: tuple[Stage, ...] = (
    _Entry("sources", "sync", _plan_sources, _never, _run_sources, concurrent=True),
    _Entry("artifacts", "fetch", _plan_artifacts, _never, _run_artifacts, concurrent=True),
    _Entry("links", "link", _plan_links, _never, _run_links),
    _Entry("python", "python", _plan_python, _skip_with_build, _run_python),
    _Entry("build", "build", _plan_build, _skip_with_build, _run_build),
    _Entry("validate", "validate", _plan_validate, _skip_validate, _run_validate),
)
STAGE_NAMES = ("preflight", *(s.name for s in STAGES))  # preflight checks the host; it plans no items


def plan_all(ctx: StageContext, scope: Scope) -> list[PlanItem]:
    """Every stage's plan, in order (read-only)."""
    from .lockfile import read_lock

    lock = read_lock(ctx.workspace.lock_file) if ctx.workspace.lock_file.is_file() else None
    items: list[PlanItem] = []
    for stage in STAGES:
        items += stage.plan(ctx, lock, scope, items)
    return items


def scope_of(options: SetupOptions, *, ask_network: bool = False) -> Scope:
    """What setup with these options would look at."""
    return Scope(python=options.python, cache_dir=options.cache_dir, skip_build=options.skip_build,
                 skip_validate=not options.validating, model=options.model, offline=options.offline,
                 update=options.update, ask_network=ask_network and not options.offline,
                 mirrors=tuple(options.mirrors), wheelhouse=options.wheelhouse)
