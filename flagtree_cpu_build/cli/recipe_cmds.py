"""`recipe list`, `recipe show`, `recipe validate`, `recipe schema`: recipes without a workspace change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .app import FlagtreeCommand, examples, options, recipe_app
from .render import count
from .session import Verdict

if TYPE_CHECKING:
    from ..recipe import Recipe
    from ..ui import UI


@recipe_app.command("list", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe list",
    "flagtree-cpu recipe list --recipes-dir ~/my-recipes --json",
))
def recipe_list(ctx: typer.Context) -> None:
    """List bundled recipes and user recipes (--recipes-dir, FLAGTREE_CPU_RECIPES)."""
    from ..recipe.catalog import catalog
    from ..recipe.files import user_recipe_dirs

    opts = options(ctx)
    user_dirs = user_recipe_dirs(opts.recipes_dirs)
    for folder in user_dirs:  # a typo in a folder name would otherwise just show fewer recipes
        if not folder.is_dir():
            opts.ui.warn(f"recipes folder {folder} ({'is not a folder' if folder.exists() else 'does not exist'}) "
                         "is skipped; check --recipes-dir and FLAGTREE_CPU_RECIPES")
    entries = [e.to_json() for e in catalog(user_dirs)]
    if opts.ui.json_mode:
        opts.ui.emit_json({"recipes": entries})
        return
    opts.ui.table(["name", "origin", "status", "description"],
                  [[e["name"], str(e["origin"]) + (" (hides bundled)" if e["shadows"] else ""), e["status"],
                    e["description"] or e["file"]] for e in entries])


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
    from ..recipe.catalog import check_recipes, invalid
    from ..recipe.files import user_recipe_dirs

    opts = options(ctx)
    checks = check_recipes(targets or [opts.recipe], opts.overrides, user_recipe_dirs(opts.recipes_dirs),
                           every=all_recipes)
    if opts.ui.json_mode:
        opts.ui.emit_json({"ok": all(c.error is None for c in checks), "results": [c.to_json() for c in checks]})
    else:
        for check in checks:
            if check.error is not None:
                opts.ui.error(check.error)
                continue
            loaded = check.recipe
            assert loaded is not None
            links = len(loaded.links.entries) if loaded.links else 0
            opts.ui.success(f"{check.file}: recipe {loaded.name} is valid ({count(len(loaded.sources), 'source')}, "
                            f"{count(len(loaded.artifacts), 'artifact')}, {count(links, 'link')})")
            for warning in check.warnings:
                opts.ui.warn(f"{warning.key}: {warning.message}")
    failure = invalid(checks)
    if failure is not None:
        raise Verdict(failure)


@recipe_app.command("schema", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe schema > recipe.schema.json",
    "# VS Code / yaml-language-server: first line of a recipe",
    "# yaml-language-server: $schema=./recipe.schema.json",
))
def recipe_schema_cmd(ctx: typer.Context) -> None:
    """Print the recipe format as JSON Schema (draft 2020-12) on stdout, for editors and CI."""
    from ..recipe.json_schema import recipe_json_schema

    options(ctx).ui.emit_json(recipe_json_schema())
