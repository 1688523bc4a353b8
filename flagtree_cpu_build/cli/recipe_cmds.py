"""`recipe list`, `recipe show`, `recipe validate`, `recipe schema`, `recipe upgrade`: recipes, without a
workspace change (`recipe upgrade` rewrites the one file it is given, nothing else)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..table_layout import LABEL, PATH, Column
from . import completion
from .app import FlagtreeCommand, examples, options, recipe_app
from .render import count
from .session import Verdict

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..errors import RecipeWarning
    from ..recipe import Recipe
    from ..recipe.locate import SkippedFile
    from ..ui import UI


@recipe_app.command("list", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe list",
    "flagtree-cpu recipe list --recipes-dir ~/my-recipes --json",
))
def recipe_list(ctx: typer.Context) -> None:
    """List bundled recipes and user recipes (--recipes-dir, FLAGTREE_CPU_RECIPES)."""
    from ..recipe.catalog import catalog
    from ..recipe.locate import unusable_folder, user_recipe_dirs

    opts = options(ctx)
    user_dirs = user_recipe_dirs(opts.recipes_dirs)
    for folder in user_dirs:  # a typo in a folder name would otherwise just show fewer recipes
        why = unusable_folder(folder)
        if why is not None:
            opts.ui.warn(f"recipes folder {folder} ({why}) is skipped; check --recipes-dir and FLAGTREE_CPU_RECIPES")
    skipped = _warn_skipped(opts.ui, user_dirs)
    entries = [e.to_json() for e in catalog(user_dirs)]
    if opts.ui.json_mode:
        opts.ui.emit_json({"recipes": entries, "skipped": [s.to_json() for s in skipped]})
        return
    opts.ui.table([Column("name", PATH), "origin", Column("status", LABEL), "description"],
                  [[e["name"], str(e["origin"]) + (" (hides bundled)" if e["shadows"] else ""), e["status"],
                    e["description"] or e["file"]] for e in entries], listing=True)


def _warn_skipped(ui: UI, user_dirs: Sequence[Path]) -> list[SkippedFile]:
    """Files in the recipe folders that are not regular files (a FIFO, a socket, a link to a device): never read,
    so a listing does not hang on them; each is named on stderr."""
    from ..recipe.locate import scan_recipes

    skipped = scan_recipes(user_dirs).skipped
    for file in skipped:
        ui.warn(f"skipped {file.path}: {file.why}")
    return skipped


@recipe_app.command("show", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe show",
    "flagtree-cpu recipe show flagtree-cpu-arm64 --workdir /data/ft",
    "flagtree-cpu recipe show ./my-recipe.yaml --raw",
    "flagtree-cpu recipe show my-recipe --variant cuda",
    "flagtree-cpu recipe show --set artifacts.llvm.url=https://mirror.example/llvm.tar.gz --json",
))
def recipe_show(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Argument(
        metavar="[NAME|PATH]", help="Recipe to show.  \\[default: the --recipe option]",
        autocompletion=completion.recipes)] = None,
    raw: Annotated[bool, typer.Option(
        "--raw", help="Show the recipe as written (placeholders and variants unresolved).")] = False,
) -> None:
    """Print a recipe as YAML, resolved for this workspace and host.

    Placeholders such as {workdir} and {artifacts.llvm.path} are filled in, and the
    artifact variant for this host is applied. Overrides given with --set are included, and the
    recipe's variant (--variant, else its default) is merged in; the header lists the others.
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

    _warn(ui, loaded, recipe_warnings(loaded))
    data = to_data(shown)
    variants = sorted(loaded.variants)
    if ui.json_mode:
        ui.emit_json({"file": loaded.file, "digest": loaded.digest, "resolved": resolved, "context": context,
                      "variant": loaded.variant, "variants": variants, "recipe": data})
        return
    import yaml

    header = f"# {loaded.name} from {loaded.file}\n# digest: sha256:{loaded.digest}\n# {context}\n"
    if loaded.variant is not None:
        header += f"# variant: {loaded.variant} (of {', '.join(variants)}; --variant NAME picks another)\n"
    ui.emit_text(header + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True))


