"""Loading a recipe: overrides, validation, the recipe it is stacked on.

``load_recipe("flagtree-cpu-arm64", overrides)`` finds the file (``locate``: a user folder hides a
bundled recipe of the same name), parses it with positions (``loader``), applies ``--set``
overrides (``overrides``), checks the schema version, converts it to ``model.Recipe``
(``schema``) and raises one ``RecipeError`` listing every problem.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import RecipeError, RecipeNotFound, RecipeProblem, RecipeWarning
from . import loader
from . import schema as rs
from .input_digest import inputs_digest
from .loader import LoadedData, format_path
from .locate import (  # noqa: F401  (re-exported: where recipes live is part of loading them)
    DEFAULT_RECIPE,
    RECIPES_ENV,
    RecipeRef,
    RecipeScan,
    SkippedFile,
    bundled_dir,
    find_base,
    find_recipe,
    list_recipes,
    scan_recipes,
    user_recipe_dirs,
)
from .model import SCHEMA_VERSION, SUPPORTED_VERSIONS, Recipe, for_variant
from .overrides import apply_override
from .schema import Context, suggest

# --- loading -------------------------------------------------------------------------------

MAX_STACK = 8  # recipes in one stack (`extends`): FlagGems on FlagTree is two
# How many entries a recipe may hold where loading compares entries with each other or does work per entry:
# `recipe validate` loads a recipe once per variant (3,000 one-line variants took 11 minutes); sources are
# checked pairwise and along `inside` chains (1,500 nested ones overflowed the recursion); every placeholder is
# checked against every source's, artifact's and toolchain's names (8,000 artifacts: 72 s). Checked before any
# of that work; the bundled recipes hold at most 5 of each.
LIMITS = {"variants": 32, "sources": 64, "artifacts": 64, "toolchains": 64, "builds": 32}
MAX_SHOWN = 100  # problems listed in one error


def load_recipe(name_or_path: str, overrides: Sequence[str] = (),
                user_dirs: Sequence[Path] = (), variant: str | None = None) -> Recipe:
    ref = find_recipe(name_or_path, user_dirs)
    return load_recipe_file(ref.path, overrides, variant, user_dirs=user_dirs)


def load_recipe_file(path: Path, overrides: Sequence[str] = (), variant: str | None = None, *,
                     user_dirs: Sequence[Path] = (), stacked_on_by: tuple[str, ...] = ()) -> Recipe:
    try:
        text = loader.read_text(path)
    except UnicodeDecodeError as exc:
        problem = RecipeProblem(str(path), loader.utf8_error_line(exc), "",
                                f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x})",
                                "save the file as UTF-8, or retype the character on that line")
        raise RecipeError(str(path), [problem], fix="save the recipe as UTF-8 text") from exc
    except OSError as exc:  # missing, unreadable, or not a regular file (a FIFO is refused, never waited on)
        raise RecipeNotFound(f"cannot read recipe {path}: {exc.strerror or exc}",
                             fix="check the file exists and is readable UTF-8 text") from exc
    return parse_recipe(text, str(path), overrides, patch_dirs=patch_dirs(path), variant=variant,
                        user_dirs=user_dirs, stacked_on_by=stacked_on_by)


def load_base(recipe: Recipe, user_dirs: Sequence[Path] = (), stacked_on_by: tuple[str, ...] = ()) -> Recipe:
    """The recipe ``recipe`` is stacked on, as its own file says (its default variant, no overrides)."""
    assert recipe.extends is not None
    ref = find_base(recipe.extends, recipe.file, user_dirs)
    return load_recipe_file(ref.path, user_dirs=user_dirs, stacked_on_by=(*stacked_on_by, recipe.file))


def patch_dirs(recipe_file: str | Path) -> list[Path]:
    """Where a recipe's patch names are looked up: beside the recipe, then the bundled ones."""
    path = Path(recipe_file)
    return _unique([path.parent / "patches", path.parent.parent / "patches", bundled_dir("patches")])


