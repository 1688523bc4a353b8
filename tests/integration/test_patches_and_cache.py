"""Recipe patches (apply / skip / conflict / survive a pin move) and the git cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.cli import Workspace, new_workspace
from tests.support.gitworld import GitWorld, git
from tests.support.patched import CMAKE, patched_workspace, recipe_folder, write_patch


@pytest.fixture
def recipe_dir(tmp_path: Path) -> Path:
    """A user recipe folder: a copy of the bundled recipe with a patches/ folder beside it."""
    return recipe_folder(tmp_path / "recipes")


def make_patch(world: GitWorld, tmp_path: Path, folder: Path, name: str, new_text: str) -> Path:
    work = tmp_path / f"patch-work-{len(list(tmp_path.glob('patch-work-*')))}"
    return write_patch(world, work, folder, name, new_text)


def patched_ws(world: GitWorld, tmp_path: Path, recipe_dir: Path, patch_name: str) -> Workspace:
    return patched_workspace(world, tmp_path / "ws", recipe_dir, patch_name)


def test_patch_is_applied_once_and_recorded(world: GitWorld, tmp_path: Path, recipe_dir: Path) -> None:
    make_patch(world, tmp_path, recipe_dir, "cmake.patch", "add_subdirectory(Triton)\nadd_subdirectory(TritonCPU)\n")
    ws = patched_ws(world, tmp_path, recipe_dir, "cmake.patch")
    first = ws.run("sync")
    assert first.exit_code == 0, first.stderr
    assert (ws.flagtree / CMAKE).read_text() == "add_subdirectory(Triton)\nadd_subdirectory(TritonCPU)\n"
    lock = yaml.safe_load(ws.lock_file.read_text())
    [entry] = lock["sources"]["flagtree"]["patches"]
    assert entry["file"] == "cmake.patch" and len(entry["sha256"]) == 64
    second = ws.run("sync")  # already applied: skipped, not applied twice
    assert second.exit_code == 0, second.stderr
    assert (ws.flagtree / CMAKE).read_text().count("TritonCPU") == 1
    assert "updated" not in second.stderr
    # our own patch does not count as the user's change
    assert "warning" not in second.stderr


def test_patched_checkout_can_still_move_its_pin(world: GitWorld, tmp_path: Path, recipe_dir: Path) -> None:
    make_patch(world, tmp_path, recipe_dir, "cmake.patch", "add_subdirectory(Triton)\n# patched\n")
    ws = patched_ws(world, tmp_path, recipe_dir, "cmake.patch")
    assert ws.run("sync").exit_code == 0
    tip = world["flagtree"].commits["tip"]
    moved = ws.run("sync", sets=(f"sources.flagtree.commit={tip}",))
    assert moved.exit_code == 0, moved.stderr  # not refused as "dirty"
    assert ws.head(ws.flagtree) == tip
    assert (ws.flagtree / CMAKE).read_text() == "add_subdirectory(Triton)\n# patched\n"


def test_a_changed_patch_replaces_the_old_one(world: GitWorld, tmp_path: Path, recipe_dir: Path) -> None:
    make_patch(world, tmp_path, recipe_dir, "cmake.patch", "add_subdirectory(Triton)\n# version 1\n")
    ws = patched_ws(world, tmp_path, recipe_dir, "cmake.patch")
    assert ws.run("sync").exit_code == 0
    make_patch(world, tmp_path, recipe_dir, "cmake.patch", "add_subdirectory(Triton)\n# version 2\n")
    result = ws.run("sync")
    assert result.exit_code == 0, result.stderr
    assert (ws.flagtree / CMAKE).read_text() == "add_subdirectory(Triton)\n# version 2\n"


def test_a_patch_that_does_not_apply_changes_nothing(world: GitWorld, tmp_path: Path, recipe_dir: Path) -> None:
    (recipe_dir / "patches" / "stale.patch").write_text(
        f"--- a/{CMAKE}\n+++ b/{CMAKE}\n@@ -1 +1 @@\n-add_subdirectory(SomethingElse)\n+add_subdirectory(X)\n")
    ws = patched_ws(world, tmp_path, recipe_dir, "stale.patch")
    result = ws.run("sync")
    assert result.exit_code == 3
    assert "patch stale.patch does not apply to source flagtree" in result.stderr
    assert f"error: patch failed: {CMAKE}:1" in result.stderr
    assert git("status", "--porcelain", "--untracked-files=no", cwd=ws.flagtree, env=world.env) == ""


# --- the git cache -----------------------------------------------------------------------------------


def test_second_workspace_clones_from_the_cache_without_network(world: GitWorld, tmp_path: Path) -> None:
    cache = tmp_path / "git-cache"
    first = new_workspace(world, tmp_path / "ws1")
    result = first.run("sync", "--git-cache", str(cache))
    assert result.exit_code == 0, result.stderr
    mirrors = sorted(p.name for p in cache.glob("*.git"))
    assert [m.split("-")[0] for m in mirrors] == ["FlagTree", "flagtree", "sleef"]
    world.stop()  # from here on, only the cache can provide anything
    second = new_workspace(world, tmp_path / "ws2")
    # resolving `main` needs the server; a team shares the lock file instead
    (second.root / ".flagtree-cpu").mkdir(parents=True, exist_ok=True)
    shutil.copy(first.lock_file, second.lock_file)
    result = second.run("sync", "--git-cache", str(cache), "--offline")
    assert result.exit_code == 0, result.stderr
    assert second.head(second.flagtree) == world["flagtree"].commits["cpu-backend"]
    assert second.head(second.flagtree_cpu / "third_party/sleef") == world["sleef"].commits["first"]
    # origins are the recipe's URLs, and the checkout does not depend on the cache
    assert git("config", "remote.origin.url", cwd=second.flagtree_cpu / "third_party/sleef", env=world.env) == \
        "https://github.com/shibatch/sleef"
    assert not (second.flagtree / ".git/objects/info/alternates").exists()
    shutil.rmtree(cache)
    git("fsck", "--connectivity-only", cwd=second.flagtree, env=world.env)


def test_cache_is_updated_when_the_pin_moves(world: GitWorld, tmp_path: Path) -> None:
    cache = tmp_path / "git-cache"
    ws = new_workspace(world, tmp_path / "ws")
    assert ws.run("sync", "--git-cache", str(cache)).exit_code == 0
    new = world.advance("flagtree", "triton_v3.3.x", "docs/x.md", "new\n")
    result = ws.run("sync", "--git-cache", str(cache), sets=(f"sources.flagtree.commit={new}",))
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree) == new
    mirror = next(cache.glob("FlagTree-*.git"))
    git("cat-file", "-e", new, cwd=mirror, env=world.env)
