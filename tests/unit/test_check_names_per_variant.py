"""A check name is one check per variant: checks whose `when.variant` lists do not overlap may share a name (the
flagtree recipe's `triton` import check, one per Triton version), a variant resolves to its own checks only (so
plans and `recipe validate` count those), and a name two checks of one variant share is a located problem."""

from __future__ import annotations

import pytest

from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe.files import parse_recipe

HEAD = """schema_version: 3
name: names
variant: old
variants:
  old: {description: old}
  new: {description: new}
  newer: {description: newer}
platform:
  host: {arch: [x86_64]}
sources:
  main: {url: "https://example.invalid/main.git", ref: main}
checks:
"""


def problems_of(text: str) -> list:
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "r.yaml", [])
    assert info.value.exit_code == 2
    return list(info.value.problems)


def test_checks_with_disjoint_variant_lists_share_a_name_and_each_variant_gets_its_own() -> None:
    text = HEAD + ("  - {name: triton, import: {module: triton, version: '==3.1.*'}, when: {variant: [old]}}\n"
                   "  - {name: triton, import: {module: triton, version: '==3.6.*'}, when: {variant: [new, newer]}}\n"
                   "  - {name: smoke, argv: [echo]}\n")
    for variant, version in (("old", "==3.1.*"), ("new", "==3.6.*"), ("newer", "==3.6.*")):
        recipe = parse_recipe(text, "r.yaml", [], variant=variant)
        assert [c.label for c in recipe.checks] == ["triton", "smoke"]
        assert recipe.checks[0].import_.version == version


def test_a_variant_has_only_the_checks_that_apply_to_it() -> None:
    text = HEAD + ("  - {name: a, argv: [echo], when: {variant: [old]}}\n"
                   "  - {name: b, argv: [echo], when: {variant: [new]}}\n"
                   "  - {name: c, argv: [echo], when: {variant: [new], arch: [x86_64]}}\n"
                   "  - {name: d, argv: [echo]}\n")
    assert [c.label for c in parse_recipe(text, "r.yaml", [], variant="new").checks] == ["b", "c", "d"]
    assert [c.label for c in parse_recipe(text, "r.yaml", [], variant="newer").checks] == ["d"]


def test_one_name_on_checks_whose_variant_lists_overlap_is_a_located_problem() -> None:
    text = HEAD + ("  - {name: triton, argv: [echo], when: {variant: [old, new]}}\n"
                   "  - {name: triton, argv: [echo], when: {variant: [newer, new]}}\n")
    [problem] = problems_of(text)
    assert problem.key == "checks[1].name" and problem.line == 14
    assert problem.message == "check name 'triton' is used twice for variant new (also check 0)"


def test_one_name_on_a_check_for_every_variant_and_another_is_a_located_problem() -> None:
    text = HEAD + ("  - {name: triton, argv: [echo]}\n"
                   "  - {name: triton, argv: [echo], when: {variant: [new]}}\n")
    [problem] = problems_of(text)
    assert problem.key == "checks[1].name"
    assert "is used twice (also check 0, and one of them applies to every variant)" in problem.message