def parse_recipe(text: str, origin: str, overrides: Sequence[str] = (),
                 patch_dirs: Sequence[Path] = (), variant: str | None = None, *,
                 user_dirs: Sequence[Path] = (), stacked_on_by: tuple[str, ...] = ()) -> Recipe:
    """Validate a recipe text (plus overrides) as its variant ``variant`` (default: the recipe's own
    default); raises RecipeError listing every problem. A version 1 recipe is upgraded in memory first."""
    loaded = loader.load(text, origin)
    for assignment in overrides:
        apply_override(loaded, assignment)
    if loaded.problems:
        raise RecipeError(origin, loaded.problems, fix=_yaml_fix(origin, loaded))
    data = loaded.data
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}, not a mapping"
        line = loaded.position(()).line
        start = f"start from `flagtree-cpu recipe show {DEFAULT_RECIPE} --raw`"
        raise RecipeError(origin, [RecipeProblem(origin, line, "", f"the recipe is {what}", start)],
                          fix=f"{start}, which prints the bundled recipe to copy and edit")
    version_problem = _schema_version_problem(data, loaded)
    if version_problem:
        raise RecipeError(origin, [version_problem])
    upgraded_from = None
    if data["schema_version"] != SCHEMA_VERSION:
        from .upgrade import to_current, upgrade_positions

        upgraded_from = data["schema_version"]
        if upgraded_from == 1:
            loaded.positions = upgrade_positions(loaded.positions, data)  # problems still name the v1 line
        data = to_current(data)
    data = _apply_variant(data, loaded, origin, variant)
    too_many = _too_many(data, loaded)
    if too_many:
        raise RecipeError(origin, too_many, fix="keep a recipe to the few entries a build needs")
    base_problem = _inherit_from_base(data, loaded, origin, user_dirs, stacked_on_by)
    if base_problem:
        raise RecipeError(origin, [base_problem], fix=f"correct `extends` in {origin} as said above")

    ctx = Context(
        facts={
            "sources": _mapping_keys(data.get("sources")),
            "artifacts": _mapping_keys(data.get("artifacts")),
            "toolchains": _mapping_keys(data.get("toolchains")),
            "variants": _mapping_keys(data.get("variants")),
            "host_arches": _host_arches(data),
            "patch_dirs": tuple(patch_dirs),
        },
        raw_text={p: pos.raw for p, pos in loaded.positions.items() if pos.raw is not None},
        override_paths=[p for p, pos in loaded.positions.items() if pos.from_override],
    )
    recipe = rs.convert(data, Recipe, ctx)
    if ctx.problems:
        from .upgrade import moved_key_problem

        problems = []
        for problem in ctx.problems:
            pos = loaded.position(problem.path)
            message, fix = problem.message, problem.fix
            if upgraded_from != 1 and message.startswith("unknown key "):  # a version 1 name in a v2/v3 file?
                message, fix = moved_key_problem(problem.path, data) or (message, fix)
            problems.append(RecipeProblem(pos.origin, pos.line, format_path(problem.path), message, fix))
        problems.sort(key=lambda p: (p.origin != origin, p.line or 0))
        error = RecipeError(origin, _shown(problems))
        error.message = f"recipe {origin} has {len(problems)} problem{'' if len(problems) == 1 else 's'}"
        raise error
    # a variant's checks are its own: several may share a name across variants (model._check_names)
    recipe = replace(recipe, checks=for_variant(recipe.checks, recipe.variant))
    canonical = json.dumps(rs.to_data(recipe), sort_keys=True, separators=(",", ":"))
    return replace(recipe, file=origin, digest=hashlib.sha256(canonical.encode()).hexdigest(),
                   inputs_digest=inputs_digest(recipe), upgraded_from=upgraded_from)


def _inherit_from_base(data: dict[str, Any], loaded: LoadedData, origin: str, user_dirs: Sequence[Path],
                       stacked_on_by: tuple[str, ...]) -> RecipeProblem | None:
    """A stacked recipe (``extends``) must name a recipe that loads; without a ``platform`` (``system_packages``)
    of its own it builds where (with what) its base builds, so the base's are copied in before validation."""
    extends = data.get("extends")
    if not isinstance(extends, str) or not extends:
        return None  # a wrong type is the schema's to report
    line = loaded.position(("extends",)).line
    try:
        ref = find_base(extends, origin, user_dirs)
        stacking = _stacking_problem(ref.path, (*stacked_on_by, origin))
        if stacking is not None:
            return _StackProblem(origin, line, "extends", *stacking)
        base = load_recipe_file(ref.path, user_dirs=user_dirs, stacked_on_by=(*stacked_on_by, origin))
    except RecipeNotFound as exc:
        return RecipeProblem(origin, line, "extends", f"the base recipe cannot be found: {exc.message}",
                             exc.fix or "name a recipe from `flagtree-cpu recipe list`, or a recipe file")
    except RecipeError as exc:
        first = exc.problems[0] if exc.problems else None
        if isinstance(first, _StackProblem):  # its chain starts at the recipe asked for: say it once, here
            return _StackProblem(origin, line, "extends", first.message, first.fix)
        said = f": line {first.line} {first.key + ': ' if first.key else ''}{first.message}" if first else ""
        more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        return RecipeProblem(origin, line, "extends", f"the base recipe {ref.path} is not valid{said}{more}",
                             f"run `flagtree-cpu recipe validate {ref.path}`")
    for key in ("platform", "system_packages"):  # it builds where, and with what, its base builds
        if key not in data:
            data[key] = rs.to_data(getattr(base, key))
    return None


