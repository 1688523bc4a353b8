"""A workspace whose recipe applies one patch to FlagTree (a copy of the bundled recipe in a user
recipe folder, with ``patches/`` beside it)."""

from __future__ import annotations

import shutil
from pathlib import Path

from flagtree_cpu_build.recipe.files import bundled_dir
from tests.support.cli import Workspace, new_workspace
from tests.support.gitworld import GitWorld, git

CMAKE = "include/triton/Dialect/CMakeLists.txt"  # unchanged between the fixture's FlagTree commits


def recipe_folder(root: Path) -> Path:
    (root / "patches").mkdir(parents=True)
    shutil.copy(bundled_dir("recipes") / "flagtree-cpu-arm64.yaml", root / "patched.yaml")
    return root


def write_patch(world: GitWorld, work: Path, folder: Path, name: str, new_text: str) -> Path:
    """A patch of FlagTree's CMAKE file, made with git diff against the cpu-backend commit."""
    world.clone("flagtree", work, commit=world["flagtree"].commits["cpu-backend"])
    (work / CMAKE).write_text(new_text)
    patch = folder / "patches" / name
    patch.write_text(git("diff", cwd=work, env=world.env) + "\n")
    shutil.rmtree(work)
    return patch


def patched_workspace(world: GitWorld, root: Path, folder: Path, patch_name: str) -> Workspace:
    ws = new_workspace(world, root)
    original_run = ws.run

    def run(*args: str, sets: tuple[str, ...] = ()) -> object:
        return original_run("--recipe", str(folder / "patched.yaml"), *args,
                            sets=(f"sources.flagtree.patches=[{patch_name}]", *sets))

    ws.run = run  # type: ignore[method-assign]
    return ws