def _warn(ui: UI, recipe: Recipe, warnings: Sequence[RecipeWarning], *, named: str = "") -> None:
    """A recipe's warnings on stderr; that it is an old schema version is the one-line upgrade notice. The pins a
    bundled recipe leaves open (a branch, an artifact without digest) are the project's choice, which the user
    cannot change in that file: one note, not a warning each. ``named``: the recipe (as `recipe list` names it)
    each line starts with, when several are checked."""
    from ..recipe.upgrade import note_upgraded

    note_upgraded(ui, recipe)
    prefix = f"{named}: " if named else ""
    open_pins = [w.key for w in warnings if _bundled(recipe) and w.message.startswith(_OPEN_PIN)]
    if open_pins:
        ui.info(f"note: {prefix}the bundled recipe leaves {', '.join(open_pins)} unpinned; the first sync or fetch "
                "records them in the workspace's lock file")
    for warning in warnings:
        if warning.key in open_pins or (warning.key == "schema_version" and recipe.upgraded_from is not None):
            continue
        ui.warn(f"{prefix}{warning.key}: {warning.message}")


_OPEN_PIN = ("no pinned commit:", "no digest:")  # recipe_warnings' words for a pin left to the lock file


def _bundled(recipe: Recipe) -> bool:
    from ..recipe.files import bundled_dir

    return bool(recipe.file) and Path(recipe.file).resolve().parent == bundled_dir("recipes").resolve()


