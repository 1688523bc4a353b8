"""A loopback world for the bundled `triton-cpu` recipe: its repositories, its downloads, a runner.

- Bare repositories where GitHub keeps them, `bare/triton-lang/triton-cpu.git` (the fixture tree
  `fixtures/projects/triton-cpu`: root setup.py, cmake/llvm-info.json and cmake/json-version.txt with the
  real contents, third_party/cpu/backend, the tutorial, tests marked `cpu`) with `third_party/sleef` as a
  real submodule of `bare/shibatch/sleef.git` (its own, small; the gitlink is sleef's first commit and
  sleef's main has moved on since, so "pinned" differs from "tip"); branch `llvm-bump` is a later commit
  whose cmake/llvm-info.json names another LLVM build. One `insteadOf` rule in a private git
  config sends the recipe's real URLs (and .gitmodules' sleef URL) here.
- A loopback HTTP server with stand-in LLVM tarballs under the real names
  (`/public/llvm-builds/llvm-62b7cf96-<suffix>-2.tar.gz`, one per suffix the recipe knows, each a
  tree with the MLIR CMake package the fixture setup.py looks for) and nlohmann's `include.zip` under its
  release path; `mirrors()` are the `--mirror` rules that send the recipe's URLs there, and `sets()` the
  `--set` overrides for what a fixture cannot have: the fixture commit and the stand-ins' sha256.
- `Runner`: the real CLI in-process with `--recipe triton-cpu` (the bundled file, otherwise unmodified).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.gitworld import PROJECTS, commit_all, git, git_env, publish_bare
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import Tarball, tarball_with, zip_with

LLVM_BASE = "https://oaitriton.blob.core.windows.net/"
LLVM_DIR = "/public/llvm-builds/"
JSON_PATH = "/nlohmann/json/releases/download/v3.11.3/include.zip"
JSON_URL = "https://github.com" + JSON_PATH
# The recipe's default first, then its artifacts.llvm.variants in order.
SUFFIXES = ("ubuntu-x64", "almalinux-x64", "almalinux-arm64", "ubuntu-arm64")
# Guards the suite from collecting the fixture's own tests; not part of the repository.
NOT_IN_REPO = ("conftest.py",)


BUMP_HASH = "0123456789abcdef0123456789abcdef01234567"  # the llvm-bump commit's LLVM (build number 3)


def llvm_name(suffix: str, *, bump: bool = False) -> str:
    return f"llvm-{BUMP_HASH[:8]}-{suffix}-3" if bump else f"llvm-62b7cf96-{suffix}-2"


def llvm_tarball(suffix: str, *, complete: bool = True, bump: bool = False) -> Tarball:
    """A small LLVM-shaped tree under its real top folder; ``complete=False`` lacks MLIR's CMake package."""
    top = llvm_name(suffix, bump=bump)
    files = {f"{top}/bin/mlir-tblgen": b"#!/bin/sh\necho stand-in mlir-tblgen\n",
             f"{top}/include/llvm/Config/llvm-config.h": f"// {suffix} stand-in\n".encode()}
    if complete:
        files[f"{top}/lib/cmake/mlir/MLIRConfig.cmake"] = b"# stand-in MLIR package\n"
        files[f"{top}/lib/cmake/llvm/LLVMConfig.cmake"] = b"# stand-in LLVM package\n"
    return tarball_with(files, executable=(f"{top}/bin/mlir-tblgen",))


def json_zip() -> Tarball:
    """nlohmann's include.zip: include/ at the top, as build_helpers.py expects it."""
    return zip_with({"include/nlohmann/json.hpp": b"// stand-in nlohmann/json 3.11.3\n",
                     "single_include/nlohmann/json.hpp": b"// stand-in single header\n"})


@dataclass
class TritonCpuWorld:
    root: Path
    server: LoopbackHTTPServer
    gitconfig: Path  # protocol.file allowed; https://github.com/ -> <root>/bare/
    commits: dict[str, str] = field(default_factory=dict)  # triton-cpu, llvm-bump, sleef-pinned, sleef-tip
    tarballs: dict[str, Tarball] = field(default_factory=dict)  # per suffix
    json: Tarball = field(default_factory=json_zip)

    def mirrors(self) -> tuple[str, ...]:
        """`--mirror` rules: the recipe's download hosts -> the loopback server."""
        return (f"{LLVM_BASE}={self.server.base_url}/", f"https://github.com/={self.server.base_url}/")

    def sets(self) -> tuple[str, ...]:
        """The fixture commit and the json stand-in's digest (the LLVM stand-ins' are in the commit's
        cmake/llvm-info.json, where the recipe reads them, as upstream lists the real ones)."""
        return (f"sources.triton-cpu.commit={self.commits['triton-cpu']}",
                f"artifacts.json.digest.sha256={self.json.sha256}")

    def serve_llvm(self, suffix: str, tarball: Tarball, *, bump: bool = False) -> None:
        self.tarballs[f"{suffix}-bump" if bump else suffix] = tarball
        self.server.serve(f"{LLVM_DIR}{llvm_name(suffix, bump=bump)}.tar.gz", tarball.data)

    def download_requests(self) -> list[str]:
        return [r.path for r in self.server.requests if r.method == "GET"]


