"""The pure parts of for-wheelhouse bundles: which wheelhouse a workspace asks (the imported one is the fourth
origin), when the imported one counts, and how a bundle's lock is compared with its build's pins."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build import wheelhouse as wh
from flagtree_cpu_build.bundle import BundleDamaged, Manifest, Member
from flagtree_cpu_build.bundle.published import check_published, lock_differences
from flagtree_cpu_build.lockfile import ArtifactLock, Lock, SourceLock, SubmoduleLock

A, B = "a" * 40, "b" * 40
SHA = "c" * 64


def test_the_order_is_option_env_imported_then_recipe() -> None:
    env = {wh.ENV_VAR: "/env"}
    assert wh.configured("/opt", env, "/recipe", "/imported") == ("/opt", "--wheelhouse")
    assert wh.configured(None, env, "/recipe", "/imported") == ("/env", wh.ENV_VAR)
    assert wh.configured(None, {}, "http://fleet/", "/imported") == ("/imported", wh.IMPORTED_ORIGIN)
    assert wh.configured(None, {}, "http://fleet/", None) == ("http://fleet/", "the recipe's build.wheelhouse")


def test_an_imported_wheelhouse_counts_only_with_its_record_and_manifest(tmp_path: Path) -> None:
    assert wh.imported_wheelhouse(tmp_path) is None
    folder = wh.imported_folder(tmp_path)
    folder.mkdir()
    (folder / wh.MANIFEST).write_text("{}")
    assert wh.imported_wheelhouse(tmp_path) is None  # laid out, but the import did not finish: not used
    (tmp_path / wh.IMPORTED_RECORD).write_text('{"bundle": "/elsewhere"}')
    assert wh.imported_wheelhouse(tmp_path) == str(folder)  # the fixed folder, never a path read from the record


def lock(commit: str = A, sub: str = B, sha256: str = SHA) -> Lock:
    return Lock(lock_version=1, tool_version="0", recipe="r", recipe_digest="d",
                sources={"s": SourceLock(url="u", commit=commit, submodules=(SubmoduleLock(path="p", url="v",
                                                                                            commit=sub),))},
                artifacts={"llvm": ArtifactLock(url="w", sha256=sha256)})


def pins(commit: str = A, sub: str = B, sha256: str = SHA) -> dict:
    return {"sources": {"s": {"commit": commit, "submodules": {"p": sub}, "patches": {}}},
            "artifacts": {"llvm": sha256}, "reads": {}, "requirements_files": {}}


def test_a_lock_that_pins_what_the_build_was_made_from_agrees() -> None:
    assert lock_differences(lock(), pins()) == []


def test_each_differing_pin_is_named() -> None:
    found = lock_differences(lock(commit=B, sub=A, sha256="d" * 64), pins())
    assert found == [f"source s commit: the build's {A[:12]}, the lock's {B[:12]}",
                     f"source s submodules: the build's {{'p': '{B}'}}, the lock's {{'p': '{A}'}}",
                     f"artifact llvm: the build's {SHA[:12]}, the lock's {'d' * 12}"]


def test_pins_of_the_wrong_shape_are_differences_not_errors() -> None:
    hostile = {"sources": {"s": "not an object", "gone": {"commit": A}}, "artifacts": ["x"], "reads": 3}
    found = lock_differences(lock(), hostile)
    assert any(f.startswith("source s commit") for f in found)
    assert any(f.startswith("source gone commit") and "the lock's None" in f for f in found)
    assert any(f.startswith("reads:") for f in found)


def test_a_bundle_mixing_a_published_build_with_git_members_is_refused() -> None:
    manifest = Manifest.draft(recipe="r", stack=["r"], variant=None, target={}, members=[
        Member(name="builds/x-1.0-py3-none-any.whl", kind="build"), Member(name="git/m.pack", kind="git")])
    with pytest.raises(BundleDamaged, match="also git/m.pack"):
        check_published(manifest, {"locks/r.yaml": lock()}, Path("b.bundle"))
