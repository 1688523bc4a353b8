"""A non-editable install (as pip or pipx does it) works from any directory, and carries the whole tree.

The wheel and the sdist are built from a copy of the repository; the wheel is installed with `pip install
--no-index` into a brand-new venv whose dependencies are linked in from the test venv (no network), and
exercised from a temporary folder. Every module and data file of the source tree must be in the wheel, and in
the wheel pip builds from the sdist: a hand-kept package list once shipped a tool without `bundle/`, which only
a user running `bundle verify` found. (The installed-wheel tier, tests/installed/, drives whole flows through an
installed console script; these tests keep the main suite honest about what is packaged.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.support.envelope import result_of
from tests.support.venvs import make_venv, provision_dependencies, site_packages

pytestmark = pytest.mark.slow

_NOT_SOURCES_ANYWHERE = shutil.ignore_patterns(".git", ".venv*", "*.egg-info", "__pycache__", ".pytest_cache",
                                               ".ruff_cache")


def _not_sources(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out: build/ and dist/ only at the top, where setuptools writes them; a package folder
    named build (flagtree_cpu_build/stages/build/) is source and must ship."""
    skipped = set(_NOT_SOURCES_ANYWHERE(folder, names))
    if Path(folder) == REPO_ROOT:
        skipped |= {"build", "dist"} & set(names)
    return skipped


def shipped_tree() -> set[str]:
    """What the wheel must carry, as paths inside it: every file of the package folder, the bundled recipes and
    the patches folder (both live at the top of the repository and ship inside the package)."""
    package = REPO_ROOT / "flagtree_cpu_build"
    found = {f"flagtree_cpu_build/{p.relative_to(package)}" for p in package.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    for folder in ("recipes", "patches"):
        found |= {f"flagtree_cpu_build/{folder}/{p.name}" for p in (REPO_ROOT / folder).iterdir() if p.is_file()}
    return found


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {n for n in archive.namelist() if n.startswith("flagtree_cpu_build/") and not n.endswith("/")}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The wheel built from a copy of the tree, the sdist, and the wheel pip builds from that sdist."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    shutil.copytree(REPO_ROOT, source, ignore=_not_sources)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*pip_wheel, "-w", str(root / "dist"), str(source)], check=True, capture_output=True)
    [wheel] = (root / "dist").glob("flagtree_cpu-*.whl")
    # the sdist through the build backend's own hook, as `python -m build --sdist` calls it
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
                    "print(build_meta.build_sdist(sys.argv[1]))", str(root / "sdist")],
                   cwd=source, check=True, capture_output=True)
    [sdist] = (root / "sdist").glob("flagtree_cpu-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(root / "from-sdist", filter="data")
    [unpacked] = (root / "from-sdist").iterdir()
    subprocess.run([*pip_wheel, "-w", str(root / "dist-from-sdist"), str(unpacked)], check=True, capture_output=True)
    [from_sdist] = (root / "dist-from-sdist").glob("flagtree_cpu-*.whl")
    return {"root": root, "wheel": wheel, "sdist": sdist, "wheel_from_sdist": from_sdist}


@pytest.fixture(scope="module")
def installed(built: dict[str, Path]) -> Path:
    root = built["root"]
    python = make_venv(root / "venv")
    deps = provision_dependencies("flagtree-cpu", root / "deps")
    (site_packages(python) / "provisioned-deps.pth").write_text(str(deps) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", str(built["wheel"])],
                   check=True, capture_output=True)
    return root / "venv" / "bin" / "flagtree-cpu"


@pytest.mark.parametrize("kind", ["wheel", "wheel_from_sdist"])
def test_the_wheel_carries_every_module_and_data_file_of_the_tree(built: dict[str, Path], kind: str) -> None:
    expected = shipped_tree()
    carried = wheel_files(built[kind])
    assert "flagtree_cpu_build/bundle/archive.py" in expected  # the checker sees sub-packages
    assert not expected - carried, f"missing from the {kind}: {sorted(expected - carried)}"
    assert not carried - expected, f"in the {kind} but not in the tree: {sorted(carried - expected)}"


def test_every_module_of_the_installed_package_imports(installed: Path, tmp_path: Path) -> None:
    """Imports are lazy in many commands (start-up time), so a missing module shows only when a user runs the
    command that needs it: import every one of them up front. Not `__main__` (it runs the CLI) and not the preset
    scripts (they run in the target's interpreter, with its torch and triton)."""
    python = installed.parent / "python"
    script = ("import importlib, pkgutil, flagtree_cpu_build as p\n"
              "names = [m.name for m in pkgutil.walk_packages(p.__path__, 'flagtree_cpu_build.')\n"
              "         if not m.name.endswith('__main__') and not m.name.startswith('flagtree_cpu_build.presets.')]\n"
              "for name in names: importlib.import_module(name)\n"
              "print(p.__file__); print(*names)")
    result = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    where, *imported = result.stdout.split()
    assert "/site-packages/flagtree_cpu_build/" in where  # the installed copy, not the checkout
    package = REPO_ROOT / "flagtree_cpu_build"
    in_tree = {".".join(p.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in package.rglob("*.py")}
    expected = {n for n in in_tree if not n.endswith("__main__") and not n.startswith("flagtree_cpu_build.presets.")}
    assert set(imported) == expected - {"flagtree_cpu_build"}


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
