"""Shell completion of option values, from what the command line names so far.

Completion runs before any command: Click parses the words typed so far without running callbacks, so the
active recipe is read from the root context's parsed ``--recipe``/``--recipes-dir``/``--variant`` (or their
environment variables), not from the session's options. A recipe that cannot be read completes nothing: a
completion never prints an error into the user's shell."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ..recipe import Recipe

DEFAULT_RECIPE = "flagtree-cpu-arm64"


def _dirs(ctx: typer.Context) -> list[Path]:
    from ..recipe.locate import user_recipe_dirs

    return user_recipe_dirs(list(ctx.find_root().params.get("recipes_dirs") or []))


def _active_recipe(ctx: typer.Context, *, with_variant: bool = True) -> Recipe | None:
    from ..errors import FlagtreeCpuError
    from ..recipe.files import load_recipe

    params = ctx.find_root().params
    name = params.get("recipe") or DEFAULT_RECIPE
    variant = (params.get("variant") or None) if with_variant else None
    try:
        return load_recipe(name, (), _dirs(ctx), variant)
    except (FlagtreeCpuError, OSError):
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
