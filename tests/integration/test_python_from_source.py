"""A Python requirement installed from a recipe source (`python.build: [{source: NAME, subdir: REL}]`): pip
installs that checkout (built with the target Python's own build tools, so offline too), once per commit of the
source; a source that is not checked out, or a subdir that leads out of it, is refused in words."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.gitworld import commit_all, git, publish_bare
from tests.support.venvs import build_venv

HOST = platform.machine()
SETUP = "from setuptools import setup\nsetup(name='fixture-gtest-py', version='{v}', packages=['fixture_gtest_py'])\n"


class World:
    def __init__(self, root: Path) -> None:
        self.root, self.ws = root, root / "ws"
        self.work = root / "work"
        self.work.mkdir()
        self.env = dict(os.environ)
        git("init", "--quiet", "-b", "main", cwd=self.work, env=self.env)
        self.commits = [self.commit("1.0")]
        publish_bare(self.work, root / "proj.git", self.env)
        git("remote", "add", "origin", root / "proj.git", cwd=self.work, env=self.env)

    def commit(self, version: str) -> str:
        (self.work / "python/fixture_gtest_py").mkdir(parents=True, exist_ok=True)
        (self.work / "python/fixture_gtest_py/__init__.py").write_text(f"VERSION = {version!r}\n")
        (self.work / "python/setup.py").write_text(SETUP.format(v=version))
        return commit_all(self.work, version, self.env)

    def recipe(self, entry: dict[str, Any], commit: str) -> Path:
        data = {"schema_version": 2, "name": "from-source", "platform": {"host": {"arch": [HOST]}},
                "sources": {"proj": {"url": (self.root / "proj.git").as_uri(), "commit": commit}},
                "python": {"build": [entry]}}
        path = self.root / "from-source.yaml"
        path.write_text(json.dumps(data, indent=1))
        return path

    def run(self, recipe: Path, *args: str) -> Result:
        return CliRunner().invoke(app, ["-w", str(self.ws), "--recipe", str(recipe), *args])


def installed(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import fixture_gtest_py as m; print(m.VERSION)"],
                          capture_output=True, text=True, cwd="/").stdout.strip()


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_a_sources_checkout_is_pip_installed_offline_once_per_commit(world: World) -> None:
    python = build_venv(world.root / "venv", ["pip", "setuptools", "wheel"])
    entry = {"source": "proj", "subdir": "python"}
    recipe = world.recipe(entry, world.commits[0])
    assert world.run(recipe, "sync").exit_code == 0
    result = world.run(recipe, "python", "--python", str(python), "--offline")
    assert result.exit_code == 0, result.output
    assert installed(python) == "1.0"
    assert "proj" in result.output and world.commits[0][:12] in result.output
    assert git("status", "--porcelain", "--ignored", cwd=world.ws / "proj") == ""  # no build/ nor .egg-info there
    again = world.run(recipe, "python", "--python", str(python), "--offline")
    assert again.exit_code == 0 and "installed from" not in again.output  # the same commit: not again
    world.commits.append(world.commit("2.0"))
    git("push", "--quiet", "origin", "HEAD:main", cwd=world.work, env=world.env)
    recipe = world.recipe(entry, world.commits[1])
    assert world.run(recipe, "sync").exit_code == 0
    moved = world.run(recipe, "python", "--python", str(python), "--offline")
    assert moved.exit_code == 0, moved.output
    assert installed(python) == "2.0"


def test_a_source_not_checked_out_stops_the_python_stage_naming_sync(world: World) -> None:
    python = build_venv(world.root / "venv", ["pip"])
    recipe = world.recipe({"source": "proj"}, world.commits[0])
    result = world.run(recipe, "python", "--python", str(python), "--offline")
    assert result.exit_code == 5, result.output
    text = " ".join(result.output.split())
    assert "python.build[0] installs source proj, which is not checked out" in text and " sync " in text, text


@pytest.mark.parametrize("entry, said", [
    ({"source": "prj"}, "did you mean 'proj'?"),
    ({"source": "proj", "subdir": "../x"}, "escapes the source's folder"),
    ({"source": "proj", "requirement": "x"}, "either"),
    ({"requirement": "x", "subdir": "python"}, "subdir goes with source"),
])
def test_a_source_entry_that_cannot_work_is_a_located_recipe_problem(world: World, entry: dict[str, Any],
                                                                      said: str) -> None:
    result = world.run(world.recipe(entry, world.commits[0]), "recipe", "validate", str(world.root /
                                                                                        "from-source.yaml"))
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    assert "python.build[0]" in result.output
