"""Hostile YAML in a recipe or a --set value: a located problem in milliseconds, never a hang or crash.

PyYAML (even through libyaml's CSafeLoader) recurses once per nesting level, expands
aliases without limit, and raises TypeError/ValueError/KeyError/ConstructorError on
complex keys, odd tags and impossible dates. These tests pin that the loader bounds all of
it before building anything big, and that what it refuses still reads like PyYAML where it
accepts.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
import yaml

from flagtree_cpu_build.errors import ExitCode, RecipeError, RecipeProblem
from flagtree_cpu_build.recipe import loader as recipe_yaml
from flagtree_cpu_build.recipe.files import bundled_dir, load_recipe_file, parse_recipe
from tests.support.corpus import CORPUS, VALID

HEAD = "schema_version: 1\nname: hostile\nplatform:\n  arch: [aarch64]\n"  # 4 lines
MINIMAL = (VALID / "minimal.yaml").read_text()
RECIPE = bundled_dir("recipes") / "flagtree-cpu-arm64.yaml"


def problems_of(text: str, origin: str = "r.yaml") -> list[RecipeProblem]:
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, origin)
    assert info.value.exit_code == ExitCode.USAGE
    return list(info.value.problems)




def billion_laughs(levels: int = 10) -> str:
    lines = ["lol0: &lol0 [" + ", ".join(["lol"] * 10) + "]"]
    lines += [f"lol{i}: &lol{i} [" + ", ".join([f"*lol{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return HEAD + "\n".join(lines) + "\n"


# --- nesting -------------------------------------------------------------------------------------


# Each hostile input below is refused in milliseconds (bench_startup times `recipe validate`); the timeouts
# are bounds only a hang or a quadratic blow-up reaches (libyaml alone took 82 s on 200,000 '[').
@pytest.mark.timeout(30)
@pytest.mark.parametrize("nested", [
    "[" * 200_000 + "]" * 200_000,
    "{a: " * 200_000 + "1" + "}" * 200_000,
    "\n" + "- " * 200_000 + "x",
], ids=["flow-lists", "flow-mappings", "block-sequences"])
def test_200000_levels_of_nesting_are_a_located_problem(nested: str) -> None:
    problems = problems_of(HEAD + "deep: " + nested + "\n")
    assert problems[0].line in (5, 6)
    assert f"nested more than {recipe_yaml.MAX_DEPTH} levels deep" in problems[0].message
    assert problems[0].fix


def test_nesting_up_to_the_limit_is_still_read() -> None:
    depth = recipe_yaml.MAX_DEPTH - 1  # the document's own mapping is the first level
    loaded = recipe_yaml.load("deep: " + "[" * depth + "x" + "]" * depth, "r.yaml")
    assert not loaded.problems
    value = loaded.data["deep"]
    for _ in range(depth - 1):
        value = value[0]
    assert value == ["x"]


def test_aliases_of_aliases_count_towards_the_depth_limit() -> None:
    # 300 anchors, each 4 levels around the previous: small as a graph, 1,200 levels expanded,
    # which would overflow the recursion of anything that turns it into data naively.
    chain = ["d0: &d0 [[[[x]]]]"] + [f"d{i}: &d{i} [[[[*d{i - 1}]]]]" for i in range(1, 300)]
    problems = problems_of(HEAD + "\n".join(chain) + "\n")
    assert "nested more than 64 levels deep" in problems[0].message
    assert problems[0].line == 5 + 15  # d15 is the first to expand past 64 levels


# --- aliases ---------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_billion_laughs_stops_before_memory_grows() -> None:
    text = billion_laughs()
    tracemalloc.start()
    try:
        problems = problems_of(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20, f"peak {peak >> 20} MiB"
    assert "more than 100,000 values once aliases are expanded" in problems[0].message
    assert problems[0].line == 9  # lol4: 11 + 111 + 1,111 + 11,111 + 8 x 11,111 crosses 100,000


@pytest.mark.timeout(30)
def test_billion_laughs_made_of_merge_keys_is_bounded_too() -> None:
    # PyYAML's flatten_mapping copies merged pairs into the graph: ten merges of ten merges
    # would build 10^7 pairs before any data exists.
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: v" for j in range(10)) + "}"]
    lines += [f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 10) + "]}" for i in range(1, 8)]
    tracemalloc.start()
    try:
        problems = problems_of(HEAD + "\n".join(lines) + "\n")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20, f"peak {peak >> 20} MiB"  # 10^7 merged pairs would be gigabytes
    assert "alias bomb" in problems[0].message


@pytest.mark.parametrize("loop, alias_line", [
    ("loop: &loop\n  self: *loop\n", 6),
    ("loop: &loop [a, *loop]\n", 5),
    ("loop: &loop\n  - inner:\n      - *loop\n", 7),
], ids=["mapping", "list", "deeper"])
def test_recursive_alias_is_a_problem_naming_alias_and_anchor(loop: str, alias_line: int) -> None:
    problems = problems_of(HEAD + loop)
    assert problems[0].line == alias_line
    assert "alias *loop is inside the value it names (&loop, line 5)" in problems[0].message
    assert "another anchor" in problems[0].fix


@pytest.mark.parametrize("text, line, fragment", [
    ("a: *nowhere\n", 5, "alias *nowhere names no anchor defined before it"),
    ("a: &x 1\nb: &x 2\n", 6, "anchor &x is defined twice"),
    ("a: 1\n---\nb: 2\n", 6, "a second YAML document starts here"),
], ids=["undefined-alias", "duplicate-anchor", "second-document"])
def test_broken_anchors_and_extra_documents_say_what_to_do(text: str, line: int, fragment: str) -> None:
    problems = problems_of(HEAD + text)
    assert (problems[0].line, fragment in problems[0].message) == (line, True)
    assert problems[0].fix


# --- keys, tags and values -------------------------------------------------------------------------


@pytest.mark.parametrize("text, line", [
    ("? [a, b]\n: 1\n", 5),
    ("? {a: 1}\n: 1\n", 5),
    ("env: {[CC, CXX]: clang}\n", 5),
    ("pair: &pair [a, b]\n*pair : 1\n", 6),
], ids=["list-key", "mapping-key", "flow-list-key", "aliased-list-key"])
def test_complex_keys_are_refused_as_keys_must_be_plain_text(text: str, line: int) -> None:
    problems = problems_of(HEAD + text)
    assert problems[0].line == line
    assert "keys must be plain text" in problems[0].message


@pytest.mark.parametrize("tagged, shown", [
    ("!custom hello", "!custom"),
    ("!!python/object/apply:os.system ['echo pwned']", "!!python/object/apply:os.system"),
    ("!!python/name:os.system", "!!python/name:os.system"),
    ("!!binary aGVsbG8=", "!!binary"),
    ("!!set {a, b}", "!!set"),
    ("!!omap [a: 1]", "!!omap"),
    ("!!str [a]", "!!str"),
], ids=["custom", "python-apply", "python-name", "binary", "set", "omap", "str-on-a-list"])
def test_tags_beyond_plain_data_are_refused(tagged: str, shown: str) -> None:
    problems = problems_of(HEAD + "description: " + tagged + "\n")
    assert problems[0].line == 5
    assert f"the tag {shown} is not allowed" in problems[0].message
    assert f"remove {shown}" in problems[0].fix


def test_every_refused_tag_and_key_of_a_file_is_reported_at_once() -> None:
    problems = problems_of(HEAD + "a: !one x\nb: !two y\n? [c]\n: z\n")
    assert [p.line for p in problems] == [5, 6, 7]


@pytest.mark.parametrize("value, kind", [
    ("2024-13-01", "timestamp"),
    ("!!int abc", "int"),
    ("!!float many", "float"),
    ("!!bool maybe", "bool"),
    ("!!timestamp soon", "timestamp"),
], ids=["month-13", "int", "float", "bool", "timestamp"])
def test_values_that_do_not_fit_their_type_are_located_problems(value: str, kind: str) -> None:
    problems = problems_of(HEAD + f"description: {value}\n")
    text = value.split()[-1]
    assert (problems[0].line, problems[0].key) == (5, "description")
    assert f"{text!r} is not a valid {kind}" in problems[0].message
    assert problems[0].fix == f"quote it to keep it as text: '{text}'"


def test_merge_key_with_a_plain_value_is_a_problem() -> None:
    problems = problems_of(HEAD + "url: &url https://example.invalid\nsources:\n  x:\n    <<: *url\n")
    assert (problems[0].line, problems[0].key) == (8, "sources.x")
    assert "'<<' merges mappings" in problems[0].message


# --- size --------------------------------------------------------------------------------------


def test_text_over_the_size_cap_is_refused_before_parsing() -> None:
    text = HEAD + "# padding\n" * (recipe_yaml.MAX_TEXT_CHARS // 10 + 1) + "deep: " + "[" * 100
    problems = problems_of(text)  # the nesting after the padding is never seen: the size comes first
    assert (problems[0].line, "larger than 1 MiB" in problems[0].message) == (1, True)


def test_over_100000_plain_values_are_refused_without_blaming_aliases() -> None:
    problems = problems_of(HEAD + "many: [" + ", ".join(["1"] * 100_001) + "]\n")
    assert (problems[0].line, problems[0].message) == (5, "the file holds more than 100,000 values; a recipe "
                                                            "holds a few hundred")


def test_a_huge_recipe_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("w") as out:
        out.write(MINIMAL)
        out.write(("# " + "x" * 1022 + "\n") * 6 * 1024)  # 6 MiB of comments
    assert len(recipe_yaml.read_text(path)) <= recipe_yaml.MAX_TEXT_CHARS + 1
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    assert "larger than 1 MiB" in info.value.problems[0].message


def test_recipe_that_is_not_utf8_is_located(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(HEAD.encode() + "description: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    problem = info.value.problems[0]
    assert (problem.origin, problem.line) == (str(path), 5)
    assert "not UTF-8 text (byte 0xe9)" in problem.message


# --- --set values ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    "[" * 5_000 + "]" * 5_000,
    "2024-99-99",
    "!!bool maybe",
    "!!int abc",
], ids=["deep", "impossible-date", "bool-tag", "int-tag"])
def test_a_set_value_that_is_hostile_yaml_is_taken_as_text(value: str) -> None:
    recipe = parse_recipe(MINIMAL, "r.yaml", [f"description={value}"])
    assert recipe.description == value


V1_RECIPE = (VALID / "flagtree-cpu-arm64.v1.yaml").read_text()


@pytest.mark.parametrize("text", [MINIMAL, V1_RECIPE, RECIPE.read_text()], ids=["minimal-v1", "bundled-v1", "bundled"])
@pytest.mark.parametrize("key", ["zz" + ".a" * 3_000, "sources.x" + ".a" * 60_000, "variants.v.overlay" + ".a" * 3_000])
def test_a_set_key_path_deeper_than_any_recipe_is_a_problem_not_a_crash(text: str, key: str) -> None:
    # the old recipes are upgraded in memory, which copies the data recursively: 2,000 parts overflowed it
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "r.yaml", [f"{key}=1"])
    [problem] = info.value.problems
    assert problem.origin.startswith(f"--set {key[:50]}") and len(problem.origin) < 200 and problem.line is None
    assert f"the key has {key.count('.') + 1} parts; a recipe is nested {recipe_yaml.MAX_DEPTH} levels at most" \
        in problem.message
    assert problem.fix


def test_a_set_key_path_at_the_limit_with_a_deep_value_is_still_read() -> None:
    depth = recipe_yaml.MAX_DEPTH
    key = "sources.main.x" + ".a" * (depth - 3)  # as deep as a key may be, holding a value nested to the limit
    value = "[" * (depth - 1) + "1" + "]" * (depth - 1)
    with pytest.raises(RecipeError) as info:
        parse_recipe(MINIMAL, "r.yaml", [f"{key}={value}"])
    assert "unknown key 'x'" in info.value.problems[0].message


# --- what is accepted reads as PyYAML reads it -------------------------------------------------------------

MERGES = """\
base: &base {a: base, b: base}
other: &other {b: other, c: other}
both:
  <<: [*base, *other]
  c: own
