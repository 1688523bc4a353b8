"""The compile farm for one build (``compile_farm.py``): probed, and the build's command and environment resolved
again with the farm's slots in {jobs}. The stamp was computed before, from the context without the farm, so
the farm never changes what the build is judged by."""

from __future__ import annotations

from ... import compile_farm
from ...buildenv import BuildEnv, build_environment
from ...stagekit.stage import RunOptions, StageContext
from .plan import view_of


def farm_for(ctx: StageContext, options: RunOptions, name: str,
             build_env: BuildEnv) -> tuple[compile_farm.FarmSession | None, StageContext, BuildEnv]:
    """(the farm session or None, the context the command runs in, its build environment)."""
    assert ctx.recipe.build is not None
    farm = compile_farm.prepare(options.compile_farm, ctx.recipe.build.compile_farm, build_env.env, ctx.host.arch,
                                ctx.workspace.state_dir, ctx.ui.warn)
    if farm is None or not farm.env or ctx.reopen is None:
        return farm, ctx, build_env
    grown = view_of(ctx.reopen(farm_slots=farm.slots), name)
    env = build_environment(grown.recipe, options.python, offline=options.offline, host=ctx.host,
                            workdir=ctx.workspace.root)
    return farm, grown, env
