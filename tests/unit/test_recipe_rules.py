"""Recipe loading rules beyond the corpus: overrides, digests, placeholders, YAML details."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.errors import RecipeError, RecipeNotFound
from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve
from flagtree_cpu_build.recipe.files import (
    LIMITS,
    bundled_dir,
    find_recipe,
    list_recipes,
    load_recipe,
    parse_recipe,
    recipe_warnings,
)
from flagtree_cpu_build.workspace import Workspace
from tests.support.corpus import VALID

MINIMAL = (VALID / "minimal.yaml").read_text()
BUNDLED = (bundled_dir("recipes") / "flagtree-cpu-arm64.yaml").read_text()
HOST = HostFacts("linux", "aarch64", "ubuntu", "24.04", "Ubuntu", 8, None, 16 * 2**30)


def problems_of(text: str, overrides: list[str] | None = None) -> list:
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "r.yaml", overrides or [])
    return list(info.value.problems)


# --- overrides ---------------------------------------------------------------------------


def test_override_sets_a_commit_made_only_of_digits_as_text() -> None:
    sha = "1234567890" * 4  # YAML would read this as an integer
    recipe = parse_recipe(BUNDLED, "b.yaml", [f"sources.flagtree-cpu.commit={sha}"])
    assert recipe.sources["flagtree-cpu"].commit == sha


def test_override_creates_missing_keys_and_parses_lists() -> None:
    recipe = parse_recipe(MINIMAL, "m.yaml", ["platform.arch=[aarch64, x86_64]",
                                               "sources.main.submodules=recursive"])
    assert recipe.platform.host.arch == ("aarch64", "x86_64")  # a v1 file: --set uses its own keys
    assert recipe.sources["main"].submodules == "recursive"


def test_override_indexes_lists() -> None:
    recipe = parse_recipe(BUNDLED, "b.yaml", ["links.entries.7.target=triton-cpu/third_party/sleef2"])
    assert recipe.links.entries[7].target == "triton-cpu/third_party/sleef2"


def test_override_errors_name_the_argument_and_suggest() -> None:
    [problem] = problems_of(MINIMAL, ["sources.main.comit=abc"])
    assert problem.origin == "--set sources.main.comit=abc"
    assert problem.line is None
    assert "did you mean 'commit'" in problem.message


def test_override_is_validated_like_the_file() -> None:
    [problem] = problems_of(BUNDLED, ["artifacts.llvm.url=oaitriton.blob.core.windows.net/x.tar.gz"])
    assert problem.key == "artifacts.llvm.url"
    assert "no scheme" in problem.message


@pytest.mark.parametrize("assignment, fragment", [
    ("sources.main.url", "must look like KEY=VALUE"),
    ("=x", "must look like KEY=VALUE"),
    ("sources.main.url.deeper=x", "not a mapping"),
    ("a..b=1", "dot-separated names"),
])
def test_malformed_overrides(assignment: str, fragment: str) -> None:
    problems = problems_of(MINIMAL, [assignment])
    assert any(fragment in p.message for p in problems), problems


def test_override_into_a_list_checks_the_index() -> None:
    [problem] = problems_of(BUNDLED, ["links.entries.99.target=x"])
    assert "not an index of this list (it has 12 items" in problem.message


# --- digests ---------------------------------------------------------------------------------


def test_digest_ignores_formatting_and_comments() -> None:
    reformatted = "# a comment\n" + MINIMAL.replace("arch: [aarch64]", "arch:\n    - aarch64")
    assert parse_recipe(MINIMAL, "a").digest == parse_recipe(reformatted, "b").digest


def test_digest_changes_with_any_value() -> None:
    base = parse_recipe(MINIMAL, "a").digest
    assert parse_recipe(MINIMAL, "a", ["sources.main.ref=dev"]).digest != base


# --- placeholders -------------------------------------------------------------------------------


def test_escaped_braces_stay_literal_and_values_fill_in(tmp_path: Path) -> None:
    text = MINIMAL + 'build:\n  cwd: "{workdir}"\n  argv: [echo, "{{not-a-placeholder}}", "{jobs}"]\n'
    recipe = parse_recipe(text, "p.yaml")
    ws = Workspace(tmp_path)
    resolved = resolve(recipe, ws.root, placeholder_values(recipe, ws, HOST, {"HOME": "/h"}))
    assert resolved.build.argv == ("echo", "{not-a-placeholder}", "8")
    assert resolved.build.cwd == str(tmp_path)


def test_a_relative_artifact_path_is_inside_the_workdir(tmp_path: Path) -> None:
    text = MINIMAL + 'artifacts:\n  tools:\n    url: https://x.invalid/t.tgz\n    path: "toolchains/t"\n'
    recipe = parse_recipe(text, "a.yaml")
    ws = Workspace(tmp_path)
    resolved = resolve(recipe, ws.root, placeholder_values(recipe, ws, HOST, {"HOME": "/h"}))
    assert resolved.artifacts["tools"].path == str(tmp_path / "toolchains/t")


def test_unbalanced_brace_is_reported() -> None:
    text = MINIMAL + 'build:\n  cwd: "{workdir"\n  argv: [make]\n'
    [problem] = problems_of(text)
    assert problem.key == "build.cwd"
    assert "'{{'" in problem.fix


def test_placeholder_with_format_spec_is_rejected() -> None:
    text = MINIMAL + 'build:\n  cwd: "{workdir}"\n  argv: [make, "-j{jobs:3}"]\n'
    [problem] = problems_of(text)
    assert "only plain {name} works" in problem.message


def test_artifact_path_cannot_refer_to_artifacts() -> None:
    text = MINIMAL + ('artifacts:\n  a:\n    url: https://x.invalid/a.tgz\n    path: "{artifacts.b.path}/a"\n'
                      '  b:\n    url: https://x.invalid/b.tgz\n    path: "{workdir}/b"\n')
    [problem] = problems_of(text)
    assert problem.key == "artifacts.a.path"


def test_every_placeholder_has_a_value(tmp_path: Path) -> None:
    recipe = load_recipe("flagtree-cpu-arm64")
    ws = Workspace(tmp_path)
    values = placeholder_values(recipe, ws, HOST, {"HOME": "/h"})
    resolved = resolve(recipe, ws.root, values, reads={"artifacts.llvm.match": "a66376b0"})
    from flagtree_cpu_build.recipe.interpolated import iter_interpolated

    leftovers = [(p, s) for p, s in iter_interpolated(resolved) if "{" in s]
    assert leftovers == []
    # before sync, only the value read from FlagTree's cmake/llvm-hash.txt is left, as the recipe writes it
    unread = [s for _p, s in iter_interpolated(resolve(recipe, ws.root, values)) if "{" in s]
    assert unread and all("{" not in s.replace("{match}", "") for s in unread)


# --- YAML details -------------------------------------------------------------------------------


def test_yaml_anchors_and_merge_keys_work() -> None:
    text = (
        "schema_version: 1\nname: anchors\nplatform: {arch: [aarch64]}\n"
        "sources:\n  a: &src\n    url: https://x.invalid/a.git\n    ref: main\n"
        "  b:\n    <<: *src\n    url: https://x.invalid/b.git\n"
    )
    recipe = parse_recipe(text, "anchors.yaml")
    assert recipe.sources["b"].ref == "main"
    assert recipe.sources["b"].url == "https://x.invalid/b.git"


def test_ssh_scp_syntax_gets_a_rewrite_hint() -> None:
    [problem] = problems_of(MINIMAL.replace("https://example.invalid/main.git", "git@github.com:org/repo.git"))
    assert problem.fix == "write it as ssh://git@github.com/org/repo.git"


def test_explicit_null_on_optional_keys_means_absent() -> None:
    recipe = parse_recipe(MINIMAL.replace("    ref: main\n", "    ref: main\n    commit: null\n    path: ~\n"), "n")
    assert (recipe.sources["main"].commit, recipe.sources["main"].path) == (None, None)


def test_null_on_a_required_key_is_an_error() -> None:
    [problem] = problems_of(MINIMAL.replace("url: https://example.invalid/main.git", "url:"))
    assert problem.message == "expected text, got nothing (an empty value)"


def test_source_needs_ref_or_commit() -> None:
    [problem] = problems_of(MINIMAL.replace("    ref: main\n", ""))
    assert "needs `ref`" in problem.message


def test_link_inside_another_link_is_rejected() -> None:
    text = MINIMAL + ("links:\n  root: main\n  entries:\n    - {path: a, target: x}\n"
                      "    - {path: a/b, target: ../y}\n")
    [problem] = problems_of(text)
    assert "lies inside link 'a'" in problem.message


def test_missing_patch_file_is_reported(tmp_path: Path) -> None:
    text = MINIMAL + "    patches: [fix-build.patch]\n"
    [problem] = problems_of(text)
    assert "patch file 'fix-build.patch' not found" in problem.message


def test_patch_next_to_the_recipe_is_found(tmp_path: Path) -> None:
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "fix.patch").write_text("--- a\n+++ b\n")
    path = tmp_path / "r.yaml"
    path.write_text(MINIMAL + "    patches: [fix.patch]\n")
    from flagtree_cpu_build.recipe.files import load_recipe_file

    assert [p.file for p in load_recipe_file(path).sources["main"].patches] == ["fix.patch"]


def test_warnings_for_unpinned_inputs() -> None:
    keys = [w.key for w in recipe_warnings(load_recipe("flagtree-cpu-arm64"))]
    assert keys == ["sources.flagtree-cpu", "artifacts.llvm"]


# --- finding recipes -------------------------------------------------------------------------


def test_user_recipe_dir_adds_and_shadows(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(MINIMAL.replace("name: minimal", "name: mine"))
    (tmp_path / "flagtree-cpu-arm64.yaml").write_text(BUNDLED)
    refs = {r.name: r for r in list_recipes([tmp_path])}
    assert refs["mine"].origin == "user"
    assert refs["flagtree-cpu-arm64"].origin == "user"
    assert refs["flagtree-cpu-arm64"].shadows == bundled_dir("recipes") / "flagtree-cpu-arm64.yaml"


def test_unknown_recipe_name_suggests() -> None:
    with pytest.raises(RecipeNotFound) as info:
        find_recipe("flagtree-cpu-arm")
    assert "did you mean 'flagtree-cpu-arm64'" in info.value.message


def test_missing_recipe_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeNotFound) as info:
        find_recipe(str(tmp_path / "nope.yaml"))
    assert "does not exist" in info.value.message
    assert info.value.exit_code == 2


# --- limits ------------------------------------------------------------------------------


ENTRY = {
    "variants": "  v{i}: {{overlay: {{description: d{i}}}}}\n",
    "sources": "  s{i}: {{url: https://example.invalid/s.git, ref: main}}\n",
    "artifacts": "  a{i}: {{url: https://example.invalid/a{i}.tar.gz, path: a{i}}}\n",
    "toolchains": "  t{i}: {{path: /opt/t{i}}}\n",
}


def with_entries(key: str, count: int) -> str:
    text = ("schema_version: 2\nname: many\nplatform:\n  host: {arch: [aarch64]}\n"
            + ("variant: v0\n" if key == "variants" else "")
            + ("" if key == "sources" else "sources:\n  main: {url: https://example.invalid/m.git, ref: main}\n"))
    return text + f"{key}:\n" + "".join(ENTRY[key].format(i=i) for i in range(count))


@pytest.mark.parametrize("key", sorted(ENTRY))
def test_a_recipe_holds_a_bounded_number_of_variants_sources_artifacts_and_toolchains(key: str) -> None:
    limit = LIMITS[key]
    assert len(getattr(parse_recipe(with_entries(key, limit), "r.yaml"), key)) == limit
    text = with_entries(key, limit + 1)
    [problem] = problems_of(text)
    assert (problem.key, problem.line) == (key, text.splitlines().index(f"{key}:") + 1)
    assert problem.message == f"{limit + 1} {key}; a recipe has at most {limit}"


def test_sources_inside_each_other_1500_deep_are_a_problem_not_a_recursion_error() -> None:
    head = "schema_version: 2\nname: chain\nplatform:\n  host: {arch: [aarch64]}\nsources:\n"
    text = head + "  s0: {url: https://example.invalid/s.git, ref: main}\n" + "".join(
        f"  s{i}: {{url: https://example.invalid/s.git, ref: main, inside: s{i - 1}, path: x}}\n"
        for i in range(1, 1_500))
    problems = problems_of(text)
    assert any("1500 sources; a recipe has at most" in p.message for p in problems)


def test_a_link_inside_another_is_found_among_many_links() -> None:
    entries = "".join(f"    - {{path: p{i}, target: t{i}}}\n" for i in range(15_000))
    text = (MINIMAL.replace("schema_version: 1", "schema_version: 2").replace("arch: [aarch64]", "host: {arch: "
            "[aarch64]}") + "links:\n  root: main\n  entries:\n" + entries + "    - {path: p7/inner, target: t}\n")
    [problem] = problems_of(text)
    assert problem.key == "links.entries[15000].path"
    assert "link path 'p7/inner' lies inside link 'p7' (entry 7)" in problem.message


def test_thousands_of_problems_are_reported_as_the_first_hundred_and_a_count() -> None:
    entries = "".join(f'      V{i}: "{{nope{i}}}"\n' for i in range(5_000))
    text = with_entries("sources", 1) + "runtime:\n  env:\n    set:\n" + entries  # each names no placeholder
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "r.yaml")
    problems = info.value.problems
    assert len(problems) == 101 and info.value.message == "recipe r.yaml has 5000 problems"
    assert "unknown placeholder {nope0}" in problems[0].message
    assert problems[-1].message == "and 4,900 more problems like those above, not shown"
