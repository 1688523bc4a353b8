"""The stages, in setup's order: one list that `setup`, `status`, the dry run, the report, the stop codes and
the command listing derive from.

Each stage package exports one ``STAGE`` (``stagekit.stage.Stage``): its name, the subcommand that runs it
alone, the plan area its items carry, the error it stops with (and so its exit code), whether setup runs it
side by side with the next one, its skip rule, and ``plan``/``run`` with one signature each. ``run``
receives the items ``plan`` made (``run_stage``). Adding a stage is its package, its ``STAGE`` in the line
below, and a command in the CLI.

``sources`` and ``artifacts`` run side by side in setup (``concurrent``): the clones need no LLVM and the
download needs no clone. A stage's plan and run import its modules lazily: `--version` and `--help` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..stagekit.stage import Stage
from . import artifacts, build, links, python, sources, validate

if TYPE_CHECKING:
    from ..lockfile import Lock
    from ..stagekit.plan import PlanItem
    from ..stagekit.stage import RunOptions, StageContext, StageResult


STAGES: tuple[Stage, ...] = (sources.STAGE, artifacts.STAGE, links.STAGE, python.STAGE, build.STAGE, validate.STAGE)
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
    import time
    from dataclasses import replace

    start = time.monotonic()
    result = stage.run(ctx, options, plan_stage(stage, ctx, replace(options, for_run=True)))
    # a stage that does not time itself (python) would say "created in 0.00s" after a venv and a pip install
    return result if result.seconds else replace(result, seconds=time.monotonic() - start)


def stage_named(name: str) -> Stage:
    return next(s for s in STAGES if s.name == name)
