"""A world of real bare git repositories imitating FlagTree, flagtree-cpu and sleef.

Built once per test session from the fixture trees in ``tests/fixtures/projects``;
tests clone from it (``GitWorld.clone``) or point the tool at it, either by URL
(``GitWorld.url``) or — to run the *unmodified* bundled recipe — through git's own
``url.<base>.insteadOf`` rules in ``GitWorld.gitconfig``, which redirect the real
GitHub URLs to these repositories.

History of the repositories (labels are keys of ``Repo.commits``):

  FlagTree      pre-cpu      base tree: setup.py, cmake/llvm-hash.txt, the tracked
                             symlink python/triton/_C/include -> ../../../include/
                cpu-backend  adds third_party/cpu/{backend,language} (branch triton_v3.3.x)
                tip          a later commit on triton_v3.3.x
                (main stays at pre-cpu, as FlagTree's main lacks the CPU backend)
  flagtree-cpu  v33          3.3-compatible: every link target, triton_cpu.cc with
                             add_neon_sdot_to_llvmir, sleef as a real submodule (main)
                v37          the "Triton 3.7 port": pass gone, sleef submodule removed
                             (branch triton-3.7)
  sleef         first        what flagtree-cpu's gitlink records
                second       a later commit on main (so "tip" != "pinned")
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "projects"

GITHUB_URLS = {
    "flagtree": "https://github.com/flagos-ai/FlagTree.git",
    "flagtree-cpu": "https://github.com/flagos-ai/flagtree-cpu.git",
    "sleef": "https://github.com/shibatch/sleef",
}


def git_env(home: Path, gitconfig: Path | None = None) -> dict[str, str]:
    """A hermetic environment for git: no user or system config, fixed identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=str(gitconfig) if gitconfig else os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME="Fixture Author",
        GIT_AUTHOR_EMAIL="author@fixture.invalid",
        GIT_COMMITTER_NAME="Fixture Committer",
        GIT_COMMITTER_EMAIL="committer@fixture.invalid",
    )
    return env


def git(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(map(str, args))} failed in {cwd}:\n{result.stderr}")
    return result.stdout.strip()


@dataclass
class Repo:
    name: str
    bare: Path
    commits: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.bare.as_uri()


@dataclass
class GitWorld:
    root: Path
    repos: dict[str, Repo]
    gitconfig: Path  # insteadOf rules: GitHub URLs -> the bare repos here; file protocol allowed
    env: dict[str, str]  # a git environment using ``gitconfig``

    def __getitem__(self, name: str) -> Repo:
        return self.repos[name]

    def clone(self, name: str, dest: Path, *, commit: str | None = None,
              recursive: bool = False) -> Path:
        """A working clone of repo ``name`` at ``commit`` (default: its default branch)."""
        args = ["clone", "--quiet"] + (["--recurse-submodules"] if recursive else [])
        git(*args, self.repos[name].url, dest, env=self.env)
        if commit:
            git("checkout", "--quiet", commit, cwd=dest, env=self.env)
            if recursive:
                git("submodule", "update", "--init", "--recursive", "--quiet", cwd=dest, env=self.env)
        return dest

    def advance(self, name: str, branch: str, path: str, content: str, message: str = "later change") -> str:
        """Commit a change on ``branch`` of repo ``name`` (as upstream would); return the new commit."""
        work = self.root / f"advance-{name}-{len(list(self.root.glob('advance-*')))}"
        git("clone", "--quiet", "--branch", branch, self.repos[name].url, work, env=self.env)
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(content)
        commit = commit_all(work, message, self.env)
        git("push", "--quiet", "origin", f"HEAD:{branch}", cwd=work, env=self.env)
        return commit

    def stop(self) -> None:
        """Take every repository offline: any fetch or clone from now on fails."""
        (self.root / "bare").rename(self.root / "bare.offline")

    def start(self) -> None:
        (self.root / "bare.offline").rename(self.root / "bare")

    def recipe_overrides(self) -> list[str]:
        """--set arguments pointing the bundled recipe straight at this world."""
        return [
            f"sources.flagtree.url={self['flagtree'].url}",
            f"sources.flagtree.commit={self['flagtree'].commits['cpu-backend']}",
            f"sources.flagtree-cpu.url={self['flagtree-cpu'].url}",
        ]


def _copy_tree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, dirs_exist_ok=True)


def _new_work_tree(work: Path, project: str, env: dict[str, str]) -> Path:
    """A fresh repository holding the fixture tree ``project`` (not yet committed)."""
    tree = work / project
    tree.mkdir(parents=True)
    git("init", "--quiet", cwd=tree, env=env)
    _copy_tree(PROJECTS / project, tree)
    return tree


def commit_all(work: Path, message: str, env: dict[str, str]) -> str:
    """Commit everything in the work tree; its commit id (the fixture worlds of every recipe use it)."""
    git("add", "-A", cwd=work, env=env)
    git("commit", "--quiet", "-m", message, cwd=work, env=env)
    return git("rev-parse", "HEAD", cwd=work, env=env)


