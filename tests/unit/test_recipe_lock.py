"""An install-only board without a lock file (stages/build/recipe_lock.py): a fully pinned recipe is its own lock;
any other recipe names the first pin only a checkout or the network knows, and the command that gets the lock."""

from __future__ import annotations

import pytest

from flagtree_cpu_build.lockfile import ArtifactLock, Lock, SourceLock
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.stages.build.pins import pins_key
from flagtree_cpu_build.stages.build.recipe_lock import lock_from_recipe

COMMIT, SHA256 = "b" * 40, "c" * 64
URL = "http://127.0.0.1:1/llvm.tar.gz"
PINNED = (f"sources.flagtree-cpu.commit={COMMIT}", "sources.flagtree-cpu.submodules=none", f"artifacts.llvm.url={URL}",
          f"artifacts.llvm.sha256={SHA256}")
GETS_THE_LOCK = "run `flagtree-cpu sync` on a machine with network"


def test_a_fully_pinned_recipe_gives_the_pins_key_of_the_lock_sync_writes() -> None:
    recipe = load_recipe("flagtree-cpu-arm64", PINNED)
    derived, why = lock_from_recipe(recipe)
    assert derived is not None, why
    flagtree = recipe.sources["flagtree"]
    synced = Lock(  # what the publishing board's sync recorded
        lock_version=2, tool_version="0", recipe=recipe.name, recipe_digest=recipe.digest,
        sources={"flagtree": SourceLock(url=flagtree.url, ref=flagtree.ref, commit=str(flagtree.commit),
                                        resolved_from="recipe"),
                 "flagtree-cpu": SourceLock(url=recipe.sources["flagtree-cpu"].url, ref="main", commit=COMMIT,
                                            resolved_from="recipe")},
        artifacts={"llvm": ArtifactLock(url=URL, sha256=SHA256.upper(), size=123, served_from=URL)})
    mine, published = pins_key(recipe, derived)[0], pins_key(recipe, synced)[0]
    assert mine is not None and published is not None
    assert mine.key == published.key


@pytest.mark.parametrize(("unset", "said"), [
    ("sources.flagtree-cpu.commit", "source flagtree-cpu has no commit in the recipe (ref main is resolved"),
    ("sources.flagtree-cpu.submodules", "the commits of source flagtree-cpu's submodules are recorded in its checkout"),
    ("artifacts.llvm.url", "artifact llvm's URL is read from a source's file"),
    ("artifacts.llvm.sha256", "artifact llvm has no sha256 in the recipe"),
])
def test_without_a_lock_the_unknown_pin_is_named_with_the_command_that_gets_the_lock(unset: str, said: str) -> None:
    recipe = load_recipe("flagtree-cpu-arm64", tuple(s for s in PINNED if not s.startswith(unset + "=")))
    lock, why = lock_from_recipe(recipe)
    assert lock is None
    assert why.startswith(f"there is no lock file, and {said}"), why
    assert GETS_THE_LOCK in why and "copy the publishing board's .flagtree-cpu/lock.yaml" in why
    assert pins_key(recipe, None)[0] is None
