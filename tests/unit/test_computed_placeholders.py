"""Computed placeholders (issue 29, item 5): {python.version}, {python.tag} and {platform.tag} name the target
interpreter's build folder as setuptools and Triton do (`build/cmake.linux-x86_64-cpython-3.11`). Without a
target interpreter yet (the workspace venv `setup` makes from the running one) they are the running interpreter's;
the asking of a real interpreter is in tests/integration/test_values.py."""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import pytest

from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import InterpreterTags, parse_tags, placeholder_values
from flagtree_cpu_build.recipe import resolve
from flagtree_cpu_build.recipe.files import parse_recipe
from flagtree_cpu_build.workspace import Workspace

HOST = HostFacts("linux", "x86_64", "ubuntu", "22.04", "Ubuntu", 4, None, 16 * 2**30)
RECIPE = """\
schema_version: 2
name: tags-demo
platform:
  host: {arch: [x86_64, aarch64]}
sources:
  app: {url: "https://example.invalid/app.git", ref: main}
build:
  cwd: "{sources.app.path}"
  argv: ["{python}", setup.py, bdist_wheel, --python-tag, "{python.tag}"]
  env:
    set:
      TRITON_BUILD_DIR: "{sources.app.path}/build/cmake.{platform.tag}-cpython-{python.version}"
"""


def test_without_a_target_interpreter_they_are_the_running_one(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    recipe = parse_recipe(RECIPE, "t.yaml")
    values = placeholder_values(recipe, ws, HOST, {"HOME": str(tmp_path)})
    version = sysconfig.get_python_version()
    assert values["python.version"] == version
    assert values["python.tag"] == "cp" + version.replace(".", "")
    assert values["platform.tag"] == sysconfig.get_platform()
    build = resolve(recipe, ws.root, values, {}).build
    assert build.env.set["TRITON_BUILD_DIR"] == (
        f"{ws.root}/app/build/cmake.{sysconfig.get_platform()}-cpython-{version}")
    assert build.argv[-1] == f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.mark.parametrize(("answer", "tags"), [
    ("3.11\ncpython\nlinux-x86_64\n", InterpreterTags("3.11", "cp311", "linux-x86_64")),
    ("3.12\npypy\nlinux-aarch64\n", InterpreterTags("3.12", "pp312", "linux-aarch64")),
])
def test_an_interpreters_answer_becomes_the_tags(answer: str, tags: InterpreterTags) -> None:
    assert parse_tags(answer) == tags


@pytest.mark.parametrize("answer", ["", "3.11\n", "3\ncpython\nlinux-x86_64\n", "3.11\ncpython\nlinux x86_64\n",
                                    "3.11\ncpy;thon\nlinux-x86_64\n", "3.11\ncpython\n" + "l" * 300 + "\n"])
def test_an_answer_that_is_not_tags_is_refused(answer: str) -> None:
    assert parse_tags(answer) is None


def test_a_misspelt_computed_placeholder_is_a_located_problem() -> None:
    with pytest.raises(RecipeError) as caught:
        parse_recipe(RECIPE.replace("{python.tag}", "{python.tags}"), "t.yaml")
    [problem] = caught.value.problems
    assert problem.key == "build.argv[4]"
    assert "unknown placeholder {python.tags} (did you mean 'python.tag'?)" in problem.message
