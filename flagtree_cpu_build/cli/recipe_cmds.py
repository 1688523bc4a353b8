"""`recipe list`, `recipe show`, `recipe validate`, `recipe schema`: recipes without a workspace change."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import FlagtreeCpuError, RecipeError, UsageError
from .app import FlagtreeCommand, examples, options, recipe_app
from .render import count
from .session import Verdict

if TYPE_CHECKING:
    from ..recipe import Recipe
    from ..recipe.files import RecipeRef
    from ..ui import UI


@recipe_app.command("list", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe list",
    "flagtree-cpu recipe list --recipes-dir ~/my-recipes --json",
))
def recipe_list(ctx: typer.Context) -> None:
    """List bundled recipes and user recipes (--recipes-dir, FLAGTREE_CPU_RECIPES)."""
    from ..recipe import files as recipes

    opts = options(ctx)
    user_dirs = recipes.user_recipe_dirs(opts.recipes_dirs)
    for folder in user_dirs:  # a typo in a folder name would otherwise just show fewer recipes
        if not folder.is_dir():
            opts.ui.warn(f"recipes folder {folder} ({'is not a folder' if folder.exists() else 'does not exist'}) "
                         "is skipped; check --recipes-dir and FLAGTREE_CPU_RECIPES")
    entries = [_entry(ref) for ref in recipes.list_recipes(user_dirs)]
    if opts.ui.json_mode:
        opts.ui.emit_json({"recipes": entries})
        return
    opts.ui.table(["name", "origin", "status", "description"],
                  [[e["name"], str(e["origin"]) + (" (hides bundled)" if e["shadows"] else ""), e["status"],
                    e["description"] or e["file"]] for e in entries])


def _entry(ref: RecipeRef) -> dict[str, object]:
    """One row of `recipe list`: the recipe and whether it loads."""
    from ..recipe.files import load_recipe_file

    problems: list[dict[str, object]] = []
    try:
        loaded = load_recipe_file(ref.path)
        status, description = "valid", loaded.description
    except RecipeError as exc:
        status, description = f"invalid ({len(exc.problems)} problems)", ""
        problems = [p.to_json() for p in exc.problems]
    except FlagtreeCpuError as exc:
        status, description, problems = "unreadable", "", [{"message": exc.message}]
    return {"name": ref.name, "origin": ref.origin, "file": str(ref.path), "status": status,
            "description": description, "shadows": str(ref.shadows) if ref.shadows else None, "problems": problems}


@recipe_app.command("show", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe show",
    "flagtree-cpu recipe show flagtree-cpu-arm64 --workdir /data/ft",
    "flagtree-cpu recipe show ./my-recipe.yaml --raw",
    "flagtree-cpu recipe show --set artifacts.llvm.url=https://mirror.example/llvm.tar.gz --json",
))
def recipe_show(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Argument(
        metavar="[NAME|PATH]", help="Recipe to show.  \\[default: the --recipe option]")] = None,
    raw: Annotated[bool, typer.Option(
        "--raw", help="Show the recipe as written (placeholders and variants unresolved).")] = False,
) -> None:
    """Print a recipe as YAML, resolved for this workspace and host.

    Placeholders such as {workdir} and {artifacts.llvm.path} are filled in, and the
    artifact variant for this host is applied. Overrides given with --set are included.
    """
    from dataclasses import replace

    from ..context import requested_recipe, resolved_view

    opts = options(ctx)
    request = opts.request()
    request = replace(request, recipe=name) if name else request
    if raw:
        loaded = requested_recipe(request)
        _show(opts.ui, loaded, loaded, "as written", resolved=False)
    else:
        view = resolved_view(request)
        _show(opts.ui, view.recipe, view.shown, view.context, resolved=True)


def _show(ui: UI, loaded: Recipe, shown: Recipe, context: str, *, resolved: bool) -> None:
    from ..recipe.files import recipe_warnings
    from ..recipe.schema import to_data

    for warning in recipe_warnings(loaded):
        ui.warn(f"{warning.key}: {warning.message}")
    data = to_data(shown)
    if ui.json_mode:
        ui.emit_json({"file": loaded.file, "digest": loaded.digest, "resolved": resolved, "context": context,
                      "recipe": data})
        return
    import yaml

    header = f"# {loaded.name} from {loaded.file}\n# digest: sha256:{loaded.digest}\n# {context}\n"
    ui.emit_text(header + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True))


@recipe_app.command("validate", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe validate my-recipe.yaml other.yaml",
    "flagtree-cpu recipe validate --all",
    "flagtree-cpu --set sources.flagtree.commit=<sha> recipe validate",
))
def recipe_validate(
    ctx: typer.Context,
    targets: Annotated[Optional[list[str]], typer.Argument(
        metavar="[PATH|NAME]...", help="Recipes to check.  \\[default: the --recipe option]")] = None,
    all_recipes: Annotated[bool, typer.Option("--all", help="Check every recipe `recipe list` shows.")] = False,
) -> None:
    """Check recipes strictly and report every problem with file:line and a fix.

    Exit code 2 when any recipe is invalid. Overrides given with --set are applied to
    each recipe and checked like the file itself.
    """
    from ..recipe import files as recipes

    opts = options(ctx)
    user_dirs = recipes.user_recipe_dirs(opts.recipes_dirs)
    if all_recipes:
        paths = [ref.path for ref in recipes.list_recipes(user_dirs)]
    else:
        paths = [recipes.find_recipe(t, user_dirs).path for t in (targets or [opts.recipe])]
    results, failures = [], []
    for path in paths:
        try:
            loaded = recipes.load_recipe_file(path, opts.overrides)
        except FlagtreeCpuError as exc:
            failures.append(exc)
            results.append({"file": str(path), "ok": False, "error": exc.to_json()})
            if not opts.ui.json_mode:
                opts.ui.error(exc)
            continue
        warnings = recipes.recipe_warnings(loaded)
        results.append({"file": str(path), "ok": True, "name": loaded.name, "digest": loaded.digest,
                        "warnings": [{"key": w.key, "message": w.message} for w in warnings]})
        if not opts.ui.json_mode:
            links = len(loaded.links.entries) if loaded.links else 0
            opts.ui.success(f"{path}: recipe {loaded.name} is valid ({count(len(loaded.sources), 'source')}, "
                            f"{count(len(loaded.artifacts), 'artifact')}, {count(links, 'link')})")
            for warning in warnings:
                opts.ui.warn(f"{warning.key}: {warning.message}")
    if opts.ui.json_mode:
        opts.ui.emit_json({"ok": not failures, "results": results})
    if failures:
        raise Verdict(failures[0] if len(failures) == 1 else _invalid(failures, paths))


def _invalid(failures: list[FlagtreeCpuError], paths: list[Path]) -> FlagtreeCpuError:
    error = UsageError(f"{len(failures)} of {len(paths)} recipes are invalid", details=tuple(
        f.message for f in failures), fix="correct each one as listed above (`recipe validate FILE` checks one)")
    error.kind = "recipe"
    return error


@recipe_app.command("schema", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe schema > recipe.schema.json",
    "# VS Code / yaml-language-server: first line of a recipe",
    "# yaml-language-server: $schema=./recipe.schema.json",
))
def recipe_schema_cmd(ctx: typer.Context) -> None:
    """Print the recipe format as JSON Schema (draft 2020-12) on stdout, for editors and CI."""
    from ..recipe.json_schema import recipe_json_schema

    options(ctx).ui.emit_json(recipe_json_schema())