class _StackProblem(RecipeProblem):
    """A circle or a stack too deep: found in a base, it is the stacked recipe's problem as it stands."""


def _shown(problems: list[RecipeProblem]) -> list[RecipeProblem]:
    """The first ``MAX_SHOWN`` problems and a line counting the rest: a hostile file can hold tens of thousands,
    and 20,000 unknown placeholders were 115 MB of messages."""
    if len(problems) <= MAX_SHOWN:
        return problems
    rest = len(problems) - MAX_SHOWN
    return [*problems[:MAX_SHOWN], RecipeProblem(problems[0].origin, None, "", f"and {rest:,} more problems like "
                                                 "those above, not shown", "correct those shown and validate again")]


def _too_many(data: dict[str, Any], loaded: LoadedData) -> list[RecipeProblem]:
    problems = []
    for key, limit in LIMITS.items():
        entries = data.get(key)
        if isinstance(entries, dict) and len(entries) > limit:
            pos = loaded.position((key,))
            problems.append(RecipeProblem(pos.origin, pos.line, key, f"{len(entries)} {key}; a recipe has at most "
                                          f"{limit}", "split it into recipes stacked with `extends`"))
    return problems


def _stacking_problem(base: Path, chain: tuple[str, ...]) -> tuple[str, str] | None:
    """Why ``base`` cannot be loaded under the recipes of ``chain`` (each stacked on the next): it is one of
    them — compared as real paths, so ``../d/a.yaml``, ``./a.yaml``, an absolute path and a symlink are all the
    file they lead to — or the stack is deeper than any real one."""
    shown = " -> ".join([*chain, str(base)])
    real = os.path.realpath(base)
    for file in chain:
        if os.path.realpath(file) == real:
            same = "" if str(base) == file else f"; {base} is {file}"
            return (f"the recipes extend each other in a circle ({shown}{same})",
                    "a recipe cannot extend itself, nor a recipe stacked on it: name the base it builds on")
    if len(chain) >= MAX_STACK:
        return (f"recipes are stacked more than {MAX_STACK} deep ({shown}); flagtree-cpu follows `extends` "
                f"{MAX_STACK} times at most", "stack the recipe on the one it builds on directly")
    return None


def _apply_variant(data: dict[str, Any], loaded: LoadedData, origin: str, asked: str | None) -> dict[str, Any]:
    """The recipe with its chosen variant's overlay merged in; ``variant`` names the one chosen.

    The overlay's keys keep their own file lines, so a mistake inside a variant is reported where it
    is written."""
    variants = data.get("variants")
    chosen = asked if asked is not None else data.get("variant")
    if chosen is None:
        return data
    if not isinstance(variants, dict) or chosen not in variants:
        names = sorted(k for k in variants if isinstance(k, str)) if isinstance(variants, dict) else []
        if asked is None:
            return data  # the default names no variant: the validator reports it at `variant:`
        # the option asked for a name the file does not have: the user's mistake on the command line, not the file's
        from ..errors import UsageError

        have = ", ".join(names) or "none (the recipe has no variants)"
        raise UsageError(f"--variant {asked}: recipe {origin} has no variant {asked!r}{suggest(asked, names)}",
                         fix=f"use --variant with one of: {have} (or leave --variant out for the recipe's default)")
    entry = variants[chosen]
    overlay = entry.get("overlay") if isinstance(entry, dict) else None
    merged = dict(data)
    if isinstance(overlay, dict):
        base_path = ("variants", chosen, "overlay")
        keep = frozenset(p for p, pos in loaded.positions.items() if pos.from_override)
        for path, pos in list(loaded.positions.items()):
            if path[:3] == base_path and len(path) > 3 and path[3:] not in keep:
                loaded.positions[path[3:]] = pos
        merged = _deep_merge(merged, overlay, keep)
    merged["variant"] = chosen
    return merged


def _deep_merge(base: Any, overlay: Any, keep: frozenset[tuple[Any, ...]] = frozenset(),
                path: tuple[Any, ...] = ()) -> Any:
    """Mappings merge key by key; anything else replaces; a null in the overlay removes the key. Paths in
    ``keep`` (what --set gave) keep the base's value: the command line has the last word."""
    if path in keep:
        return base
    if not (isinstance(base, dict) and isinstance(overlay, dict)):
        return overlay
    out = dict(base)
    for key, value in overlay.items():
        if path + (key,) in keep:
            continue
        if value is None:
            out.pop(key, None)
        elif key in out:
            out[key] = _deep_merge(out[key], value, keep, path + (key,))
        else:
            out[key] = value
    return out


