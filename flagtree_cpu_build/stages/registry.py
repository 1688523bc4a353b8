"""The stages, in setup's order: one list that `setup`, `status`, the dry run, the report, the stop codes and
the command listing derive from.

Each stage is one ``Stage`` value (``stages.Stage``): its name, the subcommand that runs it alone, the plan
area its items carry, the error it stops with (and so its exit code), whether setup runs it side by side
with the next one, its skip rule, and ``plan``/``run`` with one signature each. ``run`` receives the items
``plan`` made. Adding a stage is its package, a line here and a command in the CLI.

``sources`` and ``artifacts`` run side by side in setup (``concurrent``): the clones need no LLVM and the
download needs no clone. The plan and run functions import their stage lazily: `--version` and `--help`
stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ArtifactError, BuildError, SourceError, ValidationFailed
from ..stagekit.stage import Stage

if TYPE_CHECKING:
    from ..lockfile import Lock
    from ..stagekit.plan import PlanItem
    from ..stagekit.stage import RunOptions, StageContext, StageResult


def _ready(items: list[PlanItem], *areas: str) -> bool:
    return all(i.current for i in items if not areas or i.area in areas)


# --- each stage's plan and run, one signature each ----------------------------------------------------------


def _plan_sources(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from dataclasses import replace

    from .sources import plan_sources

    if options.for_run:  # the commit each source moves to is decided here, once: the run takes it from the item
        return plan_sources(ctx, lock, replace(options, ask_network=not (options.offline or options.frozen)),
                            count_changes=False)
    return plan_sources(ctx, lock, options)


def _run_sources(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from .sources.sync import run_sync

    return run_sync(ctx, options, plan)


def _plan_artifacts(ctx: StageContext, lock: Lock | None, options: RunOptions,
                    earlier: list[PlanItem]) -> list[PlanItem]:
    from .artifacts import plan_artifacts

    return plan_artifacts(ctx.recipe, lock, options)


def _run_artifacts(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from ..stagekit.stage import Action, StageResult
    from .artifacts.fetch import run_fetch

    if not ctx.recipe.artifacts:
        return StageResult("fetch", (Action("fetch", "skipped", "the recipe has no artifacts"),))
    return run_fetch(ctx, options, plan)


def _plan_links(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from .links.plan import plan_link_items

    return plan_link_items(ctx, sources_ready=_ready(earlier, "sources"))


def _run_links(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from ..stagekit.stage import Action, StageResult
    from .links.link import run_link

    if ctx.recipe.links is None:
        return StageResult("link", (Action("link", "skipped", "the recipe has no links"),))
    return run_link(ctx)[1]


def _plan_python(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from .python.stage import plan_python

    return [] if options.skip_build else plan_python(ctx, options)


def _run_python(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from .python.stage import run_python

    return run_python(ctx, options, plan)


def _plan_build(ctx: StageContext, lock: Lock | None, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    from .build.plan import plan_build

    return plan_build(ctx, options, earlier)


def _run_build(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from .build.build import run_build

    return run_build(ctx, options, plan)


def _plan_validate(ctx: StageContext, lock: Lock | None, options: RunOptions,
                   earlier: list[PlanItem]) -> list[PlanItem]:
    from .validate.plan import plan_validate

    # the checks' last verdict stands while the build and the interpreter stay as they are
    built = [i for i in earlier if i.area in ("python", "build")]
    return plan_validate(ctx, options, built_current=all(i.will == "ok" for i in built))


def _run_validate(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    from .validate.stage import validate_for_setup

    return validate_for_setup(ctx, options, plan)


def _skip_with_build(options: RunOptions) -> str | None:
    return "--skip-build" if options.skip_build else None


def _skip_validate(options: RunOptions) -> str | None:
    return "--skip-build" if options.skip_build else "--skip-validate" if options.skip_validate else None


STAGES: tuple[Stage, ...] = (
    Stage("sources", "sync", "sources", SourceError, _plan_sources, _run_sources, concurrent=True),
    Stage("artifacts", "fetch", "artifacts", ArtifactError, _plan_artifacts, _run_artifacts, concurrent=True),
    Stage("links", "link", "links", SourceError, _plan_links, _run_links),
    Stage("python", "python", "python", BuildError, _plan_python, _run_python, skip=_skip_with_build),
    Stage("build", "build", "build", BuildError, _plan_build, _run_build, skip=_skip_with_build),
    Stage("validate", "validate", "validation", ValidationFailed, _plan_validate, _run_validate, skip=_skip_validate),
)
STAGE_NAMES = ("preflight", *(s.name for s in STAGES))  # preflight checks the host; it plans no items
STAGE_COMMANDS = tuple(s.command for s in STAGES)  # in setup's order: `--help` lists them so


def stage_of_area(area: str) -> Stage | None:
    """The stage whose plan items carry this area (None for the items status adds, e.g. a base recipe)."""
    return next((s for s in STAGES if s.area == area), None)


def read_plan_lock(ctx: StageContext) -> Lock | None:
    """The lock file the plans read (None before the first sync)."""
    from ..lockfile import read_lock

    return read_lock(ctx.workspace.lock_file) if ctx.workspace.lock_file.is_file() else None


def plan_all(ctx: StageContext, options: RunOptions) -> list[PlanItem]:
    """Every stage's plan, in order (read-only)."""
    lock = read_plan_lock(ctx)
    items: list[PlanItem] = []
    for stage in STAGES:
        items += stage.plan(ctx, lock, options, items)
    return items


def plan_stage(stage: Stage, ctx: StageContext, options: RunOptions, earlier: list[PlanItem] | None = None
               ) -> list[PlanItem]:
    """One stage's plan, as its run receives it; ``earlier``: what the stages before it planned (setup
    passes them; a subcommand alone has none, so the stage plans as if they were done)."""
    return stage.plan(ctx, read_plan_lock(ctx), options, earlier or [])


def run_stage(stage: Stage, ctx: StageContext, options: RunOptions) -> StageResult:
    """Plan the stage, then run it on that plan: what `setup` does for each stage and each subcommand
    does for its own."""
    from dataclasses import replace

    return stage.run(ctx, options, plan_stage(stage, ctx, replace(options, for_run=True)))


def stage_named(name: str) -> Stage:
    return next(s for s in STAGES if s.name == name)
