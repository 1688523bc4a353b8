"""Recipe patches: applied after checkout, idempotently; taken back before a checkout moves.

For each patch: already applied (it reverse-applies cleanly) -> skip; applies cleanly ->
apply; otherwise stop with the rejected hunks, the tree as it was (``git apply`` is
all-or-nothing). A copy of each applied patch is kept in the workspace state, so the
exact text can be reversed before the checkout moves to another commit — our own
changes must not make a checkout look "dirty" to the next sync.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import SourceError
from .gitcmd import git_result, git_succeeds, run_git


@dataclass(frozen=True)
class PatchOutcome:
    file: str
    sha256: str
    applied_now: bool  # False: it was already applied


def apply_patches(source: str, checkout: Path, patches: Sequence[Path], state: Path) -> list[PatchOutcome]:
    outcomes = []
    for patch in patches:
        content = patch.read_bytes()
        copy = state / patch.name
        if copy.is_file() and copy.read_bytes() != content:
            # the recipe's patch changed since we applied it: take the old text back first
            if git_succeeds(["apply", "--check", "-R", str(copy)], cwd=checkout):
                run_git(["apply", "-R", str(copy)], cwd=checkout)
            copy.unlink()
        if git_succeeds(["apply", "--check", "-R", str(patch)], cwd=checkout):
            applied_now = False
        elif git_succeeds(["apply", "--check", str(patch)], cwd=checkout):
            run_git(["apply", "--whitespace=nowarn", str(patch)], cwd=checkout)
            applied_now = True
        else:
            _status, _out, err = git_result(["apply", "--check", "-v", str(patch)], cwd=checkout)
            rejected = tuple(line for line in err.splitlines() if line.startswith("error:"))
            raise SourceError(
                f"patch {patch.name} does not apply to source {source} ({checkout}); nothing was changed",
                details=rejected or tuple(err.splitlines()[-5:]),
                fix=f"the patch was made for another version: update {patch} for the pinned commit, or "
                "pin the commit it was made for",
            )
        state.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(content)
        outcomes.append(PatchOutcome(patch.name, hashlib.sha256(content).hexdigest(), applied_now))
    return outcomes


def revert_patches(checkout: Path, state: Path) -> list[str]:
    """Reverse every patch we applied here (when it still reverses cleanly); return their names."""
    reverted = []
    for copy in sorted(state.glob("*")) if state.is_dir() else ():
        if git_succeeds(["apply", "--check", "-R", str(copy)], cwd=checkout):
            run_git(["apply", "-R", str(copy)], cwd=checkout)
            reverted.append(copy.name)
            copy.unlink()
    return reverted
