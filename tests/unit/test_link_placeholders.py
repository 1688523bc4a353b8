"""Placeholders in `links` entries (issue 29, follow-up of item 5): README steps such as
`ln -s python/build/cmake.{platform.tag}-cpython-{python.version} build` are recipe data. A link takes the values
that name things ({python.version}, {python.tag}, {platform.tag}, {arch}, {host.arch}, {target.arch}, {variant}),
never a folder ({workdir}: links are relative); the link rules (relative, inside the root, no duplicates, no link
inside a link) hold after filling in, and a break is a located recipe problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve
from flagtree_cpu_build.recipe.files import parse_recipe
from flagtree_cpu_build.workspace import Workspace

HOST = HostFacts("linux", "x86_64", "ubuntu", "22.04", "Ubuntu", 4, None, 16 * 2**30)
RECIPE = """\
schema_version: 3
name: links-demo
platform:
  host: {{arch: [x86_64, aarch64]}}
sources:
  app: {{url: "https://example.invalid/app.git", ref: main}}
links:
  root: app
  entries:
{entries}
"""
BUILD_DIR = '    - {path: build, target: "python/build/cmake.{platform.tag}-cpython-{python.version}"}'


def _recipe(*entries: str, folder: Path | None = None):
    text = RECIPE.format(entries="\n".join(entries))
    if folder is None:
        return parse_recipe(text, "links.yaml")
    (folder / "links.yaml").write_text(text)  # read again to say the line of a problem found after filling in
    return parse_recipe(text, str(folder / "links.yaml"))


def _values(recipe, tmp_path: Path, **changed: str) -> dict[str, str]:
    return {**placeholder_values(recipe, Workspace(tmp_path / "ws"), HOST, {"HOME": str(tmp_path)}), **changed}


def test_a_links_target_takes_the_interpreters_build_folder_name(tmp_path: Path) -> None:
    recipe = _recipe(BUILD_DIR, '    - {path: "lib-{arch}", target: "python/lib.{python.tag}"}')
    values = _values(recipe, tmp_path, **{"platform.tag": "linux-x86_64", "python.version": "3.11",
                                          "python.tag": "cp311"})
    entries = resolve(recipe, tmp_path / "ws", values, {}).links.entries
    assert (entries[0].path, entries[0].target) == ("build", "python/build/cmake.linux-x86_64-cpython-3.11")
    assert (entries[1].path, entries[1].target) == ("lib-x86_64", "python/lib.cp311")


@pytest.mark.parametrize("placeholder", ["workdir", "sources.app.path", "home", "env.HOME"])
def test_a_folder_placeholder_in_a_link_is_a_located_problem(placeholder: str) -> None:
    with pytest.raises(RecipeError) as caught:
        _recipe(f'    - {{path: build, target: "{{{placeholder}}}/python/build"}}')
    [problem] = caught.value.problems
    assert (problem.line, problem.key) == (10, "links.entries[0].target")
    assert f"{{{placeholder}}}" in problem.message and "relative" in problem.message, problem


def test_a_misspelt_placeholder_in_a_link_says_the_near_one() -> None:
    with pytest.raises(RecipeError) as caught:
        _recipe('    - {path: "build-{python.verison}", target: python/build}')
    [problem] = caught.value.problems
    assert problem.key == "links.entries[0].path" and "python.version" in problem.message, problem


def test_a_filled_in_target_that_leaves_the_root_is_a_located_problem(tmp_path: Path) -> None:
    recipe = _recipe('    - {path: build, target: "{platform.tag}/elsewhere"}', folder=tmp_path)
    with pytest.raises(RecipeError) as caught:  # an interpreter that names its platform '..'
        resolve(recipe, tmp_path / "ws", _values(recipe, tmp_path, **{"platform.tag": ".."}), {})
    [problem] = caught.value.problems
    assert (problem.origin, problem.line, problem.key) == (str(tmp_path / "links.yaml"), 10, "links.entries[0].target")
    assert "resolves outside the root source" in problem.message and "{platform.tag}" in problem.message, problem


def test_links_that_become_one_after_filling_in_are_a_located_problem(tmp_path: Path) -> None:
    recipe = _recipe('    - {path: "out-{python.version}", target: python/a}',
                     "    - {path: out-3.11, target: python/b}",
                     "    - {path: lib-3.11, target: python/c}", '    - {path: "lib-{python.version}/x", target: ../d}')
    with pytest.raises(RecipeError) as caught:
        resolve(recipe, tmp_path / "ws", _values(recipe, tmp_path, **{"python.version": "3.11"}), {})
    messages = {p.key: p.message for p in caught.value.problems}
    assert "duplicate link path 'out-3.11'" in messages["links.entries[1].path"], messages
    assert "lies inside link 'lib-3.11'" in messages["links.entries[3].path"], messages
