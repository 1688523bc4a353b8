"""`python.constraints` and `python.preinstalled`, through `flagtree-cpu python` and real pip runs on a loopback
PEP 503 index that holds two versions of a library (so a constraint visibly changes what pip picks).

- every pip run of the recipe's prerequisites gets `-c <recipe state>/constraints.txt`, and binds what they pull
  in; an installed version outside a constraint counts as missing (pip puts it right);
- a requirement no version satisfies together with a constraint is refused before pip (exit 2), naming both;
- preinstalled packages are checked, never pip-installed (exit 5 when missing or of another version, --offline
  or not), and their range binds pip so that no prerequisite replaces them.
"""

from __future__ import annotations

import json
import platform
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.pythonenv import constraints_file
from flagtree_cpu_build.recipe.files import parse_recipe
from flagtree_cpu_build.versions import cannot_meet_both
from flagtree_cpu_build.workspace import Workspace as ToolWorkspace
from tests.support.envelope import error_of, result_of
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.venvs import build_venv, packed_wheel, site_packages

HOST = platform.machine()
WHY = "the base build's ABI is fixture-lib 1"


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of an empty package (no build backend: milliseconds)."""
    return packed_wheel(folder, name, version, requires=requires)


WHEELS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "fixture-lib": [("1.0", ()), ("2.0", ())],
    "fixture-app": [("1.0", ("fixture-lib",))],  # pulls in fixture-lib: the constraint must bind it too
    "fixture-vendor-torch": [("2.1", ()), ("3.0", ())],  # what the vendor's installer would provide
    "fixture-needs-torch": [("1.0", ("fixture-vendor-torch>=3",))],  # would replace the vendor's torch
}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    folder = tmp_path_factory.mktemp("wheels")
    return {(name, version): make_wheel(folder, name, version, requires)
            for name, versions in WHEELS.items() for version, requires in versions}


@pytest.fixture(scope="module")
def index(wheels: dict[tuple[str, str], Path]) -> Iterator[LoopbackHTTPServer]:
    server = LoopbackHTTPServer()
    for name in WHEELS:
        links = []
        for (project, _version), wheel in wheels.items():
            if project == name:
                server.serve(f"/simple/files/{wheel.name}", wheel.read_bytes())
                links.append(f'<a href="/simple/files/{wheel.name}">{wheel.name}</a>')
        server.serve(f"/simple/{name}/", f"<html><body>{''.join(links)}</body></html>".encode(),
                     **{"Content-Type": "text/html"})
    yield server
    server.close()


class World:
    """A workspace, a target venv (pip, nothing else), and a recipe with the given python section."""

    def __init__(self, root: Path, index: LoopbackHTTPServer, wheels: dict[tuple[str, str], Path]) -> None:
        self.root, self.index, self.wheels = root, index, wheels
        self.ws = root / "ws"
        self.ws.mkdir()
        self.python = build_venv(root / "venv", ["pip"])
        self.index.requests.clear()

    def recipe(self, python: dict[str, Any]) -> Path:
        data = {"schema_version": 2, "name": "constraints-fixture", "platform": {"host": {"arch": [HOST]}},
                "sources": {}, "python": python}
        path = self.root / "constraints-fixture.yaml"
        path.write_text(json.dumps(data, indent=1))  # JSON is YAML
        return path

    def run(self, python: dict[str, Any], *args: str) -> Result:
        return CliRunner().invoke(app, ["-w", str(self.ws), "--recipe", str(self.recipe(python)), "python",
                                        "--python", str(self.python), *args])

    def place(self, name: str, version: str) -> None:
        """Put a distribution into the venv as another installer would have (unpacked, no pip)."""
        with zipfile.ZipFile(self.wheels[(name, version)]) as archive:
            archive.extractall(site_packages(self.python))

    def installed(self, name: str) -> str | None:
        out = subprocess.run([str(self.python), "-c", "import sys; from importlib import metadata as m\ntry: "
                              "print(m.version(sys.argv[1]))\nexcept m.PackageNotFoundError: print('-')", name],
                             capture_output=True, text=True, check=True).stdout.strip()
        return None if out == "-" else out

    def asked(self) -> list[str]:
        return [r.path for r in self.index.requests]

    @property
    def constraints(self) -> Path:
        return self.ws / ".flagtree-cpu" / "constraints.txt"


@pytest.fixture
def world(tmp_path: Path, index: LoopbackHTTPServer, wheels: dict[tuple[str, str], Path],
          monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("PIP_INDEX_URL", index.url("/simple/"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    return World(tmp_path, index, wheels)


def words(text: str) -> str:
    return " ".join(text.split())  # the console wraps long lines


# --- constraints ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_every_pip_run_gets_the_constraints_file_and_it_binds_what_the_prerequisites_pull_in(world: World,
                                                                                           installer: str) -> None:
    python = {"build": ["fixture-app"], "constraints": [{"requirement": "fixture-lib<2", "why": WHY}]}
    result = world.run(python, "--installer", installer)
    assert result.exit_code == 0, result.stderr
    # without the constraint the installer would take fixture-lib 2.0, the newest on the index
    assert (world.installed("fixture-app"), world.installed("fixture-lib")) == ("1.0", "1.0")
    run = "-m pip install fixture-app" if installer == "pip" else f"uv pip install --python {world.python} fixture-app"
    assert f"{run} -c {world.constraints}" in words(result.stderr)
    assert world.constraints.read_text() == (
        "# pip constraints of recipe constraints-fixture (python.constraints, python.preinstalled); written by "
        f"flagtree-cpu, do not edit\n# {WHY}\nfixture-lib<2\n")


def test_an_installed_version_outside_a_constraint_counts_as_missing_and_pip_puts_it_right(world: World) -> None:
    world.place("fixture-lib", "2.0")
    python = {"build": ["fixture-lib>=1"], "constraints": [{"requirement": "fixture-lib<2", "why": WHY}]}

    offline = world.run(python, "--offline", "--json")
    assert offline.exit_code == 5
    error = error_of(offline.stdout)
    assert error["details"] == [f"fixture-lib>=1: installed 2.0, outside the constraint fixture-lib<2 ({WHY})"]
    assert f"-c {world.constraints}" in error["fix"] and world.asked() == []
    assert world.installed("fixture-lib") == "2.0"

    fixed = world.run(python, "--json")
    assert fixed.exit_code == 0, fixed.stderr
    assert {a["subject"]: a["detail"] for a in result_of(fixed.stdout)["actions"]} == {
        "prerequisites": "installed fixture-lib with uv"}
    assert world.installed("fixture-lib") == "1.0"


@pytest.mark.parametrize(("requirement", "constraint"), [
    ("fixture-lib==2.0", "fixture-lib==1.0"),  # two pins
    ("fixture-lib>=2", "fixture-lib==1.0"),  # the constraint's pin is outside the requirement
    ("fixture-lib==2.0", "fixture-lib<2"),  # the requirement's pin is outside the constraint
    ("fixture-lib>=2", "fixture-lib<2"),  # two ranges that do not overlap
])
def test_a_requirement_that_cannot_meet_its_constraint_is_refused_before_pip(world: World, requirement: str,
                                                                              constraint: str) -> None:
    python = {"build": ["fixture-app", requirement], "constraints": [{"requirement": constraint, "why": WHY}]}
    for args in ((), ("--offline",)):  # the recipe's contradiction, whether pip may run or not
        result = world.run(python, "--json", *args)
        assert result.exit_code == 2, result.stdout
        error = error_of(result.stdout)
        assert error["code"] == "recipe"
        assert error["message"] == (f"recipe {world.recipe(python)}: the requirement {requirement} and the "
                                    f"constraint {constraint} ({WHY}) cannot both hold")
        [problem] = error["problems"]
        assert problem["key"] == "python.build[1]"
        assert problem["fix"].startswith(f"change the requirement to a range the constraint allows (e.g. "
                                         f"{constraint}), or")
        assert "pip was not run" in error["fix"]
    assert world.asked() == [] and world.installed("fixture-app") is None and not world.constraints.exists()


def test_a_runtime_requirement_that_is_not_installed_is_not_refused(world: World) -> None:
    python = {"build": ["fixture-lib"], "runtime": ["fixture-lib==2.0"],
              "constraints": [{"requirement": "fixture-lib==1.0"}]}
    result = world.run(python, "--skip-runtime")
    assert result.exit_code == 0, result.stderr
    assert world.installed("fixture-lib") == "1.0"
    refused = world.run(python, "--json")
    assert refused.exit_code == 2 and error_of(refused.stdout)["problems"][0]["key"] == "python.runtime[0]"


@pytest.mark.parametrize(("requirement", "constraint", "conflict"), [
    ("pybind11==3.0.3", "pybind11==3.1.0", True),
    ("setuptools>=80", "setuptools<80", True),
    ("setuptools>80", "setuptools<=80", True),
    ("setuptools>=80", "setuptools<=80", False),  # exactly 80
    ("pybind11>=2.13.1", "pybind11==3.1.0", False),
    ("torch==2.10.0+cpu", "torch==2.10.0", False),  # a local build of the pinned version
    ("torch==2.10.0", "torch==2.10.0+cpu", False),
    ("torch==2.10.0+cpu", "torch<2.10", True),
    ("numpy>=1.26,<2", "numpy!=1.26.4", False),  # subtler than bounds: pip decides
    ("numpy==1.26.*", "numpy>=2", False),  # a wildcard: pip decides
    ("numpy==1.26.4 ; python_version < '3'", "numpy>=2", False),  # a marker: pip decides
])
def test_which_pairs_cannot_both_hold(requirement: str, constraint: str, conflict: bool) -> None:
    assert cannot_meet_both(requirement, constraint) is conflict


def test_the_constraints_file_is_written_only_when_its_content_changes(tmp_path: Path) -> None:
    def recipe(constraints: list[str]) -> Any:
        text = json.dumps({"schema_version": 2, "name": "c", "platform": {"host": {"arch": [HOST]}}, "sources": {},
                           "python": {"constraints": constraints, "preinstalled": ["torch[opt]>=2.6,<2.7", "npu"]}})
        return parse_recipe(text, "c.yaml")

    ws = ToolWorkspace(tmp_path / "ws")
    first = constraints_file(recipe(["numpy<2"]), ws)
    assert first == ws.recipe_state / "constraints.txt"
    assert first.read_text().splitlines()[1:] == [
        "numpy<2", "# python.preinstalled: provided by the vendor's installer, never replaced by pip",
        "torch<2.7,>=2.6"]  # no extras (pip refuses them in constraints); a bare name limits nothing
    inode, mtime = first.stat().st_ino, first.stat().st_mtime_ns
    assert constraints_file(recipe(["numpy<2"]), ws) == first
    assert (first.stat().st_ino, first.stat().st_mtime_ns) == (inode, mtime)  # the same file, untouched
    constraints_file(recipe(["numpy<3"]), ws)
    assert "numpy<3" in first.read_text() and first.stat().st_ino != inode  # replaced in one step
    assert constraints_file(parse_recipe(json.dumps({"schema_version": 2, "name": "c", "platform": {
        "host": {"arch": [HOST]}}, "sources": {}}), "c.yaml"), ws) is None


# --- preinstalled -----------------------------------------------------------------------------------------------


def test_a_missing_preinstalled_package_stops_the_stage_and_is_never_pip_installed(world: World) -> None:
    python = {"build": ["fixture-lib"], "preinstalled": ["fixture-vendor-torch>=2,<3"]}
    for args in ((), ("--offline",)):
        result = world.run(python, "--json", *args)
        assert result.exit_code == 5, result.stdout
        error = error_of(result.stdout)
        assert error["code"] == "build"
        assert error["message"] == (f"fixture-vendor-torch>=2,<3 must be provided by the vendor's installer "
                                    f"(python.preinstalled), and {world.python} does not have it")
        assert error["details"] == ["fixture-vendor-torch>=2,<3: missing"]
        assert "never installs python.preinstalled packages with pip" in error["fix"]
    assert world.asked() == []  # neither the vendor's package nor the rest: the stage stopped first

    # the workspace venv would be new, so it could not have it either: nothing is created
    no_venv = CliRunner().invoke(app, ["-w", str(world.ws), "--recipe", str(world.recipe(python)), "python",
                                       "--json"])
    assert no_venv.exit_code == 5 and "must be provided by the vendor's installer" in error_of(no_venv.stdout)[
        "message"]
    assert not (world.ws / ".venv").exists()

    world.place("fixture-vendor-torch", "3.0")
    wrong = world.run(python, "--json")
    assert wrong.exit_code == 5
    assert error_of(wrong.stdout)["details"] == ["fixture-vendor-torch>=2,<3: installed 3.0, outside the range"]


def test_a_present_preinstalled_package_is_reported_and_pip_may_not_replace_it(world: World) -> None:
    world.place("fixture-vendor-torch", "2.1")
    python = {"build": ["fixture-lib"], "preinstalled": ["fixture-vendor-torch>=2,<3"]}
    result = world.run(python, "--json")
    assert result.exit_code == 0, result.stdout
    assert {a["subject"]: a["detail"] for a in result_of(result.stdout)["actions"]} == {
        "preinstalled": "fixture-vendor-torch 2.1", "prerequisites": "installed fixture-lib with uv"}
    assert not world.index.requests_for("/simple/fixture-vendor-torch/")

    # a prerequisite that needs another torch: the installer (uv here, auto), bound by the preinstalled range, refuses
    # instead of replacing it
    greedy = world.run({**python, "build": ["fixture-needs-torch"]}, "--json")
    assert greedy.exit_code == 5
    assert error_of(greedy.stdout)["message"] == "uv could not install the prerequisites (fixture-needs-torch)"
    assert world.installed("fixture-vendor-torch") == "2.1" and world.installed("fixture-needs-torch") is None


def test_the_dry_run_plan_shows_preinstalled_packages_and_conflicts(world: World) -> None:
    def plan(python: dict[str, Any]) -> dict[str, Any]:
        result = CliRunner().invoke(app, ["-w", str(world.ws), "--recipe", str(world.recipe(python)), "setup",
                                          "--dry-run", "--json", "--skip-validate", "--ignore-host", "--python",
                                          str(world.python)])
        document = result_of(result.stdout)
        return {"items": [i for i in document["items"] if i["area"] == "python"], "stop": document["would_stop"]}

    missing = plan({"preinstalled": ["fixture-vendor-torch>=2,<3"]})
    assert missing["stop"]["exit_code"] == 5 and missing["stop"]["stage"] == "python"
    assert "fixture-vendor-torch>=2,<3 must be provided by the vendor's installer" in missing["stop"]["reason"]

    world.place("fixture-vendor-torch", "2.1")
    present = plan({"preinstalled": ["fixture-vendor-torch>=2,<3"]})
    assert present["stop"] is None and "preinstalled fixture-vendor-torch 2.1" in present["items"][0]["detail"]

    conflict = plan({"build": ["fixture-lib==2.0"], "constraints": ["fixture-lib==1.0"]})
    assert conflict["stop"]["exit_code"] == 2
    assert conflict["items"][0]["detail"] == ("fixture-lib==2.0: cannot be met together with the constraint "
                                              "fixture-lib==1.0")
    assert world.asked() == []


def test_the_dry_run_exits_with_the_code_and_kind_the_real_setup_stops_with(world: World) -> None:
    """A recipe that contradicts itself stops setup with a recipe error (exit 2, code "recipe"); the dry run's
    verdict is that same error, not a generic one (it used to exit 1 with code "error")."""
    recipe = str(world.recipe({"build": ["fixture-lib==2.0"], "constraints": ["fixture-lib==1.0"]}))

    def run(*extra: str) -> Result:
        return CliRunner().invoke(app, ["-w", str(world.ws), "--recipe", recipe, "setup", "--json", "--skip-validate",
                                        "--ignore-host", "--python", str(world.python), *extra])

    planned, real = run("--dry-run"), run()
    assert real.exit_code == 2 and error_of(real.stdout)["code"] == "recipe"
    assert planned.exit_code == real.exit_code
    assert error_of(planned.stdout)["code"] == error_of(real.stdout)["code"]
    assert result_of(planned.stdout)["would_stop"]["exit_code"] == 2
