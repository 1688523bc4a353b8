"""The recipes a user can name, and whether each loads: what `recipe list` and `recipe validate` report.

Loading is the files module's; this module judges a set of recipes without stopping at the first
bad one, so the CLI only renders the verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import FlagtreeCpuError, RecipeError, UsageError
from .files import load_recipe_file, recipe_variants, recipe_warnings
from .locate import RecipeRef, find_recipe, list_recipes

if TYPE_CHECKING:
    from ..errors import RecipeWarning
    from . import Recipe


@dataclass(frozen=True)
class CatalogEntry:
    """One row of `recipe list`: a recipe and whether it loads."""

    ref: RecipeRef
    status: str  # valid, invalid (N problems), unreadable
    description: str
    problems: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.ref.name, "origin": self.ref.origin, "file": str(self.ref.path), "status": self.status,
                "description": self.description, "shadows": str(self.ref.shadows) if self.ref.shadows else None,
                "problems": list(self.problems)}


def catalog(user_dirs: Sequence[Path]) -> list[CatalogEntry]:
    """Every recipe `recipe list` shows, each loaded as `--recipe NAME` would load it (the same folders find the
    bases it extends)."""
    return [_entry(ref, user_dirs) for ref in list_recipes(user_dirs)]


def _entry(ref: RecipeRef, user_dirs: Sequence[Path]) -> CatalogEntry:
    try:
        return CatalogEntry(ref, "valid", load_recipe_file(ref.path, user_dirs=user_dirs).description)
    except RecipeError as exc:
        return CatalogEntry(ref, f"invalid ({len(exc.problems)} problems)", "",
                            tuple(p.to_json() for p in exc.problems))
    except FlagtreeCpuError as exc:
        return CatalogEntry(ref, "unreadable", "", ({"message": exc.message},))


@dataclass(frozen=True)
class RecipeCheck:
    """The verdict on one recipe file, with --set overrides applied."""

    file: Path
    recipe: Recipe | None = None
    error: FlagtreeCpuError | None = None
    warnings: tuple[RecipeWarning, ...] = field(default=())
    variant: str | None = None  # the variant checked (None: a recipe without variants)

    def to_json(self) -> dict[str, Any]:
        if self.recipe is None:
            assert self.error is not None
            return {"file": str(self.file), "variant": self.variant, "ok": False, "error": self.error.to_json()}
        return {"file": str(self.file), "variant": self.variant, "ok": True, "name": self.recipe.name,
                "digest": self.recipe.digest, "warnings": [{"key": w.key, "message": w.message} for w in self.warnings]}


def check_recipes(targets: Sequence[str], overrides: Sequence[str], user_dirs: Sequence[Path], *,
                  every: bool = False, variant: str | None = None) -> list[RecipeCheck]:
    """Each named recipe (``every``: each one `recipe list` shows) loaded strictly, as ``variant``, or else as
    its default and then as each of its other variants (a variant's overlay can break what the default
    leaves alone); a name that matches no recipe is a usage error before anything is checked."""
    paths = [ref.path for ref in list_recipes(user_dirs)] if every else \
        [find_recipe(t, user_dirs).path for t in targets]
    checks = []
    for path in paths:
        first = _check(path, overrides, variant, user_dirs)
        checks.append(first)
        if variant is None and first.recipe is not None:
            checks += [_check(path, overrides, name, user_dirs) for name in recipe_variants(first.recipe)
                       if name != first.recipe.variant]
    return checks


def _check(path: Path, overrides: Sequence[str], variant: str | None, user_dirs: Sequence[Path]) -> RecipeCheck:
    try:
        loaded = load_recipe_file(path, overrides, variant, user_dirs=user_dirs)
    except RecipeError as exc:
        if variant is not None and not exc.message.startswith("variant "):
            exc.message = f"variant {variant} of {exc.message}"  # which of the file's variants is broken
        return RecipeCheck(path, error=exc, variant=variant)
    except FlagtreeCpuError as exc:
        return RecipeCheck(path, error=exc, variant=variant)
    return RecipeCheck(path, loaded, warnings=tuple(recipe_warnings(loaded)), variant=loaded.variant)


def invalid(checks: Sequence[RecipeCheck]) -> FlagtreeCpuError | None:
    """The one error `recipe validate` exits with (2) when any recipe is invalid."""
    failures = [c.error for c in checks if c.error is not None]
    if len(failures) <= 1:
        return failures[0] if failures else None
    error = UsageError(f"{len(failures)} of {len(checks)} recipes are invalid",
                       details=tuple(f.message for f in failures),
                       fix="correct each one as listed above (`recipe validate FILE` checks one)")
    error.kind = "recipe"
    return error
