"""Every bundled recipe's loopback world at once, for the README walk-through (tests/integration/
test_readme_walkthrough.py): the same worlds the recipes' own tests use, put where the README's commands, run as
written, find them.

``build_worlds(root, server, git_world)`` returns a ``Worlds``:

- ``gitconfig[recipe]``: the git config (one ``url.<world>/bare/.insteadOf = https://github.com/`` rule) of the
  recipe's git world. The default recipe and flaggems-arm share the FlagGems world (the session's git world with
  FlagGems added); triton-cpu, torch-fl and spine-triton-riscv64 have their own. One config cannot hold them all:
  triton-cpu's world and the FlagTree world each have their own ``shibatch/sleef`` behind the same URL.
- ``mirrors[recipe]``: FLAGTREE_CPU_MIRRORS rules sending the recipe's download hosts (oaitriton's blob store for
  LLVM, github.com release assets) to the loopback server, which serves every stand-in at its real path; the
  flagtree world (its README variant's branch only) serves each host's under ``/<host>/`` of the same server.
- ``recipes``: a folder for FLAGTREE_CPU_RECIPES holding a copy of each bundled recipe (a user recipe hides the
  bundled one of its name) with only what a fixture cannot have changed, by the same assignments the recipe's
  own tests pass with ``--set``: source commits (the real pins cannot exist here) and the stand-in downloads'
  digests. Copies, not ``--set``, because a stacked recipe loads its base from the base's file, and so the commands
  the README and the tool print run unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.worlds.flaggems import build_flaggems_world
from tests.support.worlds.flagtree import BRANCHES, build_flagtree_world
from tests.support.worlds.spine_triton import build_spine_world
from tests.support.worlds.torch_fl import build_torch_fl_world
from tests.support.worlds.triton_cpu import LLVM_BASE, build_triton_cpu_world

BUNDLED = Path(__file__).resolve().parents[3] / "recipes"
RECIPES = ("flagtree-cpu-arm64", "triton-cpu", "torch-fl", "spine-triton-riscv64", "flaggems-arm", "flagtree")
FLAGTREE_VARIANT = "3_6-nvidia"  # the README's flagtree block; only its branch is built


@dataclass
class Worlds:
    gitconfig: dict[str, Path]
    mirrors: dict[str, str]  # per recipe: FLAGTREE_CPU_MIRRORS (the flagtree world serves each host under /<host>/)
    recipes: Path
    changes: dict[str, tuple[str, ...]]  # per recipe: the assignments its copy carries


def build_worlds(root: Path, server: LoopbackHTTPServer, git_world: GitWorld) -> Worlds:
    gems = build_flaggems_world(root / "flaggems", git_world)
    triton = build_triton_cpu_world(root / "triton-cpu", server)
    torch = build_torch_fl_world(root / "torch-fl")
    spine = build_spine_world(root / "spine-triton")
    server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    flagtree = build_flagtree_world(root / "flagtree", server, only=(FLAGTREE_VARIANT.split("-")[0],))
    spine_sets = spine.serve(server)  # at the real paths; the URLs it returns are dropped: mirrors send them there
    changes = {
        "flagtree-cpu-arm64": (f"sources.flagtree.commit={gems['flagtree'].commits['cpu-backend']}",),
        "triton-cpu": triton.sets(),
        "torch-fl": (f"sources.torch-fl.commit={torch.commit}",),
        "spine-triton-riscv64": (f"sources.spine-triton.commit={spine.commit}",
                                 *(s for s in spine_sets if ".url=" not in s)),
        "flaggems-arm": (f"sources.flaggems.commit={gems['flaggems'].commits['rc2']}",),
        # the variant names its commit in its overlay (shared by the branch's amd variant through a YAML anchor)
        "flagtree": (f"variants.{FLAGTREE_VARIANT}.overlay.sources.flagtree.commit="
                     f"{flagtree.commits[BRANCHES[FLAGTREE_VARIANT.split('-')[0]].name]}",),
    }
    recipes = root / "recipes"
    recipes.mkdir()
    for name, assignments in changes.items():
        write_copy(BUNDLED / f"{name}.yaml", recipes / f"{name}.yaml", assignments)
    gitconfig = {"flagtree-cpu-arm64": gems.gitconfig, "flaggems-arm": gems.gitconfig,
                 "triton-cpu": triton.gitconfig, "torch-fl": torch.gitconfig, "spine-triton-riscv64": spine.gitconfig,
                 "flagtree": flagtree.gitconfig}
    common = f"{LLVM_BASE}={server.base_url}/ https://github.com/={server.base_url}/"
    mirrors = {**dict.fromkeys(gitconfig, common), "flagtree": flagtree.mirrors}
    return Worlds(gitconfig, mirrors, recipes, changes)


def write_copy(bundled: Path, copy: Path, assignments: tuple[str, ...]) -> None:
    """``bundled`` with each ``a.b.0.c=value`` assignment (``--set`` syntax, the value read as YAML) applied."""
    data = yaml.safe_load(bundled.read_text())
    for assignment in assignments:
        dotted, _, text = assignment.partition("=")
        *parents, last = [int(k) if k.isdigit() else k for k in dotted.split(".")]
        node = data
        for key in parents:
            node = node[key] if isinstance(key, int) else node.setdefault(key, {})
        node[last] = yaml.safe_load(text)
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
