"""How a command opens its workspace: the context for the global options, the target interpreter, and holding
the workspace while the command changes it. Shared by the stage commands, validate, status, doctor and the
bundle import."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .app import options
from .session import Options

if TYPE_CHECKING:
    from ..context import ContextRequest
    from ..stagekit.stage import StageContext


@contextmanager
def exclusive(opts: Options, stage_ctx: StageContext, command: str) -> Iterator[None]:
    """Hold the workspace for a command that changes it (exit 8 if another run has it, unless --wait).
    A command that created the workspace and then failed before making anything leaves no trace."""
    from ..workspace import exclusive_use

    with exclusive_use(stage_ctx.workspace, command, wait=opts.wait, on_wait=opts.ui.info):
        yield


def absolute(path: Path | None) -> Path | None:
    return Path(os.path.abspath(path.expanduser())) if path else None


def build_jobs(stage_ctx: StageContext) -> int:
    """MAX_JOBS as the build's environment gets it (for the out-of-memory advice)."""
    from ..recipe.builds import final_build, named_builds

    final = final_build(stage_ctx.recipe)  # the one the recipe's steps run around (each build has its own {jobs})
    return int(named_builds(stage_ctx.recipe)[final].env.set.get("MAX_JOBS", "1")) if final else 1


def opened(ctx: typer.Context, *, python: Path | None = None, jobs: int | None = None,
           wheel_dir: Path | None = None, request: ContextRequest | None = None
           ) -> tuple[Options, StageContext, Path]:
    """The global options, the command's context and its target interpreter; ``request``: a request already
    completed (setup --bundle's, naming the recipe the bundle carries)."""
    from ..context import chosen_python, open_context

    opts = options(ctx)
    request = request or opts.request(python=python, jobs=jobs, wheel_dir=wheel_dir)
    stage_ctx = open_context(request, opts.ui)
    return opts, stage_ctx, chosen_python(request, stage_ctx.workspace)


def carried_recipe(ctx: typer.Context, bundle: Path, trust: Any, *, python: Path | None, jobs: int | None) -> Any:
    """setup --bundle on a workspace that records no recipe: the recipe the bundle carries, as `bundle import`
    takes it (bundle.recipes.with_carried_recipe), so a bundle of a user's recipe file sets up in one command."""
    from ..bundle.importer import verified
    from ..bundle.recipes import with_carried_recipe

    opts = options(ctx)
    return with_carried_recipe(opts.request(python=python, jobs=jobs), absolute(bundle) or bundle, opts.ui, trust,
                               verified)
