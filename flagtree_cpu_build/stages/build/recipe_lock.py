"""An install-only board without a lock file: the lock a fully pinned recipe already is.

The pins key (``pins.py``) is computed from a lock. A recipe that pins everything itself — every source a full
``commit`` with no submodules checked out and no patches (their commits and digests are recorded by `sync` from the
checkout), every artifact a ``sha256`` at a URL with nothing read from a source's file, no value read from a
source's file, no requirements file read from a source — gives the same lock `flagtree-cpu lock` would write
there, with nothing to resolve and nothing to download. Any other recipe needs the lock: the reason names the first
pin only a checkout (or the network) knows, and the command that gets the lock.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...lockfile import ArtifactLock, SourceLock, empty_lock
from .pins import GET_THE_LOCK, build_recipe

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...recipe import Recipe



def unknown_pin(recipe: Recipe) -> str | None:
    """The first pin the recipe alone does not give (None: it pins everything the build uses)."""
    _, view = build_recipe(recipe)
    assert view.build is not None
    chosen = view.build.inputs  # None: every source and artifact
    for name in recipe.sources_in_order():
        if chosen is not None and name not in chosen.sources:
            continue
        source = recipe.sources[name]
        if not source.commit or source.pin_reader[0] is not None:
            return f"source {name} has no commit in the recipe (ref {source.ref or '?'} is resolved over the network)"
        if source.submodules != "none":
            return f"the commits of source {name}'s submodules are recorded in its checkout"
        if source.patches:
            return f"the patches of source {name} are recorded by sync (applied to its checkout)"
    for name, artifact in recipe.artifacts.items():
        if chosen is not None and name not in chosen.artifacts:
            continue
        if artifact.read_names or "{" in artifact.url:
            return f"artifact {name}'s URL is read from a source's file"
        if not artifact.sha256:
            return f"artifact {name} has no sha256 in the recipe (it is recorded on the first download)"
    if recipe.python.files or recipe.python.unread:
        return "a python requirements file is read from a source's checkout"
    return None


def lock_from_recipe(recipe: Recipe) -> tuple[Lock | None, str]:
    """The lock a fully pinned recipe gives (what `flagtree-cpu lock` would write: the recipe's commits and
    sha256s), or None and which pin is unknown, with the command that gets the lock."""
    missing = unknown_pin(recipe)
    if missing is not None:
        return None, f"there is no lock file, and {missing}; {GET_THE_LOCK}"
    sources = {name: SourceLock(url=source.url, ref=source.ref, commit=str(source.commit), resolved_from="recipe")
               for name, source in recipe.sources.items() if source.commit}
    artifacts = {name: ArtifactLock(url=artifact.url, sha256=str(artifact.sha256).lower())
                 for name, artifact in recipe.artifacts.items() if artifact.sha256 and not artifact.read_names}
    lock = empty_lock(recipe.name, recipe.digest, recipe.variant)
    return replace(lock, sources=sources, artifacts=artifacts), ""
