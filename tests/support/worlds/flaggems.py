"""The loopback world for the bundled `flaggems-arm` recipe: FlagGems next to the FlagTree git world.

``build_flaggems_world(root, base)`` copies the session's git world (FlagTree, flagtree-cpu, sleef) under
``root/bare`` and adds ``bare/flagos-ai/FlagGems.git`` built from ``fixtures/projects/flaggems``:

  main       ``pre-arm``: the tree without src/flag_gems/runtime/backend/_arm (the probe's "no Arm backend")
  5.3.0-rc2  ``rc2``: the whole stand-in (the recipe's branch)

so the one prefix rule ``url.file:///…/bare/.insteadOf = https://github.com/`` in ``world.gitconfig`` sends
both recipes' real URLs (and sleef's submodule URL) there.

``write_base_recipe(dir, world, llvm_url)`` writes ``dir/flagtree-cpu-arm64.yaml``: the bundled base recipe
with what a fixture needs changed in the file itself (a stacked recipe loads its base as the base's file
says, without ``--set``): FlagTree's commit, the LLVM URL, prerequisites the test venv has. Passed with
``--recipes-dir dir`` it hides the bundled one, for the base run alone and under the stack alike.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.support.gitworld import (
    PROJECTS,
    GitWorld,
    Repo,
    commit_all,
    git,
    git_env,
    publish_bare,
    write_redirect_config,
)
from tests.support.venvs import target_version

REPO_ROOT = Path(__file__).resolve().parents[3]
BASE_RECIPE = REPO_ROOT / "recipes" / "flagtree-cpu-arm64.yaml"
ARM_BACKEND = "src/flag_gems/runtime/backend/_arm"
BRANCH = "5.3.0-rc2"
# The fixture's tests/test_lt.py with --quick: test_lt and test_lt_scalar x float16/float32/bfloat16.
QUICK_TESTS = 6


def build_flaggems_world(root: Path, base: GitWorld) -> GitWorld:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(base.root / "bare", root / "bare", symlinks=True)
    (root / "home").mkdir(exist_ok=True)
    build_config = root / "build.gitconfig"
    build_config.write_text('[protocol "file"]\n\tallow = always\n[init]\n\tdefaultBranch = main\n')
    env = git_env(root / "home", build_config)

    repos = {name: Repo(name, root / "bare" / repo.bare.relative_to(base.root / "bare"), dict(repo.commits))
             for name, repo in base.repos.items()}
    gems = Repo("flaggems", root / "bare" / "flagos-ai" / "FlagGems.git")
    work = root / "work" / "FlagGems"
    work.mkdir(parents=True)
    git("init", "--quiet", cwd=work, env=env)
    shutil.copytree(PROJECTS / "flaggems", work, dirs_exist_ok=True)
    arm = work / ARM_BACKEND
    held = root / "work" / "_arm"
    shutil.move(arm, held)  # main predates the Arm vendor backend
    gems.commits["pre-arm"] = commit_all(work, "FlagGems: before the Arm backend", env)
    git("checkout", "--quiet", "-b", BRANCH, cwd=work, env=env)
    shutil.move(held, arm)
    gems.commits["rc2"] = commit_all(work, "[ARM] vendor backend", env)
    git("checkout", "--quiet", "main", cwd=work, env=env)
    publish_bare(work, gems.bare, env)
    repos["flaggems"] = gems

    gitconfig = write_redirect_config(root)
    return GitWorld(root, repos, gitconfig, git_env(root / "home", gitconfig))


def write_base_recipe(folder: Path, world: GitWorld, llvm_url: str) -> Path:
    """The bundled flagtree-cpu-arm64 recipe, pointed at the fixture (see the module's text)."""
    data = yaml.safe_load(BASE_RECIPE.read_text())
    data["sources"]["flagtree"]["commit"] = world["flagtree"].commits["cpu-backend"]
    data["artifacts"]["llvm"]["url"] = llvm_url
    # tests/support/venvs.py PREREQUISITES (no cmake: the fixture build runs none) and test_setup's RUNTIME
    data["python"]["build"] = ["setuptools>=40.8.0", "wheel", "pybind11>=2.13.1",
                               {"requirement": "ninja>=1.11.1", "system_command": "ninja"}]
    data["python"]["runtime"] = ["torch>=2.0", "numpy"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "flagtree-cpu-arm64.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def installed(name: str) -> str:
    """The version the fixture's target venv has (build tools: the suite's pinned set, not the test venv's)."""
    return target_version(name)


def stack_overrides(world: GitWorld, commit_label: str = "rc2") -> tuple[str, ...]:
    """--set arguments for the bundled flaggems-arm recipe on the fixture: its commit, and prerequisites and
    constraints the test venv satisfies (no scikit-build-core, sqlalchemy or numpy 1.26 here). The constraints
    keep the recipe's shape: FlagGems' pins, at the versions this machine has."""
    pybind11, setuptools, numpy = installed("pybind11"), installed("setuptools"), installed("numpy")
    return (
        f"sources.flaggems.commit={world['flaggems'].commits[commit_label]}",
        f"python.build=[setuptools, pybind11=={pybind11}, {{requirement: ninja, system_command: ninja}}]",
        "python.runtime=[pytest]",
        f"python.constraints=[{{requirement: numpy=={numpy}, why: FlagGems pins numpy}}, "
        f"{{requirement: pybind11=={pybind11}, why: FlagGems builds with it}}, "
        f"{{requirement: setuptools=={setuptools}, why: FlagGems builds with it}}]",
    )