def build_triton_cpu_world(root: Path, server: LoopbackHTTPServer) -> TritonCpuWorld:
    root.mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    build_config = root / "build.gitconfig"
    build_config.write_text('[protocol "file"]\n\tallow = always\n[init]\n\tdefaultBranch = main\n')
    env = git_env(root / "home", build_config)
    bare = root / "bare"
    world = TritonCpuWorld(root, server, _redirect_config(root))

    sleef = _new_tree(root / "work" / "sleef", PROJECTS / "triton-cpu-sleef", env)
    world.commits["sleef-pinned"] = commit_all(sleef, "sleef: the commit triton-cpu pins", env)
    (sleef / "README.md").write_text("# sleef fixture\n\nA later commit triton-cpu does not pin.\n")
    world.commits["sleef-tip"] = commit_all(sleef, "sleef: later", env)
    publish_bare(sleef, bare / "shibatch" / "sleef.git", env)

    for suffix in SUFFIXES:
        world.serve_llvm(suffix, llvm_tarball(suffix))
        world.serve_llvm(suffix, llvm_tarball(suffix, bump=True), bump=True)
    tree = _new_tree(root / "work" / "triton-cpu", PROJECTS / "triton-cpu", env)
    # upstream's file lists the sha256 of each real tarball; the fixture's lists the stand-ins' (the recipe reads them)
    info = json.loads((tree / "cmake" / "llvm-info.json").read_text())
    info["sha256sum"] = {suffix: world.tarballs[suffix].sha256 for suffix in SUFFIXES}
    (tree / "cmake" / "llvm-info.json").write_text(json.dumps(info, indent=2) + "\n")
    git("submodule", "add", "--quiet", "--name", "sleef", (bare / "shibatch" / "sleef.git").as_uri(),
        "third_party/sleef", cwd=tree, env=env)
    git("checkout", "--quiet", world.commits["sleef-pinned"], cwd=tree / "third_party/sleef", env=env)
    # .gitmodules as upstream writes it: [submodule "sleef"], the GitHub URL without .git
    git("config", "-f", ".gitmodules", "submodule.sleef.url", "https://github.com/shibatch/sleef", cwd=tree, env=env)
    world.commits["triton-cpu"] = commit_all(tree, "triton-cpu: Triton 3.7 with the CPU backend", env)
    # a later commit that moves to another LLVM build, as upstream's LLVM bumps do
    git("checkout", "--quiet", "-b", "llvm-bump", cwd=tree, env=env)
    info.update(llvm_hash=BUMP_HASH, build_number=3,
                sha256sum={suffix: world.tarballs[f"{suffix}-bump"].sha256 for suffix in SUFFIXES})
    (tree / "cmake" / "llvm-info.json").write_text(json.dumps(info, indent=2) + "\n")
    world.commits["llvm-bump"] = commit_all(tree, "[BUILD] Bump LLVM", env)
    git("checkout", "--quiet", "main", cwd=tree, env=env)
    publish_bare(tree, bare / "triton-lang" / "triton-cpu.git", env)

    server.serve(JSON_PATH, world.json.data)
    return world


def _new_tree(tree: Path, project: Path, env: dict[str, str]) -> Path:
    tree.mkdir(parents=True)
    git("init", "--quiet", cwd=tree, env=env)
    shutil.copytree(project, tree, dirs_exist_ok=True,
                    ignore=lambda folder, names: [n for n in names if n in NOT_IN_REPO and Path(folder) == project]
                    + [n for n in names if n == "__pycache__"])
    return tree






def _redirect_config(root: Path) -> Path:
    config = root / "world.gitconfig"
    config.write_text('[protocol "file"]\n\tallow = always\n'
                      f'[url "{(root / "bare").as_uri()}/"]\n\tinsteadOf = https://github.com/\n')
    return config


@dataclass
class Runner:
    """`flagtree-cpu --recipe triton-cpu` on one workspace of the world, in-process."""

    world: TritonCpuWorld
    root: Path
    always_set: tuple[str, ...] = ()

    def argv(self, *args: str, sets: tuple[str, ...] = ()) -> list[str]:
        argv = ["-w", str(self.root), "--recipe", "triton-cpu"]
        for assignment in (*self.world.sets(), *self.always_set, *sets):
            argv += ["--set", assignment]
        return [*argv, *args]

    def run(self, *args: str, sets: tuple[str, ...] = ()) -> Result:
        return CliRunner().invoke(app, self.argv(*args, sets=sets))

    def mirrored(self) -> tuple[str, ...]:
        return tuple(a for rule in self.world.mirrors() for a in ("--mirror", rule))

    @property
    def checkout(self) -> Path:
        return self.root / "triton-cpu"

    def head(self, repo: Path) -> str:
        return git("rev-parse", "HEAD", cwd=repo, env=dict(os.environ))
