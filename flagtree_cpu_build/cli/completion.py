"""Shell completion of option values, from what the command line names so far.

Completion runs before any command: Click parses the words typed so far without running callbacks, so the
active recipe is read from the root context's parsed ``--recipe``/``--recipes-dir``/``--variant`` (or their
environment variables), not from the session's options; without ``--recipe``, from the workspace's record (by
``-w`` or the folder the shell is in), as the command itself would. A recipe that cannot be read completes nothing: a
completion never prints an error into the user's shell."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ..recipe import Recipe
    from ..workspace_recipe import Recorded

DEFAULT_RECIPE = "flagtree-cpu-arm64"


def _dirs(ctx: typer.Context) -> list[Path]:
    from ..recipe.locate import user_recipe_dirs

    return user_recipe_dirs(list(ctx.find_root().params.get("recipes_dirs") or []))


def _active_recipe(ctx: typer.Context, *, with_variant: bool = True) -> Recipe | None:
    from ..errors import FlagtreeCpuError
    from ..recipe.files import load_recipe

    params = ctx.find_root().params
    name, variant = params.get("recipe"), params.get("variant")
    if not name:  # no --recipe: the workspace's own (by -w, or the one the shell is in), as the command would
        found = _recorded(params.get("workdir"))
        name = found.recipe_arg if found is not None else DEFAULT_RECIPE
        variant = variant or (found.variant if found is not None else None)
    variant = (variant or None) if with_variant else None
    try:
        return load_recipe(name, (), _dirs(ctx), variant)
    except (FlagtreeCpuError, OSError):
        return None


def _recorded(workdir: str | None) -> Recorded | None:
    from ..errors import FlagtreeCpuError
    from ..workspace import located_workspace
    from ..workspace_recipe import recorded

    try:
        return recorded(located_workspace(workdir))
    except (FlagtreeCpuError, OSError):  # a damaged record completes as if there were none
        return None


def recipes(ctx: typer.Context, incomplete: str) -> list[str]:
    """--recipe and `recipe show NAME`: the names `recipe list` shows (the --recipes-dir folders included)."""
    from ..recipe.locate import list_recipes

    return [r.name for r in list_recipes(_dirs(ctx)) if r.name.startswith(incomplete)]


def variants(ctx: typer.Context, incomplete: str) -> list[str]:
    """--variant: the active recipe's variants."""
    recipe = _active_recipe(ctx, with_variant=False)
    return [v for v in (recipe.variants if recipe else ()) if v.startswith(incomplete)]


def recipe_checks(ctx: typer.Context, incomplete: str) -> list[str]:
    """validate --only/--kernel: the active recipe's checks (torch-fl's under --recipe torch-fl)."""
    recipe = _active_recipe(ctx)
    return [c.label for c in (recipe.checks if recipe else ()) if c.label.startswith(incomplete)]


def doctor_checks(incomplete: str) -> list[str]:
    """doctor --only: the check ids `doctor --list` shows."""
    from ..doctor import all_checks

    return [c.id for c in all_checks() if c.id.startswith(incomplete)]
