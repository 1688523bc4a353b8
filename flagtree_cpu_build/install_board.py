"""Whether a run is an install-only board, decided before the host is judged: `setup` and `build` ask first.

A board that installs a published build (``stages/build/install_only``) compiles nothing, so it is judged on what
running that build needs (``preflight.install_only_stages``), not on a compiler, cmake, git, memory for the build or
the architecture the recipe builds on. That is only known once the board has been asked about: the install-only
record when it still holds (a re-run: nothing is asked, nothing is downloaded), else the wheelhouse's offer for the
lock's pins. The command asks once, judges the host for what will run, then takes the offer; the build stage itself
never asks (it builds), so the wheelhouse is asked once per run.

An offer the wheelhouse cannot deliver (the wheel is gone, the server drops) is one warning, and the usual path
follows — judged as a builder first, as if no wheelhouse had been asked (a board without a compiler then stops with
exit 7 before anything runs, not an hour into a build that cannot work).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

from .preflight import check_host_for_build
from .stagekit.stage import RunOptions, StageContext, StageResult

if TYPE_CHECKING:
    from .stages.build.install_only import Offer

Board = Union[dict[str, Any], "Offer"]  # the record of a build installed here, or the wheelhouse's offer


def whole_build(options: RunOptions) -> bool:
    """Whether the run builds what an install-only board installs: the whole recipe (not --only), into the target
    (not --wheel or --publish), and the build at all (not setup --skip-build)."""
    extras = options.build
    return not (options.skip_build or extras.only or extras.publish or extras.wheel_dir)


def install_only_board(ctx: StageContext, options: RunOptions) -> Board | None:
    """The record of the build this board installed when it still holds (nothing is asked), else the wheelhouse's
    offer for the lock's pins; None (and why not, said once) for the usual path."""
    from .stages.build import install_only
    from .stages.registry import read_plan_lock

    if not whole_build(options) or ctx.base is not None:  # a stacked recipe's base is built here: not this path
        return None
    lock = read_plan_lock(ctx)
    record = install_only.installed(ctx, options, lock)
    if record is not None:
        return record
    offer, why = install_only.ask(ctx, options, lock)
    if offer is None and why != install_only.NOT_CONFIGURED:
        ctx.ui.info(f"not install-only: {why}")
    return offer


def take(ctx: StageContext, options: RunOptions, board: Board, *, runtime: bool) -> StageResult | None:
    """The board's build: "up to date" by its record, or the offer installed (``runtime``: with the recipe's run-time
    prerequisites, for the checks setup runs next). None: the wheelhouse could not deliver it (warned once)."""
    from .stages.build import install_only

    if isinstance(board, dict):
        return install_only.up_to_date(board)
    ctx.ui.info(board.says())
    return install_only.install(ctx, options, board, runtime=runtime)


def run_build(ctx: StageContext, options: RunOptions) -> StageResult:
    """`build`: an install-only board's build taken (the host judged on what running it needs), else the build
    stage (the host judged by the build's checks first). Every host problem at once, exit 7; the failures
    --ignore-host lets through are said once, before anything runs."""
    from .stages.registry import run_stage, stage_named

    board = install_only_board(ctx, options)
    if board is not None:
        _judged(ctx, check_host_for_build(ctx, options, install_only=True))
        taken = take(ctx, options, board, runtime=False)  # `build` never installs the run-time prerequisites
        if taken is not None:
            return taken
    _judged(ctx, check_host_for_build(ctx, options))  # also when the offer was not delivered: judged as a builder
    return run_stage(stage_named("build"), ctx, options)


def _judged(ctx: StageContext, ignored: list[str]) -> None:
    if ignored:  # asked for (--ignore-host): said once, not as warnings
        ctx.ui.info(f"preflight: {len(ignored)} host check{'s' if len(ignored) > 1 else ''} failed, ignored "
                    f"(--ignore-host): {', '.join(ignored)}")