def _host_arches(data: dict[str, Any]) -> tuple[str, ...]:
    host = (data.get("platform") or {}).get("host") if isinstance(data.get("platform"), dict) else None
    arches = host.get("arch") if isinstance(host, dict) else None
    return tuple(a for a in arches if isinstance(a, str)) if isinstance(arches, list) else ()


def recipe_variants(recipe: Recipe) -> list[str]:
    """Every variant name, the default first."""
    return sorted(recipe.variants, key=lambda name: (name != recipe.variant, name))


def _yaml_fix(origin: str, loaded: LoadedData) -> str | None:
    """The closing advice when the loader itself found problems: those are about YAML, not keys."""
    if not any(p.origin == origin for p in loaded.problems):
        return None  # only --set arguments are wrong: the usual advice about keys fits
    first = next(p for p in loaded.problems if p.origin == origin)
    return (f"fix the YAML near {first.where} (and any other line listed above), then check it again "
            f"with `flagtree-cpu recipe validate {origin}`")


def _schema_version_problem(data: dict[str, Any], loaded: LoadedData) -> RecipeProblem | None:
    pos = loaded.position(("schema_version",))
    if "schema_version" not in data:
        return RecipeProblem(pos.origin, pos.line, "schema_version", "missing required key "
                             "'schema_version'", f"add `schema_version: {SCHEMA_VERSION}` as the "
                             "first line")
    version = data["schema_version"]
    if version not in SUPPORTED_VERSIONS or isinstance(version, bool):
        from .. import __version__

        return RecipeProblem(pos.origin, pos.line, "schema_version",
                             f"schema_version {version!r} is not supported by flagtree-cpu "
                             f"{__version__}, which reads versions 1 to {SCHEMA_VERSION}",
                             "upgrade flagtree-cpu (pip install -U flagtree-cpu) if the recipe is "
                             f"newer, or rewrite it for version {SCHEMA_VERSION}")
    return None


def _mapping_keys(value: Any) -> frozenset[str]:
    return frozenset(k for k in value if isinstance(k, str)) if isinstance(value, dict) else frozenset()


def _unique(paths: Iterable[Path]) -> list[Path]:
    seen: list[Path] = []
    for p in paths:
        if p not in seen:
            seen.append(p)
    return seen


def recipe_warnings(recipe: Recipe) -> list[RecipeWarning]:
    """Things that are allowed but weaken reproducibility."""
    warnings = []
    for name, source in recipe.sources.items():
        if source.commit is not None or source.commit_from is not None:  # a commit read from a pinned file is one
            continue
        if source.ref_from is not None:
            warnings.append(RecipeWarning(f"sources.{name}", f"no pinned commit: the branch or tag "
                                          f"{source.ref_from.source}'s {source.ref_from.file} names is resolved at "
                                          "the first sync and recorded in the lock file"))
        else:
            warnings.append(RecipeWarning(f"sources.{name}", f"no pinned commit: {source.ref!r} is "
                                          "resolved at the first sync and recorded in the lock file"))
    for name, artifact in recipe.artifacts.items():
        if not artifact.expected_digests():
            warnings.append(RecipeWarning(f"artifacts.{name}", "no digest: trusted on first "
                                          "download and its sha256 recorded in the lock file"))
    warnings += _contradictions(recipe)
    if recipe.upgraded_from is not None:
        warnings.append(RecipeWarning("schema_version", f"schema version {recipe.upgraded_from}, read as version "
                                      f"{SCHEMA_VERSION}; `flagtree-cpu recipe upgrade {recipe.file}` rewrites it"))
    return warnings


def _contradictions(recipe: Recipe) -> list[RecipeWarning]:
    """Requirements no version can satisfy together with a constraint of the same name. A warning here (`recipe
    validate` shows it); the stage that would install the requirement refuses it with exit 2, before pip."""
    from ..versions import cannot_meet_both, parsed, same_name

    found = []
    for key in ("build", "runtime", "preinstalled"):
        for i, requirement in enumerate(getattr(recipe.python, key)):
            mine = parsed(requirement.requirement)
            for constraint in recipe.python.constraints:
                if mine is not None and same_name(constraint.requirement, mine.name) and \
                        cannot_meet_both(requirement.requirement, constraint.requirement):
                    found.append(RecipeWarning(f"python.{key}[{i}]", f"{requirement.requirement} cannot be met "
                                               f"together with the constraint {constraint.requirement}: the stage "
                                               "that installs it will refuse it"))
    return found

