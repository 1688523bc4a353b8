"""`when: {os_version: ...}`: a recipe picks per OS release (Ubuntu 22.04 vs 24.04) from /etc/os-release's
VERSION_ID, read under a host root like every other host fact."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flagtree_cpu_build.errors import RecipeError
from flagtree_cpu_build.host import read_host
from flagtree_cpu_build.recipe import select_variants
from flagtree_cpu_build.recipe.files import parse_recipe

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"

RECIPE = """\
schema_version: 2
name: per-release
platform:
  host:
    arch: [x86_64]
sources:
  main:
    url: https://example.invalid/main.git
    ref: main
artifacts:
  llvm:
    url: https://example.invalid/llvm-ubuntu-20.04.tar.gz
    path: llvm
    variants:
      - when: {os_id: [ubuntu], os_version: ["22.04"]}
        url: https://example.invalid/llvm-ubuntu-22.04.tar.gz
      - when: {os_id: [ubuntu], os_version: [">=24.04"]}
        url: https://example.invalid/llvm-ubuntu-24.04.tar.gz
"""


def ubuntu_root(tmp_path: Path, version: str | None) -> Path:
    """An x86_64 host tree whose os-release says Ubuntu ``version`` (None: no VERSION_ID line at all)."""
    root = tmp_path / f"ubuntu-{version}"
    shutil.copytree(HOSTS / "x86_64-debian", root)
    lines = ["ID=ubuntu", f'PRETTY_NAME="Ubuntu {version or "rolling"}"']
    if version is not None:
        lines.append(f'VERSION_ID="{version}"')
    (root / "etc/os-release").write_text("\n".join(lines) + "\n")
    return root


def url_on(tmp_path: Path, version: str | None) -> str:
    host = read_host(ubuntu_root(tmp_path, version))
    recipe = select_variants(parse_recipe(RECIPE, "r.yaml"), host.os_id, host.arch, host.glibc, host.os_version_id)
    return recipe.artifacts["llvm"].url


@pytest.mark.parametrize(("version", "picked"), [
    ("22.04", "llvm-ubuntu-22.04"),
    ("24.04", "llvm-ubuntu-24.04"),
    ("24.10", "llvm-ubuntu-24.04"),
    ("20.04", "llvm-ubuntu-20.04"),  # neither: the artifact's own url
    (None, "llvm-ubuntu-20.04"),  # no VERSION_ID: no os_version condition holds
])
def test_os_version_selects_the_artifact_variant_of_the_hosts_release(tmp_path: Path, version: str | None,
                                                                       picked: str) -> None:
    assert picked in url_on(tmp_path, version)


def test_an_os_version_that_is_no_version_is_a_located_problem() -> None:
    text = RECIPE.replace('os_version: ["22.04"]', 'os_version: ["jammy"]')
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "r.yaml")
    [problem] = info.value.problems
    assert (problem.key, problem.line) == ("artifacts.llvm.variants[0].when.os_version[0]", 15)
    assert "'jammy' is neither an OS version nor a version range" in problem.message
    assert "VERSION_ID" in (problem.fix or "")


def test_a_broken_os_version_range_is_a_located_problem() -> None:
    text = RECIPE.replace('os_version: [">=24.04"]', 'os_version: [">=24.04,,<"]')
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "r.yaml")
    [problem] = info.value.problems
    assert (problem.key, problem.line) == ("artifacts.llvm.variants[1].when.os_version[0]", 17)
    assert "is not a version range" in problem.message
