"""A non-editable install (as pip or pipx does it) works from any directory.

The wheel is built from a copy of the repository, installed with `pip install
--no-index` into a brand-new venv whose dependencies are linked in from the test venv
(no network), and exercised from a temporary folder.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.support.envelope import result_of
from tests.support.venvs import make_venv, provision_dependencies, site_packages

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(root / "dist"), str(source)], check=True, capture_output=True)
    [wheel] = (root / "dist").glob("flagtree_cpu-*.whl")
    python = make_venv(root / "venv")
    deps = provision_dependencies("flagtree-cpu", root / "deps")
    (site_packages(python) / "provisioned-deps.pth").write_text(str(deps) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", str(wheel)],
                   check=True, capture_output=True)
    return root / "venv" / "bin" / "flagtree-cpu"


def run(cli: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(cli), *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_recipe_list_finds_the_bundled_recipe(installed: Path, tmp_path: Path) -> None:
    result = run(installed, "--json", "recipe", "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [entry] = [r for r in result_of(result.stdout)["recipes"] if r["name"] == "flagtree-cpu-arm64"]
    assert entry["status"] == "valid"
    # shipped inside the package, not read from the source tree
    assert "/site-packages/flagtree_cpu_build/recipes/" in entry["file"]


def test_recipe_show_prints_the_resolved_recipe(installed: Path, tmp_path: Path) -> None:
    result = run(installed, "recipe", "show", "flagtree-cpu-arm64", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(result.stdout)
    assert data["build"]["cwd"] == str(tmp_path / "flagtree-workspace" / "FlagTree")
    assert data["sources"]["flagtree"]["commit"] == "3911e5bf145c039104aa31ef2fef0e55f569c9e5"


def test_recipe_schema_validates_the_bundled_recipe(installed: Path, tmp_path: Path) -> None:
    result = run(installed, "recipe", "schema", cwd=tmp_path)
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    raw = run(installed, "--json", "recipe", "show", "--raw", cwd=tmp_path)
    jsonschema.Draft202012Validator(schema).validate(result_of(raw.stdout)["recipe"])


def test_the_preset_scripts_ship_inside_the_package(installed: Path, tmp_path: Path) -> None:
    result = run(installed, "--json", "validate", "--list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = result_of(result.stdout)
    assert "/site-packages/flagtree_cpu_build/presets" in document["folder"]
    assert all(Path(p["script"]).is_file() for p in document["presets"])
    assert (Path(document["folder"]) / "flagtree" / "_common.py").is_file()
