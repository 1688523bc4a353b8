"""Recipe patches in one folder of a checkout: applied idempotently; taken back before the checkout moves.

For each patch: already applied (it reverse-applies cleanly) -> skip; applies cleanly ->
apply; otherwise stop with the rejected hunks, the tree as it was (``git apply`` is
all-or-nothing). A copy of each applied patch is kept in the workspace state, so the
exact text can be reversed before the checkout moves to another commit — our own
changes must not make a checkout look "dirty" to the next sync.

That state (``.flagtree-cpu/patches/<source>/``, one folder per folder patched, see
``source_patches``) is read defensively: a copy that is not a readable file, or whose text
is neither the one the lock file records nor the recipe's, is damaged. It is rebuilt from
the recipe's patch when the lock proves that exact text was applied; otherwise sync stops
naming the path and the repair — it never guesses what to take back from a checkout.

``git apply`` runs at the top of the repository that holds the folder (a submodule is its own
repository) with ``--directory`` for a folder below it (``gitops``'s patch verbs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ...atomic import write_atomic
from ...digest import hash_bytes
from ...errors import SourceError
from ...gitops import apply_patch, is_patch, patch_applies, patch_rejections
from ...regular_file import TooLarge, read_regular

MAX_PATCH_BYTES = 64 << 20  # the patches recipes carry are kilobytes


@dataclass(frozen=True)
class PatchOutcome:
    file: str  # the lock record's name (``Patch.label``)
    sha256: str
    applied_now: bool  # False: it was already applied


@dataclass(frozen=True)
class PatchFile:
    """One patch to apply: how the lock names it, and where its text is now."""

    label: str
    path: Path
    fix: str = ""  # what to do when it does not apply (default: update the recipe's file)

    @property
    def copy_name(self) -> str:
        return copy_name(self.label)


def copy_name(label: str) -> str:
    """The file name of a patch's copy: the label itself for a recipe patch (its file name, as always), quoted
    for a source's file (``spine-triton:patch/triton.patch``: a '/' cannot be in a file name)."""
    return label if "/" not in label else quote(label, safe=" :+@,=~")


@dataclass(frozen=True)
class PatchState:
    """The copies of the patches applied to one checkout."""

    folder: Path
    source: str
    checkout: Path  # the repository where git applies them
    recorded: Mapping[str, str] = field(default_factory=dict)  # copy name -> sha256, from the lock file
    recipe_patches: Mapping[str, Path] = field(default_factory=dict)  # copy name -> the patch, to rebuild a copy
    directory: str = ""  # the patched folder inside ``checkout`` ("" = its top)

    @property
    def where(self) -> Path:
        return self.checkout / self.directory if self.directory else self.checkout

    def copies(self) -> dict[str, Path]:
        """Every applied patch's copy, checked (and rebuilt where the lock proves what it held)."""
        if not os.path.lexists(self.folder):
            return {}
        if not self.folder.is_dir():
            raise self._damaged(self.folder, "is not a folder", f"move it away (mv {self.folder} "
                                f"{self.folder}.damaged) and sync again; flagtree-cpu then checks which "
                                "patches the checkout holds")
        found = {}
        for entry in sorted(self.folder.iterdir()):
            if entry.name.startswith("."):
                continue  # our own temporary file of an interrupted write
            if entry.is_dir() and not entry.is_symlink() and not any(entry.iterdir()):
                entry.rmdir()  # an empty folder where a copy belongs holds nothing
                continue
            found[entry.name] = self._checked(entry)
        return found

    def save(self, name: str, content: bytes) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(self.folder / name, content)  # never a half-written copy

    def forget(self, name: str) -> None:
        (self.folder / name).unlink(missing_ok=True)

    def _checked(self, copy: Path) -> Path:
        recipe = self.recipe_patches.get(copy.name)
        recipe_text = _read(recipe) if recipe else None
        recorded = self.recorded.get(copy.name)
        text = _read(copy) if copy.is_file() else None
        if text is not None:
            if _sha256(text) in (recorded, recipe_text and _sha256(recipe_text)):
                return copy
            if recorded is None and is_patch(self.checkout, copy, directory=self.directory):
                return copy  # nothing to compare it with, and it is a whole patch: trust it
        if recipe_text is not None and _sha256(recipe_text) == recorded and not copy.is_dir():
            self.save(copy.name, recipe_text)  # the lock proves this exact text was applied
            return copy
        what = ("is truncated or changed" if text is not None else
                "is a folder" if copy.is_dir() else "is not a readable file")
        raise self._damaged(copy, what, f"look at `git -C {self.where} diff`; undo what patch {copy.name} "
                            f"changed there, if anything (git -C {self.where} checkout -- <its files>), then "
                            f"remove the copy (rm -r {copy}) and sync again: the patch is then applied afresh")

    def _damaged(self, path: Path, what: str, fix: str) -> SourceError:
        return SourceError(
            f"the patch state of source {self.source} is damaged: {path} {what}; flagtree-cpu keeps there "
            "the exact text of each patch it applied, to take it back before the checkout moves", fix=fix)


