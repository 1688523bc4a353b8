"""Which recipe a command uses on a workspace: the one the command line names, else the one the workspace records.

The rules (issue 28; west keeps a workspace's manifest in `.west/config` the same way):
- no --recipe / --variant / --lock-file on the command line: the workspace's record supplies them;
- a different recipe *name* than the record's is refused (exit 2), naming both and the two ways forward; nothing
  is read from or written to the workspace first;
- the same name with another file digest or path (the user edited or moved their recipe) is that recipe: allowed,
  and the next command that changes the workspace records the new digest;
- a different *variant* is refused the same way. A variant may select other sources, artifacts and toolchains, so
  a switch in place would re-resolve the lock and build over the other variant's products, the silent rewrite
  this refuses (as a different recipe would); a workspace per variant costs disk only and keeps both;
- a recipe of the same stack is not another recipe: a recipe stacked on the recorded one (FlagGems on FlagTree)
  shares its workspace and interpreter and becomes the record (the workspace now holds the stack); a base of the
  recorded recipe may still be run there and leaves the record as it is;
- --lock-file given: used, and recorded by the next command that changes the workspace (a lock moved next to a
  CI config is still this workspace's lock).
A workspace made before records has none; its lock (when there is one) still names its recipe, which is then
used and compared the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import FlagtreeCpuError, OtherRecipe
from .invocation import Invocation
from .recipe.locate import DEFAULT_RECIPE
from .workspace import STATE_DIRNAME, Workspace, default_workdir
from .workspace_record import WorkspaceRecord, read_record

if TYPE_CHECKING:
    from .recipe import Recipe



@dataclass(frozen=True)
class Recorded:
    """What an existing workspace says it is for: its record, or (made before records) its lock's recipe name."""

    recipe: str  # the name
    recipe_arg: str  # what loads it again
    variant: str | None
    lock_file: str | None
    record: WorkspaceRecord | None  # None: read from a lock of a workspace made before records
    where: Path  # the file that says so


def recorded(root: Path | None) -> Recorded | None:
    """What the workspace at ``root`` records; None for a new workspace (or none found)."""
    if root is None or not root.is_dir():  # none yet, or a file (open_workspace refuses it, saying so)
        return None
    state = root / STATE_DIRNAME
    record = read_record(state)
    if record is not None:
        return Recorded(record.recipe, record.recipe_arg, record.variant, record.lock_file, record,
                        state / "workspace.json")
    from .lockfile import read_lock

    lock = read_lock(state / "lock.yaml") if (state / "lock.yaml").exists() else None
    if lock is None:
        return None
    return Recorded(lock.recipe, lock.recipe, lock.variant, None, None, state / "lock.yaml")


def stacked_with(loaded: Recipe, found: Recorded | None, bases: Callable[[Recipe], list[str]],
                 load_recorded: Callable[[], Recipe]) -> str | None:
    """How ``loaded`` shares the workspace with its recorded recipe as one stack (FlagGems on FlagTree: one
    workspace, one interpreter, a lock each): "above" when ``loaded`` stacks on the recorded recipe, "below"
    when it is one of the recorded recipe's bases; None when neither (or the same recipe). ``bases(recipe)``
    names a recipe's bases (``extends``, followed down); the recorded recipe is loaded only when asked about."""
    if found is None or loaded.name == found.recipe:
        return None
    try:
        if found.recipe in bases(loaded):
            return "above"
        return "below" if loaded.name in bases(load_recorded()) else None
    except FlagtreeCpuError:  # a base that cannot be read now: no stack to be part of
        return None


def refuse_another(loaded: Recipe, found: Recorded | None, ws: Workspace, command: tuple[str, ...],
                   stacked: str | None = None) -> None:
    """A recipe or variant other than the one the workspace was set up with, and not of its stack: exit 2, with
    both ways forward."""
    if found is None or stacked is not None:
        return
    if loaded.name == found.recipe and (found.variant is None or loaded.variant == found.variant):
        return
    other_variant = loaded.name == found.recipe
    theirs = f"recipe {loaded.name}" + (f" variant {loaded.variant}" if other_variant else "")
    mine = f"recipe {found.recipe}" + (f" variant {found.variant}" if other_variant else "")
    words = list(command) or ["status"]
    keep = Invocation(ws.root, _shown(found.recipe_arg), found.variant,
                      Path(found.lock_file) if found.lock_file else None).command(*words)
    fresh_root = ws.root.parent / default_workdir(loaded.name if not other_variant else
                                              f"{loaded.name}-{loaded.variant}")
    fresh = Invocation(fresh_root, _shown(_recipe_arg(loaded)), loaded.variant if loaded.variants else None
                       ).command(*words)
    raise OtherRecipe(
        f"the workspace {ws.root} is set up for {mine}, and this command names {theirs}: using it there would "
        f"rewrite the workspace's lock, checkouts and builds for {theirs}; nothing was changed",
        details=(f"recorded in {found.where}",),
        fix=f"use the workspace's own {mine}: {keep}\n     or set up {theirs} in a workspace of its own: {fresh}")


def _shown(recipe_arg: str) -> str | None:
    """--recipe as printed: none for the default recipe (every command's default)."""
    return None if recipe_arg == DEFAULT_RECIPE else recipe_arg


def _recipe_arg(recipe: Recipe) -> str:
    """What loads ``recipe`` again from any folder: its name when it is a bundled one, else its file."""
    from .recipe.locate import bundled_dir

    return recipe.name if _is_bundled(recipe, bundled_dir("recipes")) else os.path.abspath(recipe.file)


def _is_bundled(recipe: Recipe, folder: Path) -> bool:
    return bool(recipe.file) and Path(recipe.file).resolve().parent == folder.resolve() \
        and Path(recipe.file).stem == recipe.name


def record_of(loaded: Recipe, lock_file: Path | None) -> WorkspaceRecord:
    """The record a workspace set up with ``loaded`` gets."""
    from .digest import hash_file
    from .recipe.locate import bundled_dir

    bundled = _is_bundled(loaded, bundled_dir("recipes"))
    return WorkspaceRecord(loaded.name, hash_file(Path(loaded.file)), "bundled" if bundled else "file",
                           os.path.abspath(loaded.file), loaded.variant,
                           str(lock_file) if lock_file is not None else None)


def invocation_of(loaded: Recipe, ws: Workspace) -> Invocation:
    """The options that reproduce this run's context (``invocation``), for the commands it prints."""
    arg = _recipe_arg(loaded)
    return Invocation(ws.root, _shown(arg), loaded.variant if loaded.variants else None, ws.lock_path,
                      portable_recipe=portable_recipe(loaded))


def portable_recipe(recipe: Recipe) -> str:
    """--recipe as another machine is told it: a bundled recipe's name, else its file's name (this machine's
    path means nothing there; the file goes along, or comes in a bundle)."""
    arg = _recipe_arg(recipe)
    return arg if arg == recipe.name else Path(arg).name
