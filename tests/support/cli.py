"""Running the real CLI in-process against the git world."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.gitworld import GitWorld, git

# The bundled recipe's checks with one real kernel instead of four, for tests whose subject is when the validation
# stage runs (a plan, a rerun, an interrupted setup), not what the kernels compute: test_validate.py runs every
# kernel, and so does test_setup's whole-setup test. Each kernel imports torch, about 1.5 s of CPU.
ONE_KERNEL = "checks=[{uses: flagtree/vector-add, with: {size: 1024}}]"


@dataclass(frozen=True)
class ProcessResult:
    """A command run as a real process, in the shape of typer's in-process ``Result``."""

    exit_code: int
    stdout: str
    stderr: str


@dataclass
class Workspace:
    """A workspace on the git world: the bundled recipe, unmodified except FlagTree's commit
    (the real pin cannot exist in a fixture repository).

    By default each command runs in-process (CliRunner). With ``cli`` (an installed console script, as the
    installed-wheel tier has it) each runs as that program in a real process, behind ``wrap`` (e.g.
    ``unshare -n``), from the workspace's parent folder, never from the checkout."""

    world: GitWorld
    root: Path
    flagtree_commit: str
    always_set: tuple[str, ...] = ()  # overrides every run of this workspace uses
    cli: Path | None = None
    wrap: tuple[str, ...] = ()

    def argv(self, *args: str, sets: tuple[str, ...] = ()) -> list[str]:
        argv = ["-w", str(self.root), "--set", f"sources.flagtree.commit={self.flagtree_commit}"]
        for assignment in (*self.always_set, *sets):
            argv += ["--set", assignment]
        return [*argv, *args]

    def run(self, *args: str, sets: tuple[str, ...] = ()) -> Result | ProcessResult:
        if self.cli is None:
            return CliRunner().invoke(app, self.argv(*args, sets=sets))
        self.root.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([*self.wrap, str(self.cli), *self.argv(*args, sets=sets)], cwd=self.root.parent,
                              capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
        return ProcessResult(done.returncode, done.stdout, done.stderr)

    def process(self, *args: str, sets: tuple[str, ...] = ()) -> subprocess.Popen:
        """The same command as a real process (for signals and concurrent runs)."""
        program = [str(self.cli)] if self.cli is not None else [sys.executable, "-m", "flagtree_cpu_build"]
        return subprocess.Popen([*self.wrap, *program, *self.argv(*args, sets=sets)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @property
    def flagtree(self) -> Path:
        return self.root / "FlagTree"

    @property
    def flagtree_cpu(self) -> Path:
        return self.root / "FlagTree" / "third_party" / "triton-cpu"

    @property
    def lock_file(self) -> Path:
        return self.root / ".flagtree-cpu" / "lock.yaml"

    def head(self, repo: Path) -> str:
        return git("rev-parse", "HEAD", cwd=repo, env=self.world.env)


def new_workspace(world: GitWorld, root: Path, commit_label: str = "cpu-backend",
                  always_set: tuple[str, ...] = (), cli: Path | None = None) -> Workspace:
    return Workspace(world, root, world["flagtree"].commits[commit_label], always_set, cli)


def synced_workspace(world: GitWorld, root: Path) -> Workspace:
    """A workspace whose sources are cloned at their pins (a `sync` that must succeed)."""
    ws = new_workspace(world, root)
    result = ws.run("sync")
    assert result.exit_code == 0, result.stderr
    return ws


def ready_to_build(world: GitWorld, root: Path, llvm_url: str, *sets: str) -> Workspace:
    """A workspace on the git world whose sources, links and LLVM (from ``llvm_url``) are in place: what
    `build` needs before it runs (sync, link and fetch succeeded)."""
    from tests.support.venvs import PREREQUISITES

    ws = new_workspace(world, root, always_set=(f"artifacts.llvm.url={llvm_url}", PREREQUISITES, *sets))
    for step in ("sync", "link", "fetch"):
        result = ws.run(step)
        assert result.exit_code == 0, (step, result.stderr)
    return ws