nested:
  <<: {<<: *other, d: nested}
tags: [!!str 0123, !!int "7", ! 12, !!float "1.5", !!bool "yes", !!null ""]
"""


def test_accepted_yaml_reads_exactly_as_pyyaml_reads_it() -> None:
    """The bundled recipe, the valid fixtures, merge keys (the first source wins) and plain tags."""
    texts = [RECIPE.read_text(), *(path.read_text() for path in sorted(VALID.glob("*.yaml"))), MERGES]
    for text in texts:
        loaded = recipe_yaml.load(text, "r.yaml")
        assert not loaded.problems, text[:80]
        assert loaded.data == yaml.load(text, Loader=yaml.CSafeLoader), text[:80]


def test_a_lone_equals_sign_is_text_where_pyyaml_has_no_constructor_for_it() -> None:
    assert recipe_yaml.load("a: =\n=: b\n", "r.yaml").data == {"a": "=", "=": "b"}


# --- the closing advice ------------------------------------------------------------------------


def test_closing_fix_fits_the_kind_of_problem(tmp_path: Path) -> None:
    syntax = CORPUS / "17-yaml-syntax-error.yaml"
    with pytest.raises(RecipeError) as info:
        load_recipe_file(syntax)
    assert info.value.fix.startswith(f"fix the YAML near {syntax}:10")
    assert "recipe schema" not in info.value.fix

    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    with pytest.raises(RecipeError) as info:
        load_recipe_file(empty)
    assert "flagtree-cpu recipe show flagtree-cpu-arm64 --raw" in info.value.fix
    assert "recipe schema" not in info.value.fix

    with pytest.raises(RecipeError) as info:
        load_recipe_file(CORPUS / "01-unknown-key-typo.yaml")
    assert info.value.fix == RecipeError.KEYS_FIX
    assert "`flagtree-cpu recipe schema` prints every key" in info.value.fix


def test_a_recipe_path_that_is_a_device_or_a_pipe_is_not_called_a_folder(tmp_path: Path) -> None:
    import os

    from flagtree_cpu_build.errors import RecipeNotFound
    from flagtree_cpu_build.recipe.files import find_recipe

    fifo = tmp_path / "recipe.yaml"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        with pytest.raises(RecipeNotFound, match="not a regular file"):
            find_recipe(path)
