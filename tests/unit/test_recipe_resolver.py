"""One resolver for every command: a stacked recipe whose base is named by `extends` and lives in a user recipes
folder (--recipes-dir or FLAGTREE_CPU_RECIPES) loads the same way in `recipe list`, `recipe validate` (by file,
by name, --all), `recipe show`, `recipe upgrade` and the commands that open a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import result_of

BASE = """\
schema_version: 3
name: my-base
platform:
  host: {arch: [x86_64, aarch64, riscv64]}
sources:
  main: {url: https://example.invalid/main.git, commit: 0123456789abcdef0123456789abcdef01234567}
runtime:
  env: {set: {FROM_BASE: "yes"}}
"""
TOP = """\
schema_version: 3
name: my-top
extends: my-base
sources:
  gems: {url: https://example.invalid/gems.git, commit: 89abcdef0123456789abcdef0123456789abcdef}
"""


@pytest.fixture(params=["--recipes-dir", "FLAGTREE_CPU_RECIPES"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The base in a user recipes folder, given as the parameter says; the stacked recipe in another folder."""
    (tmp_path / "bases").mkdir()
    (tmp_path / "bases" / "my-base.yaml").write_text(BASE)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "my-top.yaml").write_text(TOP)
    folders = [str(tmp_path / "bases"), str(tmp_path / "mine")]
    if request.param == "--recipes-dir":
        options = [part for folder in folders for part in ("--recipes-dir", folder)]
    else:
        options = []
        monkeypatch.setenv("FLAGTREE_CPU_RECIPES", ":".join(folders))

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(app, [*options, "-w", str(tmp_path / "ws"), *args])

    return invoke, tmp_path / "mine" / "my-top.yaml"


def test_recipe_list_loads_a_stacked_user_recipe_with_its_base(cli) -> None:
    invoke, _top = cli
    result = invoke("recipe", "list", "--json")
    assert result.exit_code == 0, result.stderr
    status = {entry["name"]: entry["status"] for entry in result_of(result.stdout)["recipes"]}
    assert status["my-top"] == "valid" and status["my-base"] == "valid"


@pytest.mark.parametrize("target", ["file", "name", "--all"])
def test_recipe_validate_finds_the_base_where_recipe_show_does(cli, target: str) -> None:
    invoke, top = cli
    shown = invoke("recipe", "show", "--raw", str(top), "--json")
    assert shown.exit_code == 0, shown.stderr
    args = {"file": [str(top)], "name": ["my-top"], "--all": ["--all"]}[target]
    result = invoke("recipe", "validate", *args, "--json")
    assert result.exit_code == 0, result.stdout
    checked = {r["name"]: r["ok"] for r in result_of(result.stdout)["results"]}
    assert checked["my-top"] is True


def test_recipe_upgrade_finds_the_base_too(cli) -> None:
    invoke, top = cli
    result = invoke("recipe", "upgrade", str(top))
    assert result.exit_code == 0, result.stderr
    assert "already schema version 3" in result.stderr


@pytest.mark.parametrize("recipe", ["file", "name"])
def test_a_command_with_a_workspace_finds_the_base(cli, recipe: str) -> None:
    invoke, top = cli
    result = invoke("--recipe", str(top) if recipe == "file" else "my-top", "env", "--json")
    assert result.exit_code == 0, result.stdout
    assert result_of(result.stdout)["set"]["FROM_BASE"] == "yes"


@pytest.mark.parametrize("command", [("recipe", "list"), ("recipe", "show", "--raw")])
def test_a_recipes_folder_no_file_system_can_hold_is_skipped(command: tuple[str, ...],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    folder = "/" + "z" * 5_000  # longer than a file name can be: every look at it fails with ENAMETOOLONG
    monkeypatch.setenv("FLAGTREE_CPU_RECIPES", folder)
    result = CliRunner().invoke(app, list(command))
    assert result.exit_code == 0, result.stderr[-500:]
    if command == ("recipe", "list"):
        assert f"recipes folder {folder} (cannot be read (File name too long)) is skipped" in result.stderr
