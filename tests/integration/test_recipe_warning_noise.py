"""`recipe show/validate` say what the user can act on (issue 28 §5): a bundled recipe's open pins are one
note, not warnings about a file the user cannot change; a user's recipe keeps its warnings; `validate --all`
names the recipe on each warning line."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.recipe.files import bundled_dir

BUNDLED = "flagtree-cpu-arm64"  # leaves sources.flagtree-cpu on a branch and artifacts.llvm without digest


def _stderr(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.stderr
    return " ".join(result.stderr.split())


def test_a_bundled_recipes_open_pins_are_one_note_not_warnings() -> None:
    for args in (["recipe", "show", BUNDLED], ["recipe", "validate", BUNDLED]):
        said = _stderr(*args)
        assert "warning:" not in said, args
        assert said.count("note:") == 1 and "sources.flagtree-cpu, artifacts.llvm unpinned" in said, said


def test_a_users_recipe_keeps_its_pin_warnings(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    shutil.copy(bundled_dir("recipes") / f"{BUNDLED}.yaml", mine)
    said = _stderr("recipe", "validate", str(mine))
    assert "warning: sources.flagtree-cpu: no pinned commit" in said
    assert "warning: artifacts.llvm: no digest" in said


def test_validate_all_names_the_recipe_on_each_warning(tmp_path: Path) -> None:
    shutil.copy(bundled_dir("recipes") / f"{BUNDLED}.yaml", tmp_path / "mine.yaml")
    result = CliRunner().invoke(app, ["--recipes-dir", str(tmp_path), "recipe", "validate", "--all"])
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings and all(line.startswith("warning: mine: ") for line in warnings), warnings
