"""`builds:` (named builds ordered by `needs:`), `install_wheels` and gate checks (`before:`) as recipe data:
their order, and every mistake in them a located problem."""

from __future__ import annotations

import pytest

from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe.builds import final_build, named_builds, needed_by
from flagtree_cpu_build.recipe.files import parse_recipe

HEAD = """\
schema_version: 2
name: two-builds
platform:
  host: {arch: [x86_64, aarch64]}
sources:
  framework: {url: "https://example.invalid/framework.git", ref: main, path: framework}
  compiler: {url: "https://example.invalid/compiler.git", ref: main, path: compiler}
"""
TWO = HEAD + """\
builds:
  framework:
    cwd: "{sources.framework.path}"
    argv: ["{python}", setup.py, bdist_wheel]
    inputs: {sources: [framework]}
    install_wheels: ["dist/*.whl"]
build:
  needs: [framework]
  cwd: "{sources.compiler.path}"
  argv: ["{python}", -m, pip, install, -e, .]
checks:
  - {name: gate, argv: ["{python}", -c, "pass"], before: build}
"""


def problems_of(text: str) -> list:
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "r.yaml")
    return list(info.value.problems)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_builds_run_in_needs_order_and_the_build_key_is_the_one_named_build() -> None:
    recipe = parse_recipe(TWO, "r.yaml")
    assert list(named_builds(recipe)) == ["framework", "build"]
    assert final_build(recipe) == "build"
    assert recipe.builds["framework"].inputs.sources == ("framework",)
    assert recipe.builds["framework"].install_wheels == ("dist/*.whl",)
    assert recipe.checks[0].before == "build"


def test_a_build_listed_first_that_needs_a_later_one_runs_after_it() -> None:
    text = HEAD + """\
builds:
  compiler: {cwd: "{workdir}", argv: [make], needs: [framework]}
  framework: {cwd: "{workdir}", argv: [make]}
"""
    recipe = parse_recipe(text, "r.yaml")
    assert list(named_builds(recipe)) == ["framework", "compiler"]
    assert final_build(recipe) == "compiler" and recipe.build is None
    assert needed_by(recipe, "compiler") == ["framework", "compiler"]
    assert needed_by(recipe, "framework") == ["framework"]


def test_a_recipe_with_only_build_is_one_build_named_build() -> None:
    text = HEAD + 'build: {cwd: "{workdir}", argv: [make]}\n'
    recipe = parse_recipe(text, "r.yaml")
    assert list(named_builds(recipe)) == ["build"] and recipe.builds == {}


def test_needs_naming_no_build_is_located_with_a_did_you_mean() -> None:
    text = TWO.replace("needs: [framework]", "needs: [framwork]")
    [problem] = problems_of(text)
    assert problem.key == "build.needs[0]" and problem.line == line_of(text, "needs: [framwork]")
    assert "no build named 'framwork'" in problem.message and "framework" in problem.message


def test_builds_that_need_each_other_are_a_located_circle() -> None:
    text = HEAD + """\
builds:
  a: {cwd: "{workdir}", argv: [make], needs: [b]}
  b: {cwd: "{workdir}", argv: [make], needs: [a]}
"""
    [problem] = problems_of(text)
    assert problem.key == "builds" and "a -> b -> a" in problem.message


def test_a_build_that_needs_itself_is_said_once() -> None:
    text = HEAD + 'builds:\n  a: {cwd: "{workdir}", argv: [make], needs: [a]}\n'
    [problem] = problems_of(text)
    assert problem.key == "builds.a.needs[0]" and "needs itself" in problem.message


def test_a_second_build_named_build_is_refused() -> None:
    text = TWO.replace("builds:\n  framework:", "builds:\n  build:")
    problems = problems_of(text)
    assert any(p.key == "builds.build" and "already the build named 'build'" in p.message for p in problems)


def test_inputs_naming_an_unknown_source_are_located() -> None:
    text = TWO.replace("inputs: {sources: [framework]}", "inputs: {sources: [framewrk]}")
    [problem] = problems_of(text)
    assert problem.key == "builds.framework.inputs.sources[0]"
    assert "no source named 'framewrk'" in problem.message and "framework" in problem.message


def test_a_gate_before_an_unknown_build_is_located() -> None:
    text = TWO.replace("before: build", "before: biuld")
    [problem] = problems_of(text)
    assert problem.key == "checks[0].before" and problem.line == line_of(text, "before: biuld")
    assert "no build named 'biuld'" in problem.message and "build" in problem.message


def test_install_wheels_in_a_wheel_only_build_is_refused() -> None:
    text = TWO.replace('    install_wheels: ["dist/*.whl"]\n',
                       '    install_wheels: ["dist/*.whl"]\n    mode: wheel-only\n    wheel_argv: [make]\n')
    [problem] = problems_of(text)
    assert problem.key == "builds.framework.install_wheels" and "installs nothing" in problem.message


def test_an_unknown_key_in_a_named_build_gets_a_did_you_mean() -> None:
    text = TWO.replace("install_wheels:", "install_wheel:")
    [problem] = problems_of(text)
    assert problem.key == "builds.framework.install_wheel" and "install_wheels" in problem.message


def test_a_recipe_with_too_many_builds_is_refused_before_they_are_read() -> None:
    text = HEAD + "builds:\n" + "".join(f'  b{i}: {{cwd: "{{workdir}}", argv: [make], needs: [b{i + 1}]}}\n'
                                         for i in range(40))
    [problem] = problems_of(text)
    assert problem.key == "builds" and problem.message == "40 builds; a recipe has at most 32"
    assert "extends" in problem.fix  # said by the loader, before 40 builds are converted and ordered
