"""A workspace knows its recipe (issue 28, section 1): the first command that makes a workspace records the
recipe (name, digest, where it came from), the variant and the lock location in `.flagtree-cpu/workspace.json`;
every later command on it, by -w or from inside it, uses that record unless the command line says otherwise; a
different recipe is refused (exit 2) and nothing is rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.cli import Workspace, synced_workspace
from tests.support.gitworld import GitWorld


@pytest.fixture
def synced(world: GitWorld, tmp_path: Path) -> Workspace:
    return synced_workspace(world, tmp_path / "ws")


def words(text: str) -> str:
    return " ".join(text.split())


def test_another_recipe_on_a_flagtree_workspace_is_refused_and_its_lock_kept(synced: Workspace) -> None:
    locked = synced.run("lock")
    assert locked.exit_code == 0, locked.stderr
    before = synced.lock_file.read_bytes()
    result = CliRunner().invoke(app, ["-w", str(synced.root), "--recipe", "triton-cpu", "lock"])
    assert result.exit_code == 2, result.stderr
    said = words(result.stderr)
    assert "flagtree-cpu-arm64" in said and "triton-cpu" in said
    assert synced.lock_file.read_bytes() == before

