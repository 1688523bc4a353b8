"""Where recipes live, and which file a recipe name (or an ``extends``) means.

Bundled recipes ship with the tool; user recipes sit in the folders ``--recipes-dir`` and ``FLAGTREE_CPU_RECIPES``
name, and a user recipe hides a bundled one of the same name. Every command resolves names here — ``--recipe``,
``recipe validate NAME``, ``recipe list``, and a stacked recipe's ``extends`` — so a base one command finds, every
command finds.

A folder of recipes may hold what is not a file: a FIFO (reading it waits forever), a socket, a symlink to
/dev/zero. The first file of a name takes the name; when it is such a thing it is never opened: listings skip it
(``RecipeScan.skipped``, which the CLI shows as warnings) and naming it is a usage error that names the file.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ..errors import RecipeNotFound
from ..regular_file import special_kind
from .schema import suggest

DEFAULT_RECIPE = "flagtree-cpu-arm64"
RECIPES_ENV = "FLAGTREE_CPU_RECIPES"  # extra recipe folders, os.pathsep-separated


def bundled_dir(kind: Literal["recipes", "patches"]) -> Path:
    """The folder of bundled recipes or patches.

    In a wheel they are package data (``flagtree_cpu_build/recipes``); in a source
    checkout or editable install they sit at the top of the repository.
    """
    package = Path(__file__).resolve().parent.parent  # flagtree_cpu_build/, above this recipe/ package
    for candidate in (package / kind, package.parent / kind):
        if candidate.is_dir():
            return candidate
    return package / kind


@dataclass(frozen=True)
class RecipeRef:
    name: str
    path: Path
    origin: Literal["bundled", "user", "file"]
    shadows: Path | None = None  # a bundled recipe of the same name this one hides


@dataclass(frozen=True)
class SkippedFile:
    """A file in a recipes folder that is not a regular file, and so is never read."""

    path: Path
    kind: str  # "a FIFO (named pipe)", "a symlink to /dev/zero, which is a character device"

    @property
    def why(self) -> str:
        return f"it is {self.kind}, not a regular file; flagtree-cpu reads recipes only from regular files"

    def to_json(self) -> dict[str, str]:
        return {"file": str(self.path), "why": self.why}


@dataclass(frozen=True)
class RecipeScan:
    """Every recipe by name, and the files of the recipe folders that were skipped."""

    refs: list[RecipeRef]
    skipped: list[SkippedFile] = field(default_factory=list)


def user_recipe_dirs(extra: Sequence[str | Path] = (), environ: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if environ is None else environ
    dirs = [Path(d).expanduser() for d in extra]
    dirs += [Path(d).expanduser() for d in env.get(RECIPES_ENV, "").split(os.pathsep) if d]
    return dirs


def scan_recipes(user_dirs: Sequence[Path] = ()) -> RecipeScan:
    """The user folders in order, then the bundled recipes: the first file of a name takes it."""
    first: dict[str, RecipeRef | SkippedFile] = {}
    for folder in user_dirs:
        for file in sorted(folder.glob("*.y*ml")) if unusable_folder(folder) is None else ():
            if file.stem not in first and not _old_upgrade_backup(file):
                first[file.stem] = _skipped(file) or RecipeRef(file.stem, file, "user")
    for file in sorted(bundled_dir("recipes").glob("*.yaml")):
        taken = first.get(file.stem)
        if taken is None:
            first[file.stem] = _skipped(file) or RecipeRef(file.stem, file, "bundled")
        elif isinstance(taken, RecipeRef):
            first[file.stem] = replace(taken, shadows=file)
    refs = sorted((r for r in first.values() if isinstance(r, RecipeRef)), key=lambda r: r.name)
    return RecipeScan(refs, [s for s in first.values() if isinstance(s, SkippedFile)])


def _old_upgrade_backup(file: Path) -> bool:
    """``my-recipe.v1.yaml`` next to ``my-recipe.yaml``: the original an older `recipe upgrade` kept (it now
    writes ``my-recipe.yaml.v1.bak``). It is the same recipe as before the upgrade, not one more to list."""
    base = file.stem.removesuffix(".v1")
    return base != file.stem and any((file.parent / f"{base}{ext}").is_file() for ext in (".yaml", ".yml"))


def unusable_folder(folder: Path) -> str | None:
    """Why a recipes folder (--recipes-dir, FLAGTREE_CPU_RECIPES) holds no recipes, or None when it is a folder."""
    try:
        return None if folder.is_dir() else "is not a folder" if folder.exists() else "does not exist"
    except OSError as exc:  # a name too long for the file system, a folder that cannot be searched
        return f"cannot be read ({exc.strerror or exc})"


def _skipped(file: Path) -> SkippedFile | None:
    try:
        kind = special_kind(file)
    except OSError:
        return None  # a dangling link or an unreadable entry: loading it says so, in the listing's row
    return SkippedFile(file, kind) if kind is not None else None


def list_recipes(user_dirs: Sequence[Path] = ()) -> list[RecipeRef]:
    """Every recipe by name; a user recipe hides a bundled one of the same name."""
    return scan_recipes(user_dirs).refs


def find_recipe(name_or_path: str, user_dirs: Sequence[Path] = ()) -> RecipeRef:
    """The recipe a name from `recipe list`, or a YAML file's path, means."""
    candidate = Path(name_or_path).expanduser()
    looks_like_path = "/" in name_or_path or candidate.suffix in (".yaml", ".yml")
    if looks_like_path or _is_file(candidate):
        return _file_ref(name_or_path, candidate)
    scan = scan_recipes(user_dirs)
    known = {r.name: r for r in scan.refs}
    if name_or_path in known:
        return known[name_or_path]
    for skipped in scan.skipped:
        if skipped.path.stem == name_or_path:
            raise RecipeNotFound(f"recipe {name_or_path!r} is {skipped.path}: {skipped.why}",
                                 fix=f"put the recipe's YAML text in {shlex.quote(str(skipped.path))} (remove what "
                                 "is there first), or name another recipe")
    raise RecipeNotFound(
        f"no recipe named {name_or_path!r}{suggest(name_or_path, known)}",
        fix=f"`flagtree-cpu recipe list` shows the recipes ({', '.join(known) or 'none found'}); "
        f"add folders with --recipes-dir or {RECIPES_ENV}",
    )


