"""Every invalid recipe fails with exit 2, its expected message, file:line, no traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe.files import bundled_dir, list_recipes, load_recipe_file
from tests.support.corpus import VALID, CorpusCase, corpus_cases

CASES = corpus_cases()


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_recipe_is_rejected_with_location_and_fix(case: CorpusCase) -> None:
    before = case.path.read_bytes()
    result = CliRunner().invoke(app, ["recipe", "validate", str(case.path)])
    assert case.path.read_bytes() == before  # the user's file is never rewritten
    output = result.stderr
    assert result.exit_code == 2, output
    for fragment in case.expect:
        assert fragment in output
    assert f"{case.path}:{case.line}:" in output
    assert "fix:" in output
    assert "Traceback" not in output
    assert result.stdout == ""  # human errors never pollute stdout


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_recipe_problems_are_structured(case: CorpusCase) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipe_file(case.path)
    problems = info.value.problems
    assert problems[0].line == case.line
    assert problems[0].origin == str(case.path)
    assert all(p.message for p in problems)


def test_all_problems_of_a_file_are_reported_at_once() -> None:
    case = next(c for c in CASES if c.id == "27-several-problems")
    with pytest.raises(RecipeError) as info:
        load_recipe_file(case.path)
    keys = [p.key for p in info.value.problems]
    # a version 1 file reports version 2 key names
    assert keys == ["descripton", "sources.flagtree.url", "sources.flagtree.commit", "build.env.set.VERSION"]


@pytest.mark.parametrize("path", sorted(VALID.glob("*.yaml")) + sorted(bundled_dir("recipes").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_valid_and_bundled_recipes_load(path) -> None:
    recipe = load_recipe_file(path)
    assert recipe.name and len(recipe.digest) == 64


def test_bundled_recipes_all_validate_through_the_cli() -> None:
    result = CliRunner().invoke(app, ["recipe", "validate", "--all"])
    assert result.exit_code == 0, result.stderr
    assert {r.name for r in list_recipes()} >= {"flagtree-cpu-arm64"}
    assert "recipe flagtree-cpu-arm64 is valid" in result.stderr