def _read(path: Path) -> bytes | None:
    try:
        return _patch_bytes(path)
    except OSError:
        return None


def _patch_bytes(path: Path) -> bytes:
    """A patch's text: a regular file (a FIFO there must not hang sync), and no bigger than a patch can be."""
    data = read_regular(path, MAX_PATCH_BYTES)
    if len(data) > MAX_PATCH_BYTES:
        raise TooLarge(path, MAX_PATCH_BYTES)
    return data


def _sha256(content: bytes) -> str:
    return hash_bytes(content, "sha256")


def apply_patches(source: str, patches: Sequence[PatchFile], state: PatchState) -> list[PatchOutcome]:
    """Apply each patch in ``state``'s folder unless it is there already; a changed patch's old text is taken back
    first. A patch that does not apply stops everything with the tree as it was (git apply is all-or-nothing)."""
    outcomes = []
    copies = state.copies()
    repo = state.checkout
    for patch in patches:
        try:
            content = _patch_bytes(patch.path)
        except OSError as exc:
            raise SourceError(f"patch {patch.path} for source {source} cannot be read: {exc}",
                              fix=f"put the patch file back at {patch.path} (a regular file), or remove it from the "
                              "recipe's patches") from None
        copy = copies.get(patch.copy_name)
        if copy is not None and _read(copy) != content:
            # the recipe's patch changed since we applied it: take the old text back first
            if patch_applies(repo, copy, directory=state.directory, reverse=True):
                apply_patch(repo, copy, directory=state.directory, reverse=True)
            state.forget(patch.copy_name)
        if patch_applies(repo, patch.path, directory=state.directory, reverse=True):
            applied_now = False
        elif patch_applies(repo, patch.path, directory=state.directory):
            apply_patch(repo, patch.path, directory=state.directory)
            applied_now = True
        else:
            raise SourceError(
                f"patch {patch.label} does not apply to source {source} ({state.where}); nothing was changed",
                details=tuple(patch_rejections(repo, patch.path, directory=state.directory)),
                fix=patch.fix or f"the patch was made for another version: update {patch.path} for the pinned "
                "commit, or pin the commit it was made for",
            )
        state.save(patch.copy_name, content)
        outcomes.append(PatchOutcome(patch.label, _sha256(content), applied_now))
    return outcomes


def revert_patches(state: PatchState, keep: Sequence[str] | None = None) -> list[str]:
    """Reverse every patch we applied in ``state``'s folder (when it still reverses cleanly), but those whose copy
    names are in ``keep``; return the names of those taken back."""
    reverted = []
    for name, copy in state.copies().items():
        if keep is not None and name in keep:
            continue
        if patch_applies(state.checkout, copy, directory=state.directory, reverse=True):
            apply_patch(state.checkout, copy, directory=state.directory, reverse=True)
            reverted.append(name)
            state.forget(name)
    return reverted


def patched_paths(state: PatchState) -> set[str]:
    """The files the applied patches change, relative to the patched folder (``+++ b/`` and ``--- a/`` lines of
    their copies: what they change, create and delete)."""
    paths: set[str] = set()
    for copy in state.copies().values():
        text = copy.read_text(errors="replace")
        paths |= {line[6:].strip() for line in text.splitlines() if line.startswith(("+++ b/", "--- a/"))}
    return paths
