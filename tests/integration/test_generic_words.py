"""Generic words in generic places (issue 29 item 8): the engine builds any Triton-family project from recipe
data, so its help, messages and tables say what the recipe says, never one system's particulars (FlagTree's
`pip install -e python/`, `TRITON_OFFLINE_BUILD=1`, a validation table whose first column is a "kernel")."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app

HOST = platform.machine()
# what only one system (FlagTree on Arm64, or Triton's own setup.py) does: words a recipe says, not the engine
PARTICULAR = ("pip install -e python/", "TRITON_OFFLINE_BUILD", "FlagTree", "Arm64 CPU backend", "LLVM prebuilt",
              "12 links", "FLAGTREE_BACKEND", "kernel")


def words(text: str) -> str:
    return " ".join(text.split())  # the help and the tables wrap long lines


@pytest.mark.parametrize("command", [[], ["setup"], ["build"], ["python"], ["fetch"], ["link"], ["validate"]],
                         ids=lambda c: " ".join(c) or "flagtree-cpu")
def test_help_names_no_one_systems_build_steps(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    said = words(result.output)
    assert [w for w in PARTICULAR if w in said] == [], said


def test_build_help_says_the_build_runs_the_recipes_command_and_offline_environment() -> None:
    said = words(CliRunner().invoke(app, ["build", "--help"], env={"COLUMNS": "200"}).output)
    assert "build.argv" in said and "build.offline_env" in said, said


def test_the_validation_table_calls_each_row_a_check(tmp_path: Path) -> None:
    recipe = tmp_path / "words.yaml"
    recipe.write_text(json.dumps({
        "schema_version": 2, "name": "words-fixture", "platform": {"host": {"arch": [HOST]}}, "sources": {},
        "checks": [{"name": "says-hello", "argv": ["{python}", "-c", "print('hello')"]}]}))
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--recipe", str(recipe), "validate",
                                      "--python", sys.executable], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    header = next(line for line in result.stderr.splitlines() if "status" in line and "result" in line)
    assert header.split()[0] == "check", result.stderr
    assert "kernel" not in words(result.stderr)
