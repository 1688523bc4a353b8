"""The pins key (stages/build/pins.py) and the manifest's pins fields, read as hostile (wheelhouse_manifest.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flagtree_cpu_build import wheelhouse as wh
from flagtree_cpu_build.lockfile import ArtifactLock, Lock, PatchLock, SourceLock, SubmoduleLock
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.stages.build.pins import checkout_differs, pins_differences
from tests.unit.test_wheelhouse_manifest import WHERE, entry, manifest, refused

KEY = "a" * 64


def test_a_manifest_without_pins_stays_readable_and_one_with_them_is_read() -> None:
    [old, new] = wh.parse_manifest(manifest(entry(1), entry(2, pins_key=KEY, pins={"sources": {}})), WHERE)
    assert "pins_key" not in old and new["pins_key"] == KEY


@pytest.mark.parametrize(("extra", "said"), [
    ({"pins_key": KEY}, "pins is null, not an object"),
    ({"pins": {}}, "pins_key None is not 64 lowercase hex digits"),
    ({"pins_key": "A" * 64, "pins": {}}, "is not 64 lowercase hex digits"),
    ({"pins_key": 7, "pins": {}}, "pins_key 7 is not 64 lowercase hex digits"),
    ({"pins_key": KEY, "pins": ["a"]}, "pins is a list, not an object"),
    ({"pins_key": KEY, "pins": json.loads("[" * 40 + "]" * 40)}, "pins is a list"),
])
def test_wrong_pins_fields_make_the_manifest_damaged_naming_the_field(extra: dict[str, Any], said: str) -> None:
    assert said in refused(manifest(entry(1, **extra)))


def test_deeply_nested_pins_are_refused() -> None:
    deep: dict[str, Any] = {}
    for _ in range(40):
        deep = {"x": deep}
    assert "pins is nested deeper than" in refused(manifest(entry(1, pins_key=KEY, pins=deep)))


def _lock(commit: str = "c" * 40, sha: str = "d" * 64) -> Lock:
    return Lock(lock_version=2, tool_version="t", recipe="r", recipe_digest="e" * 64,
                sources={"src": SourceLock(url="https://x/src.git", commit=commit,
                                           submodules=(SubmoduleLock(path="m", url="u", commit="1" * 40),),
                                           patches=(PatchLock(file="p.patch", sha256="2" * 64),))},
                artifacts={"llvm": ArtifactLock(url="https://x/llvm.tgz", sha256=sha)})


def test_only_a_checkout_the_lock_describes_exactly_is_published_with_pins() -> None:
    lock = _lock()
    exact = {"sources": {"src": {"commit": "c" * 40, "local_changes": None}}, "artifacts": {"llvm": "d" * 64}}
    assert checkout_differs(lock, exact) is None
    assert checkout_differs(None, exact) == "there is no lock file"
    edited = {**exact, "sources": {"src": {"commit": "c" * 40, "local_changes": "abc"}}}
    assert checkout_differs(lock, edited) == "source src has local changes"
    moved = {**exact, "sources": {"src": {"commit": "f" * 40, "local_changes": None}}}
    assert checkout_differs(lock, moved) == "source src is not at the lock's commit"
    other = {**exact, "artifacts": {"llvm": "9" * 64}}
    assert checkout_differs(lock, other) == "artifact llvm is not the lock's download"


def test_the_closest_entry_names_the_pin_that_differs() -> None:
    said = pins_differences({"sources": {"src": {"commit": "c" * 40}}, "recipe_digest": "e" * 64},
                            {"sources": {"src": {"commit": "f" * 40}}, "recipe_digest": "e" * 64})
    assert said == [f"sources.src.commit {'c' * 12} -> {'f' * 12}"]


@pytest.mark.parametrize("setting", [
    "build.compile_farm=helper1/4", "build.compile_cache=redis://cache.lan:6379", "python.installer=pip",
    "build.wheelhouse=http://wheels.lan/", "description=another text",
])
def test_what_the_build_is_not_made_from_leaves_the_recipe_inputs_digest_alone(setting: str) -> None:
    plain = load_recipe("flagtree-cpu-arm64").inputs_digest
    assert load_recipe("flagtree-cpu-arm64", overrides=(setting,)).inputs_digest == plain
    assert load_recipe("flagtree-cpu-arm64", overrides=(setting,)).digest != load_recipe("flagtree-cpu-arm64").digest


@pytest.mark.parametrize("setting", ["build.env.set={TRITON_BUILD_PROTON: 'ON'}", "build.argv=[make]"])
def test_what_the_build_is_made_from_changes_the_recipe_inputs_digest(setting: str) -> None:
    plain = load_recipe("flagtree-cpu-arm64").inputs_digest
    assert load_recipe("flagtree-cpu-arm64", overrides=(setting,)).inputs_digest != plain
