"""Two artifacts of one recipe never share a folder, nor sit one inside the other, on any host the recipe builds
on: a located recipe problem (exit 2), not two trees that republish each other on every fetch."""

from __future__ import annotations

import pytest

from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.recipe.files import parse_recipe

HEAD = """schema_version: 2
name: paths
platform:
  host: {arch: [aarch64, x86_64]}
sources:
  main: {url: "https://example.invalid/main.git", ref: main}
"""


def problems_of(text: str, variant: str | None = None) -> list:
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "r.yaml", [], variant=variant)
    assert info.value.exit_code == 2
    return list(info.value.problems)


def artifacts(body: str) -> str:
    return HEAD + "artifacts:\n" + body


def test_two_artifacts_at_one_path_are_a_located_problem() -> None:
    text = artifacts("  a: {url: 'https://x.invalid/a.tgz', path: 'tools/llvm'}\n"
                     "  b: {url: 'https://x.invalid/b.tgz', path: 'tools/./llvm/'}\n")
    [problem] = problems_of(text)
    assert problem.key == "artifacts.b.path" and problem.line == 9
    assert "'a' and 'b' are both published at {workdir}/tools/llvm" in problem.message


def test_an_artifact_inside_another_is_a_located_problem() -> None:
    text = artifacts("  outer: {url: 'https://x.invalid/a.tgz', path: '{home}/.triton'}\n"
                     "  inner: {url: 'https://x.invalid/b.tgz', path: '{home}/.triton/nvidia/ptxas'}\n")
    [problem] = problems_of(text)
    assert problem.key == "artifacts.inner.path"
    assert "'inner' ({home}/.triton/nvidia/ptxas) would be published inside artifact 'outer'" in problem.message


def test_placeholders_naming_the_same_folder_collide() -> None:
    text = artifacts("  a: {url: 'https://x.invalid/a.tgz', path: '{state_dir}/tools'}\n"
                     "  b: {url: 'https://x.invalid/b.tgz', path: '.flagtree-cpu/tools/b'}\n")
    [problem] = problems_of(text)
    assert problem.key == "artifacts.b.path" and "inside artifact 'a'" in problem.message


def test_a_host_variant_that_lands_on_another_artifact_is_named_with_its_host() -> None:
    text = artifacts("  a: {url: 'https://x.invalid/a.tgz', path: 'llvm-x86'}\n"
                     "  b:\n    url: 'https://x.invalid/b.tgz'\n    path: llvm-b\n"
                     "    variants:\n      - when: {arch: [x86_64]}\n        path: llvm-x86\n")
    [problem] = problems_of(text)
    assert problem.key == "artifacts.b.variants[0].path"
    assert "on an x86_64 host" in problem.message


def test_a_host_placeholder_is_compared_as_each_host_reads_it() -> None:
    text = artifacts("  a: {url: 'https://x.invalid/a.tgz', path: 'llvm-{arch}'}\n"
                     "  b:\n    url: 'https://x.invalid/b.tgz'\n    path: other\n"
                     "    variants:\n      - when: {arch: [aarch64]}\n        path: llvm-aarch64/sub\n")
    [problem] = problems_of(text)
    assert problem.key == "artifacts.b.variants[0].path" and "on an aarch64 host" in problem.message


def test_paths_that_differ_per_host_only_where_they_never_meet_are_fine() -> None:
    text = artifacts("  a:\n    url: 'https://x.invalid/a.tgz'\n    path: a\n"
                     "    variants:\n      - when: {arch: [x86_64]}\n        path: llvm\n"
                     "  b:\n    url: 'https://x.invalid/b.tgz'\n    path: b\n"
                     "    variants:\n      - when: {arch: [aarch64]}\n        path: llvm\n"
                     "  c: {url: 'https://x.invalid/c.tgz', path: 'llvm-c'}\n")  # a sibling whose name starts alike
    assert set(parse_recipe(text, "r.yaml", []).artifacts) == {"a", "b", "c"}


def test_a_glibc_range_variant_that_collides_on_old_hosts_only_is_found() -> None:
    text = artifacts("  a: {url: 'https://x.invalid/a.tgz', path: 'llvm-old'}\n"
                     "  b:\n    url: 'https://x.invalid/b.tgz'\n    path: llvm-new\n"
                     "    variants:\n      - when: {glibc: '<=2.28'}\n        path: llvm-old\n")
    [problem] = problems_of(text)
    assert problem.key == "artifacts.b.variants[0].path" and "glibc 2.2" in problem.message


def test_a_recipe_variant_whose_overlay_makes_two_paths_meet_is_reported_for_that_variant() -> None:
    text = artifacts("  a: {url: 'https://x.invalid/a.tgz', path: 'llvm-a'}\n"
                     "  b: {url: 'https://x.invalid/b.tgz', path: 'llvm-b'}\n"
                     "variant: plain\nvariants:\n  plain: {overlay: {}}\n"
                     "  clash: {overlay: {artifacts: {b: {path: llvm-a}}}}\n")
    assert parse_recipe(text, "r.yaml", []).variant == "plain"
    [problem] = problems_of(text, variant="clash")
    assert problem.key.endswith("path") and "both published at {workdir}/llvm-a" in problem.message


def test_publish_takes_own_or_shared_and_names_the_mistake() -> None:
    text = artifacts("  a: {url: 'https://x.invalid/a.tgz', path: 'a', publish: shared}\n")
    assert parse_recipe(text, "r.yaml", []).artifacts["a"].publish == "shared"
    [problem] = problems_of(text.replace("publish: shared", "publish: sharde"))
    assert problem.key == "artifacts.a.publish" and "shared" in (problem.message + (problem.fix or ""))
