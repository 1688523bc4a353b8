"""`python.uninstall` (issue 29 item 7): a vendor's torch pulls in a triton that would shadow the one the recipe
builds, so the python stage removes the names it lists after the prerequisites are installed — through real pip
runs on a loopback PEP 503 index — and records what it removed. The build's own install (from inside the
workspace) is never removed, so a second run removes nothing; pip uninstall reads no index, so --offline works."""

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
from tests.support.envelope import error_of, result_of
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.venvs import build_venv, packed_wheel, site_packages

HOST = platform.machine()
WHEELS = {("fixture-torch", "1.0"): ("fixture-triton",), ("fixture-triton", "1.0"): ()}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("wheels")
    return {name: packed_wheel(folder, name, version, requires=requires)
            for (name, version), requires in WHEELS.items()}


@pytest.fixture(scope="module")
def index(wheels: dict[str, Path]) -> Iterator[LoopbackHTTPServer]:
    server = LoopbackHTTPServer()
    for name, wheel in wheels.items():
        server.serve(f"/simple/files/{wheel.name}", wheel.read_bytes())
        server.serve(f"/simple/{name}/", f'<html><body><a href="/simple/files/{wheel.name}">{wheel.name}</a>'
                     "</body></html>".encode(), **{"Content-Type": "text/html"})
    yield server
    server.close()


class World:
    """A workspace, a target venv with pip, and a recipe whose python section the test gives."""

    def __init__(self, root: Path, index: LoopbackHTTPServer, wheels: dict[str, Path]) -> None:
        self.root, self.index, self.wheels = root, index, wheels
        self.ws = root / "ws"
        self.ws.mkdir()
        self.python = build_venv(root / "venv", ["pip"])
        self.index.requests.clear()

    def run(self, python: dict[str, Any], *args: str, command: str = "python") -> Result:
        data = {"schema_version": 2, "name": "uninstall-fixture", "platform": {"host": {"arch": [HOST]}},
                "sources": {}, "python": python}
        recipe = self.root / "uninstall-fixture.yaml"
        recipe.write_text(json.dumps(data, indent=1))  # JSON is YAML
        return CliRunner().invoke(app, ["-w", str(self.ws), "--recipe", str(recipe), "--json", command,
                                        "--python", str(self.python), *args])

    def pip_install(self, wheel: Path) -> None:
        """Install a wheel file as an installer would (PEP 610 records the file it came from)."""
        subprocess.run([str(self.python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                       check=True, capture_output=True)

    def place(self, name: str) -> None:
        """Put a distribution in as a vendor's installer would have (unpacked, no pip, no direct_url.json)."""
        with zipfile.ZipFile(self.wheels[name]) as archive:
            archive.extractall(site_packages(self.python))

    def installed(self, name: str) -> str | None:
        out = subprocess.run([str(self.python), "-c", "import sys; from importlib import metadata as m\ntry: "
                              "print(m.version(sys.argv[1]))\nexcept m.PackageNotFoundError: print('-')", name],
                             capture_output=True, text=True, check=True).stdout.strip()
        return None if out == "-" else out


@pytest.fixture
def world(tmp_path: Path, index: LoopbackHTTPServer, wheels: dict[str, Path],
          monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("PIP_INDEX_URL", index.url("/simple/"))
    return World(tmp_path, index, wheels)


def uninstall_action(result: Result) -> dict[str, Any]:
    return next(a for a in result_of(result.stdout)["actions"] if a["subject"] == "uninstall")


PULLS_TRITON = {"build": ["fixture-torch"], "uninstall": ["fixture-triton"]}


def test_what_a_prerequisite_pulls_in_is_uninstalled_after_the_prerequisites_and_recorded(world: World) -> None:
    result = world.run(PULLS_TRITON)
    assert result.exit_code == 0, result.stderr
    assert (world.installed("fixture-torch"), world.installed("fixture-triton")) == ("1.0", None)
    action = uninstall_action(result)
    assert action["status"] == "updated"
    assert action["uninstalled"] == {"fixture-triton": {"version": "1.0", "origin": "from a package index"}}
    assert Path(action["log"]).is_file()


def test_a_second_run_removes_nothing_and_reads_no_index_even_offline(world: World) -> None:
    assert world.run(PULLS_TRITON).exit_code == 0
    world.index.requests.clear()
    again = world.run(PULLS_TRITON, "--offline")
    assert again.exit_code == 0, again.stderr
    assert uninstall_action(again)["status"] == "ok" and world.index.requests == []
    assert result_of(again.stdout)["status"] == "ok"


def test_a_vendor_installed_copy_is_uninstalled_with_offline(world: World) -> None:
    world.place("fixture-torch")
    world.place("fixture-triton")  # the vendor's installer brought it: no pip, no index involved
    result = world.run(PULLS_TRITON, "--offline")
    assert result.exit_code == 0, result.stderr
    assert world.installed("fixture-triton") is None and world.installed("fixture-torch") == "1.0"
    assert world.index.requests == []


def test_the_builds_own_install_from_the_workspace_is_never_uninstalled(world: World) -> None:
    built = world.ws / "dist" / world.wheels["fixture-triton"].name  # as `build` installs what it made here
    built.parent.mkdir()
    built.write_bytes(world.wheels["fixture-triton"].read_bytes())
    world.pip_install(built)
    result = world.run(PULLS_TRITON)
    assert result.exit_code == 0, result.stderr
    assert world.installed("fixture-triton") == "1.0"
    action = uninstall_action(result)
    assert action["status"] == "ok" and f"kept, the build's own: fixture-triton 1.0 (from {built})" in action["detail"]


def test_a_copy_installed_from_a_file_elsewhere_is_uninstalled(world: World) -> None:
    world.pip_install(world.wheels["fixture-triton"])  # a vendor's wheel file outside the workspace
    result = world.run(PULLS_TRITON)
    assert result.exit_code == 0, result.stderr
    assert world.installed("fixture-triton") is None
    assert uninstall_action(result)["uninstalled"]["fixture-triton"]["origin"] == \
        f"from {world.wheels['fixture-triton']}"


def test_status_plans_the_uninstall_with_its_reason(world: World) -> None:
    world.place("fixture-torch")
    world.place("fixture-triton")
    result = world.run(PULLS_TRITON, command="status")
    items = [i for i in result_of(result.stdout)["items"] if i["area"] == "python" and i["subject"] == "uninstall"]
    assert [(i["action"], i["will"], i["uninstall"]) for i in items] == [
        ("pip uninstall -y fixture-triton", "updated", ["fixture-triton"])], result.stdout
    assert world.installed("fixture-triton") == "1.0"  # status changes nothing


@pytest.mark.parametrize(("uninstall", "message"), [
    (["fixture-torch"], "fixture-torch is also a prerequisite (python.build[0])"),
    (["fixture-triton==1.0"], "'fixture-triton==1.0' is not a distribution name"),
    (["--all"], "'--all' is not a distribution name"),
])
def test_an_uninstall_name_that_is_a_prerequisite_or_not_a_name_is_a_located_recipe_problem(
        world: World, uninstall: list[str], message: str) -> None:
    result = world.run({"build": ["fixture-torch"], "uninstall": uninstall})
    assert result.exit_code == 2, result.stdout
    [problem] = error_of(result.stdout)["problems"]
    assert problem["key"] == "python.uninstall[0]" and problem["line"] and message in problem["message"], problem
    assert world.installed("fixture-torch") is None  # refused before pip
