"""`requirements_file` entries of python.build/runtime (issue 29 item 2): a project's own requirements file read
from a synced source — its requirement lines and the `-r` includes of the same source installed like any
entry (real pip, a loopback PEP 503 index), recorded in the lock — while everything else a hostile file may hold
(-e, pip options, URLs, paths out of the source, a FIFO, a link out) is a located problem (file, line, key;
exit 2), and a plan made before sync says when the file will be read."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.digest import hash_bytes
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import commit_all, git, publish_bare
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.venvs import build_venv, packed_wheel

HOST = platform.machine()
WHEELS = {("fixture-lib", "1.0"): (), ("fixture-lib", "2.0"): (), ("fixture-app", "1.0"): ()}
ENTRY = {"requirements_file": {"source": "proj", "file": "python/requirements.txt"}}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackHTTPServer]:
    folder = tmp_path_factory.mktemp("wheels")
    server = LoopbackHTTPServer()
    links: dict[str, list[str]] = {}
    for (name, version), requires in WHEELS.items():
        wheel = packed_wheel(folder, name, version, requires=requires)
        server.serve(f"/simple/files/{wheel.name}", wheel.read_bytes())
        links.setdefault(name, []).append(f'<a href="/simple/files/{wheel.name}">{wheel.name}</a>')
    for name, anchors in links.items():
        server.serve(f"/simple/{name}/", f"<html><body>{''.join(anchors)}</body></html>".encode(),
                     **{"Content-Type": "text/html"})
    yield server
    server.close()


class World:
    def __init__(self, root: Path) -> None:
        self.root, self.ws = root, root / "ws"
        self.ws.mkdir()
        self.checkout = self.ws / "proj"  # where sync puts source proj

    def recipe(self, python: dict[str, Any], source: dict[str, Any] | None = None) -> Path:
        data = {"schema_version": 2, "name": "reqfile-fixture", "platform": {"host": {"arch": [HOST]}},
                "sources": {"proj": source or {"url": "https://example.invalid/proj.git", "ref": "main"}},
                "python": python}
        path = self.root / "reqfile-fixture.yaml"
        path.write_text(json.dumps(data, indent=1))  # JSON is YAML
        return path

    def run(self, recipe: Path, *args: str) -> Result:
        return CliRunner().invoke(app, ["-w", str(self.ws), "--recipe", str(recipe), "--json", *args])

    def files(self, files: dict[str, str]) -> None:
        """The source as a checkout would have it (a plain folder: reading needs no git)."""
        for rel, text in files.items():
            (self.checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.checkout / rel).write_text(text)


@pytest.fixture
def world(tmp_path: Path, index: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("PIP_INDEX_URL", index.url("/simple/"))
    return World(tmp_path)


def installed(python: Path, name: str) -> str | None:
    out = subprocess.run([str(python), "-c", "import sys; from importlib import metadata as m\ntry: "
                          "print(m.version(sys.argv[1]))\nexcept m.PackageNotFoundError: print('-')", name],
                         capture_output=True, text=True, check=True).stdout.strip()
    return None if out == "-" else out


def test_a_synced_sources_requirements_and_includes_are_installed_and_recorded_in_the_lock(world: World) -> None:
    files = {"python/requirements.txt": "# the project's pins\nfixture-lib<2  # ABI\n-r test-requirements.txt\n",
             "python/test-requirements.txt": "fixture-app\n"}
    work = world.root / "work"
    work.mkdir()
    env = dict(os.environ)
    git("init", "--quiet", "-b", "main", cwd=work, env=env)
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    commit = commit_all(work, "pins", env)
    publish_bare(work, world.root / "proj.git", env)
    recipe = world.recipe({"build": [ENTRY]}, {"url": f"file://{world.root / 'proj.git'}", "commit": commit})
    assert world.run(recipe, "sync").exit_code == 0
    python = build_venv(world.root / "venv", ["pip"])
    result = world.run(recipe, "python", "--python", str(python))
    assert result.exit_code == 0, result.stdout
    assert (installed(python, "fixture-lib"), installed(python, "fixture-app")) == ("1.0", "1.0")
    lock = (world.ws / ".flagtree-cpu" / "lock.yaml").read_text()
    import yaml

    assert yaml.safe_load(lock)["requirements_files"] == {"python.build[0]": {
        "source": "proj", "file": "python/requirements.txt", "commit": commit,
        "files": {rel: hash_bytes(text.encode()) for rel, text in files.items()},
        "requirements": ["fixture-lib<2", "fixture-app"]}}


@pytest.mark.parametrize(("line", "message"), [
    ("-e ../other", "an editable install is refused"),
    ("--index-url https://pypi.example/simple", "pip options are refused"),
    ("fixture-lib==1.0 --hash=sha256:00", "pip options are refused"),
    ("https://files.example/fixture_lib-1.0-py3-none-any.whl", "is not a requirement"),
    ("fixture-lib @ https://files.example/fixture_lib-1.0-py3-none-any.whl", "a requirement from a URL is refused"),
    ("-r ../../../etc/hostname", "is outside source proj"),
])
def test_every_line_that_is_not_a_plain_requirement_is_a_located_problem(world: World, line: str,
                                                                          message: str) -> None:
    world.files({"python/requirements.txt": f"fixture-app\n\n{line}\n"})
    result = world.run(world.recipe({"build": [ENTRY]}), "python", "--python", str(world.root / "none"))
    assert result.exit_code == 2, result.stdout
    [problem] = error_of(result.stdout)["problems"]
    assert problem["key"] == "python.build[0].requirements_file" and message in problem["message"], problem
    assert problem["file"] == str(world.checkout / "python/requirements.txt") and problem["line"] == 3, problem


@pytest.mark.timeout(60)
def test_a_fifo_a_link_out_of_the_source_and_a_missing_file_are_refused_at_once(world: World) -> None:
    (world.checkout / "python").mkdir(parents=True)
    os.mkfifo(world.checkout / "python" / "requirements.txt")  # nobody writes: a plain open() would wait forever
    recipe = world.recipe({"build": [ENTRY]})
    fifo = error_of(world.run(recipe, "status").stdout)
    assert "not a regular file" in fifo["problems"][0]["message"], fifo
    (world.checkout / "python" / "requirements.txt").unlink()
    (world.checkout / "python" / "requirements.txt").symlink_to("/etc/hostname")
    out = error_of(world.run(recipe, "status").stdout)
    assert "leads outside source proj" in out["problems"][0]["message"], out
    (world.checkout / "python" / "requirements.txt").unlink()
    missing = error_of(world.run(recipe, "status").stdout)
    assert "does not exist in source proj" in missing["problems"][0]["message"], missing


def test_a_plan_made_before_sync_says_the_file_is_read_after_sync(world: World) -> None:
    python = build_venv(world.root / "venv", ["pip"])
    result = world.run(world.recipe({"build": [ENTRY, "fixture-app"]}), "status", "--python", str(python))
    [item] = [i for i in result_of(result.stdout)["items"] if i["area"] == "python" and i["subject"] == str(python)]
    assert "python.build[0]: read from python/requirements.txt of source proj after sync" in item["detail"], item
    assert "fixture-app" in item["detail"]  # the recipe's own entries are planned as ever


@pytest.mark.parametrize("entry", [
    {"requirement": "fixture-app", "requirements_file": ENTRY["requirements_file"]},
    {"requirements_file": {"source": "prj", "file": "python/requirements.txt"}},
    {"requirements_file": {"source": "proj", "file": "../outside.txt"}},
], ids=["both", "unknown-source", "escapes"])
def test_a_malformed_entry_is_a_recipe_problem_at_its_key(world: World, entry: dict[str, Any]) -> None:
    result = world.run(world.recipe({"build": [entry]}), "recipe", "validate")
    assert result.exit_code == 2, result.stdout
    [problem] = error_of(result.stdout)["problems"]
    assert problem["key"].startswith("python.build[0]") and problem["line"], problem


def test_a_requirement_both_a_requirements_file_and_the_run_time_list_name_is_planned_once(world: World) -> None:
    """FlagTree's python/requirements.txt (python.build) and the recipe's python.runtime both name pytest: the plan
    listed it twice ("missing: pytest ..., pytest ..."; "pip install ... pytest pytest")."""
    world.files({"python/requirements.txt": "fixture-lib\nfixture-app\n"})
    python = build_venv(world.root / "venv", ["pip"])
    recipe = world.recipe({"build": [ENTRY], "runtime": ["fixture-app", "fixture-lib>=1"]})
    result = world.run(recipe, "setup", "--dry-run", "--python", str(python))
    [item] = [i for i in result_of(result.stdout)["items"] if i["area"] == "python" and i["subject"] == str(python)]
    assert item["missing"].count("fixture-app") == 1, item
    assert item["action"].split().count("fixture-app") == 1, item
    assert "fixture-lib>=1" in item["action"].split()  # a different requirement of the same name stays
