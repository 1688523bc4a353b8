"""Finding the enclosing workspace by walking up (git's way): the nearest folder holding the state folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.workspace import STATE_DIRNAME, default_workdir, enclosing_workspace


def test_the_nearest_workspace_above_wins_and_a_state_file_is_not_a_workspace(tmp_path: Path) -> None:
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "FlagTree" / "inner"
    (outer / STATE_DIRNAME).mkdir(parents=True)
    (inner / "third_party").mkdir(parents=True)
    assert enclosing_workspace(inner / "third_party") == outer
    (inner / STATE_DIRNAME).write_text("not a folder\n")  # a file of that name does not make a workspace
    assert enclosing_workspace(inner / "third_party") == outer
    assert enclosing_workspace(tmp_path) is None


def test_a_folder_above_that_cannot_be_looked_into_is_passed_over(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """As root every folder can be read, so the refusal (EACCES) a user meets is made by the file system layer."""
    (tmp_path / STATE_DIRNAME).mkdir()
    here = tmp_path / "locked" / "deep"
    here.mkdir(parents=True)
    real_is_dir = Path.is_dir

    def is_dir(path: Path) -> bool:
        if path.parent == tmp_path / "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_is_dir(path)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    assert enclosing_workspace(here) == tmp_path


def test_a_recipe_named_flagtree_does_not_get_the_default_recipes_workspace() -> None:
    """`--recipe flagtree` would make ./flagtree-workspace, the default recipe's folder: a user who set up the
    default recipe and then the bundled `flagtree` one from the same folder was refused (one workspace, two
    recipes), and the refusal's "a workspace of its own" named that same folder."""
    assert default_workdir(None) == default_workdir("flagtree-cpu-arm64") == "flagtree-workspace"
    names = {default_workdir(name) for name in (None, "flagtree", "flagtree-cpu-arm64", "triton-cpu")}
    assert len(names) == 3
    assert default_workdir("flagtree") != "flagtree-workspace"
    assert default_workdir("triton-cpu") == "triton-cpu-workspace"
