"""A source's patch entries (``sources.X.patches``): where each patch's text is, which folder of the checkout it
goes into, and its copies, so they can be taken back before anything moves.

A bare entry is a file under the recipe's patches/ folders applied at the checkout's top, as always. A mapping
entry may take its file from a source's checkout (``from``: spine-triton applies its own patch/triton.patch) and
apply it in a folder of the checkout (``into``: spine-triton's triton submodule). Each patched folder keeps its
copies in a state folder of its own: ``patches/<source>`` for the top (where they always were) and
``patches/<source>@<folder, quoted>`` for the others (a name no source can have). So what to take back, and
where, is known from the state alone — also after the recipe dropped the entry or changed its ``into``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, unquote

from ...errors import SourceError
from ...gitcmd import modified_files, toplevel, tree_entry
from ...recipe import Recipe
from ...recipe.checks import find_patch
from ...recipe.files import patch_dirs
from ...recipe.inputs import Patch
from .patches import PatchFile, PatchOutcome, PatchState, apply_patches, copy_name, patched_paths, revert_patches


class SourcePatches:
    """The patches of source ``name``, applied to and taken back from its checkout."""

    def __init__(self, name: str, recipe: Recipe, workdir: Path, state_root: Path, recorded: Mapping[str, str]):
        self.name, self.recipe, self.workdir = name, recipe, workdir
        self.source = recipe.sources[name]
        self.state_root = state_root  # <recipe state>/patches
        self.recorded = {copy_name(label): sha for label, sha in recorded.items()}  # from the lock file

    # -- applying ------------------------------------------------------------------------------------

    def apply(self, checkout: Path) -> list[PatchOutcome]:
        """Every entry applied, in the recipe's order, after taking back what the recipe no longer asks for
        (a dropped entry, or one whose ``into`` changed), so the tree holds what the lock records."""
        wanted = {copy_name(p.label) for p in self.source.patches}
        for state in self._states(checkout):
            revert_patches(state, keep=wanted)
        outcomes: list[PatchOutcome] = []
        for i, patch in enumerate(self.source.patches):
            state = self._state_to_apply(checkout, i, patch)
            outcomes += apply_patches(self.name, [PatchFile(patch.label, self._file(i, patch), self._fix(patch))],
                                      state)
        return outcomes

    def _file(self, i: int, patch: Patch) -> Path:
        if patch.from_source is None:
            dirs = patch_dirs(self.recipe.file)
            found = find_patch(patch.file, dirs)
            if found is None:
                raise SourceError(f"patch {patch.file} of source {self.name} has disappeared from {dirs[0]}",
                                  fix="restore the file, or remove it from the recipe")
            return found
        holder = self.workdir / self.recipe.source_path(patch.from_source)
        path = holder / patch.file
        if not path.is_file():
            raise SourceError(
                f"sources.{self.name}.patches[{i}]: source {patch.from_source} has no {patch.file} at its pinned "
                f"commit ({path} is missing)",
                fix=f"pin a commit of {patch.from_source} that has it, or correct the entry's file (a path in "
                f"{patch.from_source}'s checkout)")
        return path

    def _fix(self, patch: Patch) -> str:
        if patch.from_source is None:
            return ""  # apply_patches' own advice: update the recipe's file
        where = patch.folder or self.name
        pin = (f"pin a commit of {self.name} whose patch and {where} belong together" if patch.from_source == self.name
               else f"pin {patch.from_source} and {self.name} to commits that belong together")
        return (f"the patch comes from source {patch.from_source} and was made for another commit of {where}: "
                f"{pin} (a submodule is where its gitlink says), or drop the entry from sources.{self.name}.patches")

    def _state_to_apply(self, checkout: Path, i: int, patch: Patch) -> PatchState:
        state = self._state(checkout, patch.folder)
        if isinstance(state, PatchState):
            return state
        fix = f"correct `into` of sources.{self.name}.patches[{i}]: a folder of {checkout}"
        if "submodule" in state and self.source.submodules == "none":
            fix = f"set sources.{self.name}.submodules: recursive, so the submodule the patch goes into is checked out"
        raise SourceError(f"patch {patch.label} of source {self.name} cannot be applied: {state}", fix=fix)

    # -- taking back --------------------------------------------------------------------------------------

    def revert_all(self, checkout: Path) -> None:
        """Take every patch we applied back (before the checkout moves: our changes are not the user's)."""
        for state in self._states(checkout):
            revert_patches(state)

    def revert_inside(self, checkout: Path, repo: Path) -> None:
        """Take back the patches applied in folders of ``repo`` (a submodule about to move to its gitlink)."""
        inside = repo.resolve()
        for state in self._states(checkout):
            if state.where.resolve().is_relative_to(inside):
                revert_patches(state)

    def foreign_changes(self, checkout: Path) -> list[str]:
        """Tracked files of the checkout that differ from its commit other than by our patches (a submodule
        patched by us is looked into, not counted as changed as a whole)."""
        ours: set[str] = set()
        for folder in self._folders():
            state = self._state(checkout, folder)
            if isinstance(state, PatchState):
                ours |= {f"{folder}/{p}" if folder else p for p in patched_paths(state)}
        return _changes_besides(checkout, "", ours)

    # -- the state folders ----------------------------------------------------------------------------------

    def _folders(self) -> list[str]:
        """The checkout's top, and every folder with copies of patches applied there."""
        folders = [""]
        if self.state_root.is_dir():
            mark = f"{self.name}@"
            folders += sorted(unquote(e.name[len(mark):]) for e in self.state_root.iterdir() if e.name.startswith(mark))
        return folders

    def _states(self, checkout: Path) -> list[PatchState]:
        found = [self._state(checkout, folder) for folder in self._folders()]
        return [s for s in found if isinstance(s, PatchState)]  # a folder that is gone holds nothing to take back

    def _state(self, checkout: Path, folder: str) -> PatchState | str:
        """The copies of the patches applied in ``folder`` (relative to the checkout), or why git cannot apply
        anything there."""
        located = _repository_of(checkout, folder)
        if isinstance(located, str):
            return located
        repo, directory = located
        state_folder = self.state_root / (f"{self.name}@{quote(folder, safe='')}" if folder else self.name)
        return PatchState(state_folder, self.name, repo, self.recorded, self._known_files(), directory)

    def _known_files(self) -> dict[str, Path]:
        """The recipe's patches that can be read now, by copy name (to rebuild a damaged copy from)."""
        found = {}
        for i, patch in enumerate(self.source.patches):
            try:
                found[copy_name(patch.label)] = self._file(i, patch)
            except SourceError:
                continue
        return found


def changes_besides_patches(recipe: Recipe, name: str, workdir: Path, state_root: Path,
                            recorded: Mapping[str, str] | None = None) -> list[str]:
    """The tracked files of source ``name``'s checkout that differ from its commit other than by the patches sync
    applied: what plans and doctor should call the user's local changes (sync takes its own back before moving).
    ``state_root``: the recipe's ``<state>/patches`` folder; ``recorded``: the lock's patch records of the source
    (label -> sha256). Raises SourceError when git or the patch state cannot tell."""
    patches = SourcePatches(name, recipe, workdir, state_root, recorded or {})
    return patches.foreign_changes(workdir / recipe.source_path(name))


def _repository_of(checkout: Path, folder: str) -> tuple[Path, str] | str:
    """The repository that holds ``folder`` of the checkout and the folder's path inside it ("" = its top), or
    why there is none: a submodule is its own repository, and git only applies patches at a repository's top."""
    if not folder:
        return checkout, ""
    target = checkout / folder
    if not target.is_dir():
        return f"{target} is not a folder"
    repo = toplevel(target)
    if repo is None:
        return f"{target} is not inside a git checkout"
    inside = os.path.relpath(target.resolve(), repo.resolve())
    if inside == ".":
        return repo, ""
    entry = tree_entry(repo, "HEAD", inside)
    if entry is not None and entry.kind == "commit":
        return f"{folder} is a submodule that is not checked out ({target} is empty)"
    if entry is None or entry.kind != "tree":
        return f"{folder} is not a folder git tracks in {repo}"
    return repo, inside


def _changes_besides(repo: Path, prefix: str, ours: set[str]) -> list[str]:
    found = []
    for path in modified_files(repo):
        full = prefix + path
        if full in ours:
            continue
        if any(o.startswith(full + "/") for o in ours) and (repo / path / ".git").exists():
            found += _changes_besides(repo / path, full + "/", ours)  # a submodule our patches went into
        else:
            found.append(full)
    return found
