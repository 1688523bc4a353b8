"""`recipe validate`'s "no pinned commit" warning says what a source's pin is when it is read from another source's
file: none for `commit_from` (a commit read from a pinned file is pinned), the file for `ref_from`, never
"None is resolved at the first sync"."""

from __future__ import annotations

from flagtree_cpu_build.recipe.files import parse_recipe, recipe_warnings

RECIPE = """\
schema_version: 3
name: reads-pins
platform: {host: {arch: [x86_64]}}
sources:
  triton:
    url: https://example.invalid/triton.git
    commit: 0123456789abcdef0123456789abcdef01234567
  llvm-project:
    url: https://example.invalid/llvm-project.git
    commit_from: {source: triton, file: cmake/llvm-hash.txt}
  googletest:
    url: https://example.invalid/googletest.git
    ref_from: {source: triton, file: unittest/googletest.cmake, regex: 'GIT_TAG\\s+(\\S+)'}
"""


def test_a_read_commit_is_not_an_open_pin_and_a_read_ref_names_its_file() -> None:
    said = {w.key: w.message for w in recipe_warnings(parse_recipe(RECIPE, "reads-pins.yaml"))}
    assert "sources.llvm-project" not in said
    assert said["sources.googletest"] == ("no pinned commit: the branch or tag triton's unittest/googletest.cmake "
                                          "names is resolved at the first sync and recorded in the lock file")
    assert not any("None" in message for message in said.values())
