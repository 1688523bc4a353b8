"""FlagTree PR #633's layout: `third_party/triton-cpu` is a git submodule of FlagTree (flagtree-cpu at its gitlink)
and the 12 links of python/scripts/link_flagtree_cpu.sh are committed as relative symlinks. The arm64 recipe family
expresses it with one variant of the bundled `flagtree-cpu-arm64` text (sources.flagtree gets `submodules:
recursive`, the separate flagtree-cpu source and `links:` go away): no link stage, no engine change.

The fixture: the session git world's FlagTree (triton_v3.3.x with the CPU backend) and flagtree-cpu (3.3, sleef as
its own submodule); on top, one FlagTree commit that adds the submodule and the links, with exactly the targets the
bundled recipe's `links.entries` name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.recipe.files import load_recipe_file
from tests.conftest import REPO_ROOT
from tests.support.envelope import result_of
from tests.support.gitworld import GITHUB_URLS, GitWorld, commit_all, git, git_env, publish_bare

ARM64 = REPO_ROOT / "recipes" / "flagtree-cpu-arm64.yaml"
# Appended to the bundled recipe's text: `links` (the default) is the recipe as it is; `submodule` is PR #633.
VARIANTS = """
variant: links
variants:
  links:
    description: FlagTree triton_v3.3.x and flagtree-cpu side by side, joined by the 12 links
  submodule:
    description: FlagTree PR 633, third_party/triton-cpu a submodule and the 12 links committed
    overlay:
      sources:
        flagtree:
          submodules: recursive
        flagtree-cpu: null
      links: null
"""


def link_entries() -> list[tuple[str, str]]:
    recipe = load_recipe_file(ARM64)
    assert recipe.links is not None
    return [(entry.path, entry.target) for entry in recipe.links.entries]


@pytest.fixture(scope="module")
def pr633(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """FlagTree with PR #633 applied, as a bare repository; its commit; a git config sending the real URLs
    there (FlagTree) and to the session world (flagtree-cpu, sleef)."""
    root = tmp_path_factory.mktemp("pr633")
    env = git_env(root, git_world.gitconfig)
    work = root / "FlagTree"
    git("clone", "--quiet", "--branch", "triton_v3.3.x", git_world["flagtree"].url, work, env=env)
    git("-c", "protocol.file.allow=always", "submodule", "add", "--quiet", "--name", "third_party/triton-cpu",
        git_world["flagtree-cpu"].url, "third_party/triton-cpu", cwd=work, env=env)
    git("checkout", "--quiet", git_world["flagtree-cpu"].commits["v33"], cwd=work / "third_party/triton-cpu",
        env=env)
    git("config", "-f", ".gitmodules", "submodule.third_party/triton-cpu.url", GITHUB_URLS["flagtree-cpu"],
        cwd=work, env=env)
    for path, target in link_entries():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, work / path)
    commit = commit_all(work, "[CPU] third_party/triton-cpu as a submodule, the links committed (PR #633)", env)
    publish_bare(work, root / "bare" / "FlagTree.git", env)
    config = root / "pr633.gitconfig"
    config.write_text(f"[include]\n\tpath = {git_world.gitconfig}\n"
                      f'[url "{(root / "bare" / "FlagTree.git").as_uri()}"]\n'
                      f"\tinsteadOf = {GITHUB_URLS['flagtree']}\n")
    return root, commit, config


def run(recipe: Path, ws: Path, commit: str, *args: str) -> Result:
    return CliRunner().invoke(app, ["-w", str(ws), "--recipe", str(recipe), "--variant", "submodule",
                                    "--set", f"sources.flagtree.commit={commit}", *args])


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "flagtree-cpu-arm64.yaml"
    path.write_text(ARM64.read_text() + VARIANTS)
    return path


def test_the_pr633_variant_has_no_link_stage_and_one_source(recipe: Path) -> None:
    plain, pr = (load_recipe_file(recipe, variant=v) for v in ("links", "submodule"))
    assert plain.links is not None and len(plain.links.entries) == 12
    assert pr.links is None and set(pr.sources) == {"flagtree"}
    assert pr.sources["flagtree"].submodules == "recursive"
    # the rest of the recipe is the bundled one, unchanged
    assert (pr.artifacts, pr.build, pr.checks) == (plain.artifacts, plain.build, plain.checks)


def test_sync_checks_out_the_submodule_and_every_committed_link_resolves(
        pr633: tuple[Path, str, Path], recipe: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, commit, config = pr633
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    ws = tmp_path / "ws"
    synced = run(recipe, ws, commit, "sync")
    assert synced.exit_code == 0, synced.stderr
    tree = ws / "FlagTree"
    assert (tree / "third_party/triton-cpu/third_party/cpu/triton_cpu.cc").is_file()
    assert (tree / "third_party/triton-cpu/third_party/sleef").is_dir()  # triton-cpu's own submodule
    for path, target in link_entries():
        link = tree / path
        assert link.is_symlink() and os.readlink(link) == target, path
        assert link.exists(), f"{path} -> {target} does not resolve"
    # the TLE builtins reach python/triton through the links, as link_flagtree_cpu.sh would make them
    assert (tree / "python/triton/language/extra/cpu/tle_ops.py").is_file()

    plan = run(recipe, ws, commit, "--json", "setup", "--dry-run")
    items = result_of(plan.stdout)["items"]
    assert [i for i in items if i["area"] == "links"] == []
    assert {i["subject"] for i in items if i["area"] == "sources"} == {"flagtree"}
    assert all(i["will"] != "created" for i in items if i["area"] == "sources"), json.dumps(items)[:2000]
    linked = run(recipe, ws, commit, "link")
    assert linked.exit_code == 0, linked.stderr
    assert "0 links in" in linked.stdout + linked.stderr  # nothing for the link stage to make or repair
