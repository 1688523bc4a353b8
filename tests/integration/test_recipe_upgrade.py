"""`flagtree-cpu recipe upgrade`: a version 1 or 2 file rewritten as version 3 in place (the original kept), or
printed; a version 3 file left alone; an invalid file refused untouched. And the one-line notice a version 1
file gets on stderr, never on stdout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.recipe import schema as rs
from flagtree_cpu_build.recipe.files import bundled_dir, load_recipe_file
from flagtree_cpu_build.recipe.upgrade import to_current
from tests.support.corpus import CORPUS, VALID

V1 = VALID / "flagtree-cpu-arm64.v1.yaml"


@pytest.fixture
def v1_file(tmp_path: Path) -> Path:
    path = tmp_path / "my-recipe.yaml"
    shutil.copy(V1, path)
    return path


def _notice(path: Path) -> str:
    return (f"note: {path} is schema version 1, read as version 3; `flagtree-cpu recipe upgrade {path}` "
            "rewrites it")


def test_upgrade_rewrites_in_place_and_keeps_the_original(v1_file: Path) -> None:
    before = load_recipe_file(v1_file)
    result = CliRunner().invoke(app, ["recipe", "upgrade", str(v1_file)])
    assert result.exit_code == 0, result.stderr
    backup = v1_file.with_name("my-recipe.yaml.v1.bak")
    assert backup.read_text() == V1.read_text()
    assert f"{v1_file}: rewritten as schema version 3; the original is {backup}" in result.stderr
    after = load_recipe_file(v1_file)
    assert after.upgraded_from is None and after.schema_version == 3
    assert rs.to_data(after) == rs.to_data(before)
    assert result.stdout == ""
    assert sorted(p.name for p in v1_file.parent.iterdir()) == ["my-recipe.yaml", "my-recipe.yaml.v1.bak"]
    again = CliRunner().invoke(app, ["recipe", "upgrade", str(v1_file)])
    assert again.exit_code == 0
    assert "already schema version 3; nothing to do" in again.stderr


def test_upgrade_no_backup(v1_file: Path) -> None:
    result = CliRunner().invoke(app, ["recipe", "upgrade", str(v1_file), "--no-backup"])
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in v1_file.parent.iterdir()) == ["my-recipe.yaml"]


def test_upgrade_stdout_prints_and_writes_nothing(v1_file: Path) -> None:
    result = CliRunner().invoke(app, ["recipe", "upgrade", str(v1_file), "--stdout"])
    assert result.exit_code == 0, result.stderr
    assert v1_file.read_text() == V1.read_text()
    assert sorted(p.name for p in v1_file.parent.iterdir()) == ["my-recipe.yaml"]
    assert yaml.safe_load(result.stdout) == to_current(yaml.safe_load(V1.read_text()))
    assert "note:" not in result.stdout


def test_upgrade_json(v1_file: Path) -> None:
    result = CliRunner().invoke(app, ["--json", "recipe", "upgrade", str(v1_file)])
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)["result"]
    assert document == {"file": str(v1_file), "changed": True, "schema_version": 3,
                        "backup": str(v1_file.with_name("my-recipe.yaml.v1.bak"))}


def test_a_v3_recipe_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "v3.yaml"
    shutil.copy(bundled_dir("recipes") / "flagtree-cpu-arm64.yaml", path)
    before = path.read_bytes()
    result = CliRunner().invoke(app, ["recipe", "upgrade", str(path)])
    assert result.exit_code == 0, result.stderr
    assert f"{path} is already schema version 3; nothing to do" in result.stderr
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["v3.yaml"]


def test_a_v2_recipe_is_read_with_a_notice_and_upgraded_by_its_version_line(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    v3 = (bundled_dir("recipes") / "flagtree-cpu-arm64.yaml").read_text()
    v2 = v3.replace("\nschema_version: 3\n", "\nschema_version: 2\n", 1)
    path.write_text(v2)
    checked = CliRunner().invoke(app, ["recipe", "validate", str(path)])
    assert checked.exit_code == 0, checked.stderr
    assert checked.stderr.count(f"note: {path} is schema version 2, read as version 3") == 1
    result = CliRunner().invoke(app, ["recipe", "upgrade", str(path)])
    assert result.exit_code == 0, result.stderr
    backup = path.with_name("mine.yaml.v2.bak")
    assert f"{path}: rewritten as schema version 3; the original is {backup}" in result.stderr
    assert backup.read_text() == v2 and path.read_text() == v3


def test_an_invalid_v1_recipe_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    shutil.copy(CORPUS / "14-yaml-boolean-trap.yaml", path)
    before = path.read_bytes()
    result = CliRunner().invoke(app, ["recipe", "upgrade", str(path)])
    assert result.exit_code == 2
    assert "YAML reads OFF as false" in result.stderr and f"{path}:15:" in result.stderr
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_an_existing_different_backup_is_not_overwritten(v1_file: Path) -> None:
    backup = v1_file.with_name("my-recipe.yaml.v1.bak")
    backup.write_text("# someone's earlier original\n")
    result = CliRunner().invoke(app, ["recipe", "upgrade", str(v1_file)])
    assert result.exit_code == 2
    assert "already exists" in result.stderr and "--no-backup" in result.stderr
    assert v1_file.read_text() == V1.read_text() and backup.read_text() == "# someone's earlier original\n"


def test_set_is_refused(v1_file: Path) -> None:
    result = CliRunner().invoke(app, ["--set", "name=x", "recipe", "upgrade", str(v1_file)])
    assert result.exit_code == 2 and "--set does not apply" in result.stderr
    assert v1_file.read_text() == V1.read_text()


def test_the_v1_notice_is_one_line_on_stderr_only(v1_file: Path) -> None:
    shown = CliRunner().invoke(app, ["--json", "recipe", "show", str(v1_file), "--raw"])
    assert shown.exit_code == 0, shown.stderr
    json.loads(shown.stdout)  # stdout stays one clean document
    assert shown.stderr.count(_notice(v1_file)) == 1
    assert "schema_version: schema version 1" not in shown.stderr  # not a second time as a warning
    checked = CliRunner().invoke(app, ["recipe", "validate", str(v1_file)])
    assert checked.exit_code == 0, checked.stderr
    assert checked.stderr.count("is schema version 1, read as version 3") == 1
    assert checked.stdout == ""


def test_a_v3_recipe_gets_no_notice() -> None:
    result = CliRunner().invoke(app, ["recipe", "validate", str(bundled_dir("recipes") / "flagtree-cpu-arm64.yaml")])
    assert result.exit_code == 0, result.stderr
    assert "schema version" not in result.stderr and "recipe upgrade" not in result.stderr


def _listed(folder: Path) -> list[str]:
    result = CliRunner().invoke(app, ["--json", "--recipes-dir", str(folder), "recipe", "list"])
    assert result.exit_code == 0, result.stderr
    return [r["name"] for r in json.loads(result.stdout)["result"]["recipes"] if r["origin"] == "user"]


def test_the_kept_original_is_not_listed_as_one_more_recipe(v1_file: Path) -> None:
    result = CliRunner().invoke(app, ["recipe", "upgrade", str(v1_file)])
    assert result.exit_code == 0, result.stderr
    assert _listed(v1_file.parent) == ["my-recipe"]


def test_an_older_upgrades_v1_yaml_original_is_not_listed_beside_its_recipe(v1_file: Path) -> None:
    """Upgrades before the .v1.bak name kept my-recipe.v1.yaml: recipe list does not show it as a recipe."""
    shutil.copy(v1_file, v1_file.with_name("my-recipe.v1.yaml"))
    (v1_file.parent / "other.v1.yaml").write_text(v1_file.read_text())  # no other.yaml: a recipe of its own
    assert _listed(v1_file.parent) == ["my-recipe", "other.v1"]
