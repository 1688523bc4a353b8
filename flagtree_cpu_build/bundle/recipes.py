"""The recipe a bundle carries, used on a board that does not have it (issue 28, section 1).

A bundle made from a user's recipe FILE carries that file (``recipes/<name>.yaml``); the board has no file of that
name, so `--recipe sleefdemo` there fails ("no recipe named"). `bundle import` on a workspace that records no recipe
(given no --recipe, or the bundle's recipe by name) verifies the bundle, extracts the recipe files it carries into
``<workspace>/.flagtree-cpu/recipes/``, and opens the workspace with that file: the workspace records it (origin
"file"), so every later command on the workspace uses it without being told.

A bundle is hostile input: its recipe members are named by a manifest already checked (one folder, one plain file
name: ``manifest.name_problem``), each is at most ``MAX_RECIPE_BYTES`` (checked against the manifest before
extracting, and the extraction writes no more than the manifest says), hashed again as written, and written only
into the workspace's recipes folder. A bundled recipe of this tool (same name, same bytes) is used by name, as
before. An import that fails afterwards removes what this module wrote (``Carried.undo``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..digest import hash_file
from ..invocation import elsewhere
from ..partials import PartialFolder
from ..workspace import STATE_DIRNAME, default_workdir, located_workspace
from .errors import BundleDamaged
from .manifest import Manifest, Member

if TYPE_CHECKING:
    from ..context import ContextRequest
    from ..ui import UI
    from .trust import Authenticity, Trust

MAX_RECIPE_BYTES = 1 << 20  # a recipe is a few KiB; a bundled "recipe" of gigabytes is refused before extracting
RECIPES_DIRNAME = "recipes"


@dataclass
class Carried:
    """What ``with_carried_recipe`` decided: the request to open the context with, the bundle as verified (so it
    is not read a second time), and how to take back the files it wrote when the import then fails."""

    request: ContextRequest
    checked: tuple[Manifest, Authenticity] | None = None
    written: list[Path] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)  # folders it created, deepest last

    @contextlib.contextmanager
    def undone_on_failure(self) -> Iterator[None]:
        """Whatever stops the block (a refused import, Ctrl-C) takes back the recipe files written for it."""
        try:
            yield
        except BaseException:
            self.undo()
            raise

    def undo(self) -> None:
        """Remove the recipe files written, and the folders made for them once nothing else is in them."""
        for path in self.written:
            path.unlink(missing_ok=True)
        for folder in reversed(self.made):
            _remove_if_only(folder, {"workspace.lock", "workspace.json"} if folder.name == STATE_DIRNAME else set())


def with_carried_recipe(request: ContextRequest, path: Path, ui: UI, trust: Trust,
                        verify: Callable[[Path, UI, Trust], tuple[Manifest, Authenticity]]) -> Carried:
    """``request`` completed with the recipe ``path`` carries, when the workspace records none and the command
    line names none (or the bundle's by name); else ``request`` unchanged (the bundle is then read once, later)."""
    from ..workspace_recipe import recorded

    root = located_workspace(request.workdir)
    if recorded(root) is not None or (request.recipe is not None and (_names_a_file(request.recipe)
                                                                      or _bundled(request.recipe).is_file())):
        return Carried(request)  # the workspace's recipe, a file, or one of this tool's: as before
    manifest, authenticity = verify(path, ui, trust)  # nothing is written before the whole file verified
    checked = (manifest, authenticity)
    if request.recipe is not None and request.recipe != manifest.recipe:
        return Carried(request, checked)  # another recipe: refused as before (fit.check_made_for)
    top = _top_recipe(manifest, path)
    own = _bundled(manifest.recipe)
    if own.is_file() and (top is None or hash_file(own) == top.sha256):  # this tool's recipe, byte for byte
        return Carried(replace(request, recipe=manifest.recipe, variant=request.variant or manifest.variant),
                       checked)
    if top is None:  # a bundle without recipe files (made by hand): the recipe is looked for by name, as before
        return Carried(request, checked)
    root = root or Path.cwd() / default_workdir(manifest.recipe)
    carried = Carried(request, checked)
    with carried.undone_on_failure():
        recipe_file = _extract(path, manifest, top, root, carried)
    carried.request = replace(request, recipe=str(recipe_file), workdir=str(root),
                              variant=request.variant or manifest.variant)
    return carried


def board_commands(manifest: Manifest, bundle: str) -> str:
    """What to run on the machine without network, where the bundle file ``bundle`` lies in the current folder:
    a bundled recipe by its name (as the board's flagtree-cpu has it); a recipe file through the workspace the
    import records it in (the board has no such file until the bundle brings it)."""
    import shlex

    from ..recipe.locate import bundled_dir

    top = [m for m in manifest.of_kind("recipe") if m.meta.get("recipe") == manifest.recipe]
    file = top[0].meta.get("file") if len(top) == 1 else None
    variant = ["--variant", manifest.variant] if manifest.variant else []
    if not isinstance(file, str) or Path(file).parent.resolve() == bundled_dir("recipes").resolve():
        return shlex.join(["flagtree-cpu", "--recipe", manifest.recipe, *variant, "setup", "--bundle", bundle,
                           "--offline"])
    ws = ["-w", default_workdir(manifest.recipe)]
    return (shlex.join(["flagtree-cpu", *ws, *variant, "bundle", "import", bundle]) + " && "
            + shlex.join(["flagtree-cpu", *ws, "setup", "--offline"]))


def _names_a_file(recipe: str) -> bool:
    return os.sep in recipe or recipe.endswith((".yaml", ".yml"))


def _top_recipe(manifest: Manifest, path: Path) -> Member | None:
    """The file of the bundle's own recipe (None when it carries none)."""
    found = [m for m in manifest.of_kind("recipe") if m.meta.get("recipe") == manifest.recipe]
    if len(found) > 1:
        raise BundleDamaged(f"{path} carries the file of its recipe {manifest.recipe!r} {len(found)} times",
                            fix=f"make the bundle again ({elsewhere('bundle', 'create')})")
    return found[0] if found else None


def _bundled(name: str) -> Path:
    """Where this tool's bundled recipe ``name`` would be (a name with a path in it is none of them)."""
    from ..recipe.locate import bundled_dir

    return bundled_dir("recipes") / (f"{name}.yaml" if "/" not in name and name not in ("", ".", "..") else "-")


def _extract(path: Path, manifest: Manifest, top: Member, root: Path, carried: Carried) -> Path:
    """Every recipe file ``path`` carries, in ``<root>/.flagtree-cpu/recipes/``; the path of the top one."""
    from ..atomic import temporary_name
    from .reading import extract_members

    members = manifest.of_kind("recipe")
    for member in members:
        if member.size > MAX_RECIPE_BYTES:
            raise BundleDamaged(f"{path} carries {member.name} of {member.size} bytes, more than any recipe "
                                f"({MAX_RECIPE_BYTES >> 10} KiB); nothing was imported",
                                fix="make the bundle again (bundle create) from the recipe file")
    folder = root / STATE_DIRNAME / RECIPES_DIRNAME
    for made in (root, root / STATE_DIRNAME, folder):
        if not made.exists():
            made.mkdir(parents=True)
            carried.made.append(made)
    staging = PartialFolder.create(folder / "incoming")
    try:
        with staging.writing():
            extracted = extract_members(path, manifest, [m.name for m in members], staging.tree)
        for member in members:
            dest = folder / member.name.partition("/")[2]  # a plain file name: the manifest was checked
            tmp = temporary_name(dest)
            os.replace(extracted[member.name], tmp)
            carried.written.append(dest)
            os.replace(tmp, dest)
    finally:
        staging.remove()
    return folder / top.name.partition("/")[2]


def _remove_if_only(folder: Path, allowed: set[str]) -> None:
    """``folder`` removed when it holds nothing but ``allowed`` (a refused first command leaves no workspace)."""
    with contextlib.suppress(OSError):
        if set(os.listdir(folder)) <= allowed:
            for name in allowed:
                (folder / name).unlink(missing_ok=True)
            folder.rmdir()
