"""Stacked recipes (`extends`) as the loader sees them: the base must load, recipes cannot extend each other
in a circle, a stacked recipe without a platform builds where its base does, and the per-recipe state folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe.files import load_base, load_recipe_file
from flagtree_cpu_build.workspace import Workspace

BASE = """\
schema_version: 2
name: base
platform:
  host: {arch: [aarch64], why: the base's own reason}
  target: {cpu_features: [sve2]}
system_packages: {apt: [git, zlib1g-dev]}
sources:
  main: {url: https://example.invalid/main.git, ref: main}
python:
  build: [pybind11>=2.13]
runtime:
  env: {set: {BASE_VAR: base}}
"""

TOP = """\
schema_version: 2
name: top
extends: {extends}
keep_installed: [triton]
sources:
  gems: {{url: https://example.invalid/gems.git, ref: main}}
python:
  constraints: [numpy==1.26.4, {{requirement: "setuptools<80", why: FlagGems' build backend}}]
runtime:
  env: {{set: {{TOP_VAR: top}}}}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def test_a_stacked_recipe_without_a_platform_builds_where_its_base_does(tmp_path: Path) -> None:
    write(tmp_path, "base", BASE)
    top = load_recipe_file(write(tmp_path, "top", TOP.format(extends="base.yaml")))
    assert top.extends == "base.yaml" and top.keep_installed == ("triton",)
    assert top.platform.host.arch == ("aarch64",) and top.platform.target.cpu_features == ("sve2",)
    assert top.platform.host.why == "the base's own reason"
    assert top.system_packages.apt == ("git", "zlib1g-dev")
    assert [(c.requirement, c.why) for c in top.python.constraints] == [
        ("numpy==1.26.4", ""), ("setuptools<80", "FlagGems' build backend")]
    base = load_base(top)
    assert base.name == "base" and base.extends is None


def test_a_stacked_recipe_keeps_its_own_platform(tmp_path: Path) -> None:
    write(tmp_path, "base", BASE)
    text = TOP.format(extends="base.yaml") + "platform:\n  host: {arch: [aarch64, x86_64]}\n"
    top = load_recipe_file(write(tmp_path, "top", text))
    assert top.platform.host.arch == ("aarch64", "x86_64")


def test_a_base_that_does_not_exist_is_named_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "top", TOP.format(extends="flagtree-cpu-arm46"))
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(path)
    [problem] = caught.value.problems
    assert problem.line == 3 and problem.key == "extends"
    assert "base recipe cannot be found" in problem.message and "flagtree-cpu-arm64" in problem.message


def test_an_invalid_base_is_reported_on_the_stacked_recipe(tmp_path: Path) -> None:
    write(tmp_path, "base", BASE.replace("ref: main", "ref: main, colour: blue"))
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(write(tmp_path, "top", TOP.format(extends="base.yaml")))
    [problem] = caught.value.problems
    assert "is not valid" in problem.message and "recipe validate" in problem.fix


def test_recipes_that_extend_each_other_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "base", BASE.replace("name: base\n", "name: base\nextends: top.yaml\n"))
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(write(tmp_path, "top", TOP.format(extends="base.yaml")))
    text = str(caught.value) + " ".join(p.message for p in caught.value.problems)
    assert "circle" in text


def test_the_bundled_flagtree_recipe_can_be_a_base(tmp_path: Path) -> None:
    top = load_recipe_file(write(tmp_path, "top", TOP.format(extends="flagtree-cpu-arm64")))
    assert top.platform.host.arch == ("aarch64",)
    assert load_base(top).name == "flagtree-cpu-arm64"


def test_a_stacked_recipe_keeps_its_state_in_a_folder_of_its_own(tmp_path: Path) -> None:
    first, stacked = Workspace(tmp_path), Workspace(tmp_path, layer="flaggems-arm")
    assert first.recipe_state == first.state_dir == tmp_path / ".flagtree-cpu"
    assert first.lock_file == tmp_path / ".flagtree-cpu" / "lock.yaml"
    assert stacked.recipe_state == tmp_path / ".flagtree-cpu" / "recipes" / "flaggems-arm"
    assert stacked.lock_file == stacked.recipe_state / "lock.yaml"
    assert stacked.busy_lock == first.busy_lock and stacked.empty_dir == first.empty_dir  # one workspace


# --- cycles through other names for the same file, and stacks too deep ---------------------------------------


def stacked(folder: Path, name: str, extends: str) -> Path:
    return write(folder, name, TOP.format(extends=extends).replace("name: top", f"name: {name}"))


def alias_cycles(tmp_path: Path) -> dict[str, Path]:
    """Recipes that extend themselves (or each other) under another name of the same file."""
    d = tmp_path / "d"
    d.mkdir()
    made = {"parent-folder": stacked(d, "a", "../d/a.yaml"), "dot-slash": stacked(d, "dot", "./dot.yaml")}
    made["absolute"] = stacked(d, "absolute", str(d / "absolute.yaml"))
    (d / "link.yaml").symlink_to(d / "linked.yaml")
    made["symlink"] = stacked(d, "linked", "link.yaml")
    stacked(d, "second", "./first.yaml")
    made["pair"] = stacked(d, "first", str(d / ".." / "d" / "second.yaml"))
    return made


@pytest.mark.parametrize("how", ["parent-folder", "dot-slash", "absolute", "symlink", "pair"])
def test_a_cycle_through_another_name_of_the_same_file_is_a_located_problem(tmp_path: Path, how: str) -> None:
    recipe = alias_cycles(tmp_path)[how]
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(recipe)
    [problem] = caught.value.problems
    assert caught.value.exit_code == 2
    assert problem.line == 3 and problem.key == "extends"
    assert "extend each other in a circle" in problem.message
    assert f"({recipe} -> " in problem.message  # the chain starts at the recipe asked for


def test_the_circle_is_shown_as_the_chain_of_files(tmp_path: Path) -> None:
    a = stacked(tmp_path, "a", "b.yaml")
    b = stacked(tmp_path, "b", "./a.yaml")
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(a)
    [problem] = caught.value.problems
    assert problem.message == f"the recipes extend each other in a circle ({a} -> {b} -> {a})"  # said once, whole
    again = tmp_path / ".." / tmp_path.name / "a.yaml"  # another name of a.yaml: said so
    b.write_text(b.read_text().replace("extends: ./a.yaml", f"extends: ../{tmp_path.name}/a.yaml"))
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(a)
    assert f"({a} -> {b} -> {again}; {again} is {a})" in caught.value.problems[0].message


def test_an_alias_cycle_is_exit_2_from_the_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flagtree_cpu_build.cli import app

    recipe = alias_cycles(tmp_path)["parent-folder"]
    result = CliRunner().invoke(app, ["recipe", "validate", str(recipe)])
    assert result.exit_code == 2, result.stderr
    assert f"{recipe}:3: extends: the recipes extend each other in a circle" in result.stderr
    assert "RecursionError" not in result.stderr and "unexpected" not in result.stderr


def test_a_stack_deeper_than_the_limit_is_refused_naming_the_chain(tmp_path: Path) -> None:
    from flagtree_cpu_build.recipe.files import MAX_STACK

    write(tmp_path, "r0", BASE.replace("name: base", "name: r0"))
    for level in range(1, MAX_STACK + 2):
        stacked(tmp_path, f"r{level}", f"r{level - 1}.yaml")
    assert load_recipe_file(tmp_path / f"r{MAX_STACK - 1}.yaml").name == f"r{MAX_STACK - 1}"  # a full stack loads
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(tmp_path / f"r{MAX_STACK + 1}.yaml")
    text = caught.value.problems[0].message
    assert f"recipes are stacked more than {MAX_STACK} deep" in text
    assert f"{tmp_path}/r{MAX_STACK + 1}.yaml -> " in text


@pytest.mark.parametrize("extends", ['"a\\0b"', '"a\\0b.yaml"', "x" * 5_000, "x" * 5_000 + ".yaml",
                                     "missing-folder/base.yaml", "/" + "d/" * 3_000 + "base.yaml"],
                         ids=["nul-name", "nul-path", "long-name", "long-file-name", "no-folder", "long-path"])
def test_a_hostile_extends_is_a_located_problem_not_a_crash(tmp_path: Path, extends: str) -> None:
    with pytest.raises(RecipeError) as caught:
        load_recipe_file(write(tmp_path, "top", TOP.format(extends=extends)))
    [problem] = caught.value.problems
    assert (problem.line, problem.key) == (3, "extends")
    assert "the base recipe cannot be found" in problem.message


@pytest.mark.parametrize("recipe", ["y" * 5_000, "y" * 5_000 + ".yaml"], ids=["long-name", "long-file-name"])
def test_a_recipe_name_too_long_for_a_file_is_exit_2(recipe: str) -> None:
    from typer.testing import CliRunner

    from flagtree_cpu_build.cli import app

    result = CliRunner().invoke(app, ["--recipe", recipe, "recipe", "show", "--raw"])
    assert result.exit_code == 2, result.stderr[-500:]
    assert "unexpected" not in result.stderr