def publish_bare(work: Path, bare: Path, env: dict[str, str]) -> None:
    """The work tree as a bare repository served to the tool (by path, insteadOf, or git daemon)."""
    git("clone", "--quiet", "--bare", work, bare, env=env)
    # clients may fetch a pinned commit directly (git fetch origin <sha>) and clone blobless
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=bare, env=env)
    git("config", "uploadpack.allowFilter", "true", cwd=bare, env=env)


def build_world(root: Path) -> GitWorld:
    root.mkdir(parents=True, exist_ok=True)
    home = root / "home"
    home.mkdir(exist_ok=True)
    build_config = root / "build.gitconfig"
    build_config.write_text('[protocol "file"]\n\tallow = always\n[init]\n\tdefaultBranch = main\n')
    env = git_env(home, build_config)
    work = root / "work"
    bare = root / "bare"
    bare.mkdir()

    # sleef
    sleef = Repo("sleef", bare / "shibatch" / "sleef.git")
    w = _new_work_tree(work, "sleef", env)
    sleef.commits["first"] = commit_all(w, "sleef: first", env)
    (w / "README.md").write_text("# sleef fixture\n\nA later commit nobody pinned.\n")
    sleef.commits["second"] = commit_all(w, "sleef: second", env)
    publish_bare(w, sleef.bare, env)

    # flagtree-cpu
    ftc = Repo("flagtree-cpu", bare / "flagos-ai" / "flagtree-cpu.git")
    w = _new_work_tree(work, "flagtree-cpu-v33", env)
    git("submodule", "add", "--quiet", sleef.url, "third_party/sleef", cwd=w, env=env)
    git("checkout", "--quiet", sleef.commits["first"], cwd=w / "third_party/sleef", env=env)
    # record the real upstream URL, as the real .gitmodules does; tests reach it via insteadOf
    git("config", "-f", ".gitmodules", "submodule.third_party/sleef.url", GITHUB_URLS["sleef"], cwd=w, env=env)
    ftc.commits["v33"] = commit_all(w, "flagtree-cpu: Triton 3.3 compatible", env)
    git("checkout", "--quiet", "-b", "triton-3.7", cwd=w, env=env)
    git("rm", "--quiet", "-r", "third_party/sleef", cwd=w, env=env)
    git("rm", "--quiet", "--force", ".gitmodules", cwd=w, env=env)  # the port has no submodules
    _copy_tree(PROJECTS / "flagtree-cpu-v37", w)
    ftc.commits["v37"] = commit_all(w, "flagtree-cpu: Triton 3.7 port", env)
    git("checkout", "--quiet", "main", cwd=w, env=env)
    publish_bare(w, ftc.bare, env)

    # FlagTree
    ft = Repo("flagtree", bare / "flagos-ai" / "FlagTree.git")
    w = _new_work_tree(work, "flagtree-base", env)
    (w / "python/triton/_C").mkdir(parents=True, exist_ok=True)
    os.symlink("../../../include/", w / "python/triton/_C/include")  # tracked, like the real one
    ft.commits["pre-cpu"] = commit_all(w, "FlagTree: base", env)
    git("checkout", "--quiet", "-b", "triton_v3.3.x", cwd=w, env=env)
    _copy_tree(PROJECTS / "flagtree-cpu-backend", w)
    ft.commits["cpu-backend"] = commit_all(w, "[CPU] ARM64 CPU backend", env)
    (w / "README.md").write_text("# FlagTree fixture\n\nA later commit on triton_v3.3.x.\n")
    ft.commits["tip"] = commit_all(w, "FlagTree: later change", env)
    git("checkout", "--quiet", "main", cwd=w, env=env)
    publish_bare(w, ft.bare, env)

    repos = {"flagtree": ft, "flagtree-cpu": ftc, "sleef": sleef}
    return GitWorld(root, repos, write_redirect_config(root), git_env(home, root / "world.gitconfig"))


def private_copy(world: GitWorld, root: Path) -> GitWorld:
    """A copy of ``world`` under ``root`` that one test may change or stop."""
    shutil.copytree(world.root / "bare", root / "bare", symlinks=True)
    (root / "home").mkdir(parents=True, exist_ok=True)
    repos = {name: Repo(name, root / "bare" / repo.bare.relative_to(world.root / "bare"), dict(repo.commits))
             for name, repo in world.repos.items()}
    gitconfig = write_redirect_config(root)
    return GitWorld(root, repos, gitconfig, git_env(root / "home", gitconfig))


def write_redirect_config(root: Path) -> Path:
    """One prefix rule, as a user would write it: every https://github.com/ URL goes to <root>/bare/
    (bare/flagos-ai/FlagTree.git, bare/shibatch/sleef.git ...); git adds the '.git' suffix itself."""
    gitconfig = root / "world.gitconfig"
    gitconfig.write_text(
        '[protocol "file"]\n\tallow = always\n'
        f'[url "{(root / "bare").as_uri()}/"]\n\tinsteadOf = https://github.com/\n'
    )
    return gitconfig
