"""`build`: the recipe's build, or on an install-only board the fleet's published build installed.

The board is asked about first (``install_board``: the install-only record, else the wheelhouse's offer for the
lock's pins), so the host is judged for what will run: a board that only installs is not refused for lacking a
compiler, cmake or git."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import render
from .app import (
    CompileCacheOption,
    CompileFarmOption,
    FlagtreeCommand,
    JobsOption,
    PythonOption,
    WheelhouseOption,
    app,
    check_compile_cache,
    check_compile_farm,
    examples,
)
from .opening import absolute, build_jobs, exclusive, opened


@app.command(cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu build",
    "flagtree-cpu build --jobs 4          # an 8 GB board",
    "flagtree-cpu build --offline         # check every input first, then build without network",
    "flagtree-cpu build --wheel dist/     # one build, a wheel for many boards",
    "flagtree-cpu build --force --verbose # rebuild and watch every line",
    "flagtree-cpu build --only pytorch    # one of the recipe's builds (and those it needs)",
    "flagtree-cpu build --compile-cache redis://cache.lan:6379  # share compiled objects with other boards",
    "flagtree-cpu build --publish /srv/wheelhouse  # build the wheel and publish it for the fleet",
    "flagtree-cpu build --wheelhouse http://wheels.lan/flagtree/  # install a published build that fits",
))
def build(
    ctx: typer.Context,
    offline: Annotated[bool, typer.Option("--offline", help="Check that every input is here, then build without "
                                          "network (PIP_NO_INDEX=1 and the recipe's build.offline_env).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Build even when the stamp says up to date.")] = False,
    jobs: JobsOption = None,
    python: PythonOption = None,
    wheel: Annotated[Optional[Path], typer.Option("--wheel", metavar="DIR", help="Build a wheel into DIR "
                                                  "instead of the editable install.")] = None,
    ignore_host: Annotated[bool, typer.Option("--ignore-host", help="Build even though this machine is not a "
                                              "target of the recipe (testing).")] = False,
    compile_cache: CompileCacheOption = None,
    compile_farm: CompileFarmOption = None,
    wheelhouse: WheelhouseOption = None,
    publish: Annotated[Optional[str], typer.Option(
        "--publish", metavar="DIR", help="Build the wheel (as --wheel; into <workdir>/dist unless --wheel says) and "
        "publish it into the wheelhouse folder DIR (or file://): the wheel, a JSON manifest and a PEP 503 index."
    )] = None,
    only: Annotated[Optional[str], typer.Option(
        "--only", metavar="NAME", help="Run the recipe's build NAME (`build`, or a name under `builds:`) and the "
        "builds it needs, not the ones after it; each is still skipped when up to date.")] = None,
) -> None:
    """Install the build prerequisites and run the recipe's build command (build.argv) in its build environment.

    Every input is checked first (sources at their pins, links, artifacts, prerequisites) and all missing ones
    are listed at once. Full output goes to <workdir>/logs/build-<time>.log; a failure is diagnosed from it. When
    nothing changed since the last build, build says so in about a second and runs nothing.

    With a wheelhouse (--wheelhouse, $FLAGTREE_CPU_WHEELHOUSE or the recipe's build.wheelhouse) that lists a build of
    the lock's pins for this machine, that build is installed instead (an install-only board: no sync, fetch or
    compile), and the machine is judged only on what running it needs (not on a compiler, cmake or the
    architecture the recipe builds on).
    """
    from ..install_board import run_build
    from ..stagekit.stage import BuildExtras, RunOptions

    wheel_dir = absolute(wheel)
    opts, stage_ctx, target = opened(ctx, python=python, jobs=jobs, wheel_dir=wheel_dir)
    check_compile_cache(compile_cache, stage_ctx, target)
    check_compile_farm(compile_farm, stage_ctx)
    if publish is not None:
        from ..stages.build.prebuilt import publish_folder

        publish_folder(publish)  # a server URL is a usage error before anything runs
        wheel_dir = wheel_dir or stage_ctx.workspace.root / "dist"  # the {wheel_dir} default
    build_options = RunOptions(python=target, offline=offline, force=force, ignore_host=ignore_host,
                               verbose=opts.ui.verbose, jobs=build_jobs(stage_ctx), compile_cache=compile_cache,
                               compile_farm=compile_farm, wheelhouse=wheelhouse,
                               build=BuildExtras(wheel_dir, publish, only), installer=opts.installer)
    with exclusive(opts, stage_ctx, "build"):
        # an install-only board is asked about first; then doctor's rules that block what will run, as setup's
        # preflight runs them: every host problem at once (exit 7)
        result = run_build(stage_ctx, build_options)
    render.stage_result(opts.ui, result, "step")
    wheel_info = result.actions[-1].data.get("wheel") if result.actions else None  # the final build's
    if wheel_info and not opts.ui.json_mode:  # on their own lines, to copy
        opts.ui.info(f"wheel:  {wheel_info['path']}")
        opts.ui.info(f"sha256: {wheel_info['sha256']}")