@recipe_app.command("validate", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe validate my-recipe.yaml other.yaml",
    "flagtree-cpu recipe validate --all",
    "flagtree-cpu recipe validate my-recipe.yaml --variant cuda",
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
    each recipe and checked like the file itself. A recipe with variants is checked as
    its default and as each of its other variants (--variant: only that one).
    """
    from ..recipe.catalog import check_recipes, invalid
    from ..recipe.locate import user_recipe_dirs

    opts = options(ctx)
    user_dirs = user_recipe_dirs(opts.recipes_dirs)
    if all_recipes:
        _warn_skipped(opts.ui, user_dirs)
    checks = check_recipes(targets or [opts.recipe or _workspace_recipe(opts.workdir)], opts.overrides, user_dirs,
                           every=all_recipes, variant=opts.variant)
    for check in checks:
        if check.recipe is not None:
            from ..recipe.upgrade import note_upgraded

            note_upgraded(opts.ui, check.recipe)
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
            what = f"variant {check.variant} of recipe {loaded.name}" if check.variant else f"recipe {loaded.name}"
            opts.ui.success(f"{check.file}: {what} is valid ({count(len(loaded.sources), 'source')}, "
                            f"{count(len(loaded.artifacts), 'artifact')}, {count(links, 'link')}, "
                            f"{count(len(loaded.checks), 'check')})")
            several = all_recipes or len(checks) > 1
            _warn(opts.ui, loaded, check.warnings, named=Path(check.file).stem if several else "")
    failure = invalid(checks)
    if failure is not None:
        raise Verdict(failure)


def _workspace_recipe(workdir: str | None) -> str:
    """The recipe of the workspace -w names or the current folder is in (its record), else the default."""
    from ..recipe.locate import DEFAULT_RECIPE
    from ..workspace import located_workspace
    from ..workspace_recipe import recorded

    found = recorded(located_workspace(workdir))
    return found.recipe_arg if found is not None else DEFAULT_RECIPE


@recipe_app.command("schema", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe schema -o recipe.schema.json",
    "# first line of a recipe, for VS Code's YAML extension or any yaml-language-server client:",
    "# yaml-language-server: $schema=./recipe.schema.json",
))
def recipe_schema_cmd(
    ctx: typer.Context,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", metavar="FILE", dir_okay=False,
        help="Write the schema to FILE (replaced whole) instead of stdout.")] = None,
) -> None:
    """Print the recipe format as JSON Schema (draft 2020-12), for editors and CI.

    The schema is generated from the field specs the loader uses: what it rejects, `recipe validate` rejects.
    A few rules need the whole recipe, the file system or the bundled presets; only the loader checks those.
    """
    import json

    from ..atomic import write_atomic
    from ..errors import UsageError
    from ..recipe.json_schema import recipe_json_schema

    opts = options(ctx)
    schema = recipe_json_schema()
    if output is None:
        opts.ui.emit_json(schema)
        return
    try:
        write_atomic(output, json.dumps(schema, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write the schema to {output}: {exc.strerror or exc}",
                         fix=f"flagtree-cpu recipe schema -o ./recipe.schema.json  # or a folder you can write: "
                             f"{output.parent}") from exc
    opts.ui.success(f"wrote the recipe schema to {output}")
    if opts.ui.json_mode:
        opts.ui.emit_json({"file": str(output)})


@recipe_app.command("upgrade", cls=FlagtreeCommand, epilog=examples(
    "flagtree-cpu recipe upgrade my-recipe.yaml",
    "# the original stays as my-recipe.yaml.v2.bak (v1.bak for a version 1 file); compare, then delete it",
    "diff my-recipe.yaml.v2.bak my-recipe.yaml",
    "flagtree-cpu recipe upgrade my-recipe.yaml --stdout > my-recipe.v3.yaml",
    "flagtree-cpu recipe upgrade my-recipe.yaml --no-backup",
))
def recipe_upgrade(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(metavar="FILE", help="The recipe file to rewrite.")],
    to_stdout: Annotated[bool, typer.Option(
        "--stdout", help="Print the upgraded recipe instead of rewriting the file.")] = False,
    no_backup: Annotated[bool, typer.Option(
        "--no-backup", help="Do not keep the original as <file>.v<N>.bak next to it.")] = False,
) -> None:
    """Rewrite a schema version 1 or 2 recipe as version 3, keeping its comments.

    Sections the new version leaves alone are copied line for line; changed ones are
    rewritten with their comments kept above them. The result is read back and must be
    the very recipe the old file meant, or nothing is written. The original is kept as
    <file>.v<N>.bak (not a recipe name; N the old version) unless --no-backup. An invalid recipe is
    refused with its problems (exit code 2): fix it first, `recipe validate FILE` lists them.
    """
    from ..atomic import write_atomic
    from ..errors import FlagtreeCpuError, UsageError
    from ..recipe import loader
    from ..recipe.files import load_recipe_file, parse_recipe, patch_dirs
    from ..recipe.locate import find_recipe, user_recipe_dirs
    from ..recipe.model import SCHEMA_VERSION
    from ..recipe.schema import to_data
    from ..recipe.upgrade_text import UpgradeError, upgrade_text

    opts = options(ctx)
    if opts.overrides:
        raise UsageError("--set does not apply to `recipe upgrade`: it rewrites the file as written",
                         fix="edit the file, or upgrade it first and then use --set")
    user_dirs = user_recipe_dirs(opts.recipes_dirs)
    path = find_recipe(file, user_dirs).path
    old = load_recipe_file(path, user_dirs=user_dirs)  # an invalid recipe stops here (exit 2), before any write
    if old.upgraded_from is None:
        opts.ui.success(f"{path} is already schema version {old.schema_version}; nothing to do")
        if opts.ui.json_mode:
            opts.ui.emit_json({"file": str(path), "changed": False, "schema_version": old.schema_version})
        return
    text = loader.read_text(path)
    internal = (f"could not rewrite {path} as schema version {SCHEMA_VERSION} without changing what it means "
                "(a flagtree-cpu bug)")
    fix = "please report it with the file attached; the file was not changed"
    try:
        upgraded = upgrade_text(text)
        new = parse_recipe(upgraded, str(path), patch_dirs=patch_dirs(path), user_dirs=user_dirs)
    except (UpgradeError, FlagtreeCpuError) as exc:
        raise FlagtreeCpuError(internal, fix=fix, details=(str(getattr(exc, "message", exc)),)) from exc
    if to_data(new) != to_data(old):
        raise FlagtreeCpuError(internal, fix=fix, details=("the rewritten file reads as a different recipe",))
    if to_stdout:
        if opts.ui.json_mode:
            opts.ui.emit_json({"file": str(path), "changed": False, "schema_version": SCHEMA_VERSION, "text": upgraded})
        else:
            opts.ui.emit_text(upgraded)
        return
    target = path.resolve()  # a symlinked recipe: rewrite the file it points to, keep the link
    # not *.yaml: a backup in a recipes folder must not be listed as one more recipe
    backup = None if no_backup else target.with_name(f"{target.name}.v{old.upgraded_from}.bak")
    if backup is not None and os.path.lexists(backup) and not _holds(backup, text):
        raise UsageError(f"{backup} already exists (an earlier original?); not overwriting it",
                         fix="move it away, or pass --no-backup")
    mode = target.stat().st_mode & 0o7777
    if backup is not None:
        write_atomic(backup, text, mode=mode)
    write_atomic(target, upgraded, mode=mode)
    kept = f"; the original is {backup}" if backup is not None else ""
    opts.ui.success(f"{path}: rewritten as schema version {SCHEMA_VERSION}{kept}")
    if opts.ui.json_mode:
        opts.ui.emit_json({"file": str(path), "changed": True, "schema_version": SCHEMA_VERSION,
                           "backup": str(backup) if backup is not None else None})


def _holds(path: Path, text: str) -> bool:
    """Whether ``path`` is a regular file holding exactly ``text`` (a FIFO there is not read: it would block)."""
    from ..regular_file import read_regular

    data = text.encode()
    try:
        return read_regular(path, len(data)) == data
    except OSError:
        return False