def _is_file(path: Path) -> bool:
    """Whether a bare name (``my-recipe``) is a file here; a name no file can have (too long, a NUL) is not."""
    try:
        return special_kind(path) is None
    except OSError:
        return False


def _file_ref(given: str, path: Path) -> RecipeRef:
    """A recipe given as a file, checked to be one without opening it (a FIFO would block the open)."""
    try:
        kind = special_kind(path)
        if path.is_dir():
            raise RecipeNotFound(f"cannot read recipe {given}: it is a folder, not a YAML file",
                                 fix="give the recipe file inside it, or add the folder with --recipes-dir")
    except FileNotFoundError:
        raise RecipeNotFound(f"recipe file {given} does not exist",
                             fix="check the path, or give a recipe name from `flagtree-cpu recipe list`") from None
    except OSError as exc:
        raise RecipeNotFound(f"cannot read recipe {given}: {exc.strerror or exc}",
                             fix="check the file exists and is readable UTF-8 text") from None
    if kind is not None:
        raise RecipeNotFound(f"cannot read recipe {given}: it is {kind}, not a regular file",
                             fix="save the recipe to a file and give its path")
    return RecipeRef(path.stem, path, "file")


def find_base(extends: str, recipe_file: str, user_dirs: Sequence[Path] = ()) -> RecipeRef:
    """The recipe ``extends`` names: a recipe name, or a file (relative to the stacked recipe's folder)."""
    looks_like_path = "/" in extends or extends.endswith((".yaml", ".yml"))
    if looks_like_path and not Path(extends).expanduser().is_absolute() and recipe_file:
        return find_recipe(str(Path(recipe_file).parent / extends), user_dirs)
    return find_recipe(extends, user_dirs)
