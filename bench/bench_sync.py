"""sync and link: no-op re-runs, and clones with and without the git cache vs plain `git clone`.

The repositories are the test suite's git world (FlagTree / flagtree-cpu / sleef
stand-ins) with FlagTree grown to a realistic size (BULK_MB of incompressible files
over several commits), served by `git daemon` on 127.0.0.1. The manual way is what the
install guide does: `git clone` FlagTree, check out the pin, `git clone --recursive`
flagtree-cpu into third_party/triton-cpu. Budgets: no-op sync and link <= 1 s (median).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import save  # noqa: E402

from tests.support.gitdaemon import GitDaemon  # noqa: E402
from tests.support.gitworld import build_world, git, git_env  # noqa: E402

BULK_MB = int(os.environ.get("BENCH_BULK_MB", "60"))
RUNS = 11
BUDGET_S = 1.0


def grow(world_root: Path, env: dict[str, str]) -> str:
    """Add BULK_MB of history to FlagTree's triton_v3.3.x; return the new tip."""
    work = world_root / "grow"
    git("clone", "--quiet", "--branch", "triton_v3.3.x", world_root / "bare/flagos-ai/FlagTree.git", work, env=env)
    files, per_commit = 400, max(1, BULK_MB * 1024 * 1024 // 400 // 4)
    for commit in range(4):
        for i in range(files):
            path = work / "lib" / f"part{i % 20}" / f"unit{i}.cpp"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(os.urandom(per_commit).hex().encode()[:per_commit])
        git("add", "-A", cwd=work, env=env)
        git("commit", "--quiet", "-m", f"bulk {commit}", cwd=work, env=env)
    git("push", "--quiet", "origin", "HEAD:triton_v3.3.x", cwd=work, env=env)
    return git("rev-parse", "HEAD", cwd=work, env=env)


def served_world(root: Path) -> tuple[Any, str, GitDaemon, Path]:
    """The grown git world served by `git daemon`, and a git config sending the GitHub URLs there:
    (world, FlagTree's new tip, daemon, gitconfig)."""
    world = build_world(root / "world")
    pin = grow(world.root, world.env)
    daemon = GitDaemon(world.root / "bare", env=world.env)
    gitconfig = root / "bench.gitconfig"
    gitconfig.write_text(f'[url "git://127.0.0.1:{daemon.port}/"]\n\tinsteadOf = https://github.com/\n')
    return world, pin, daemon, gitconfig


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def main() -> int:
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    try:
        world, pin, daemon, gitconfig = served_world(root)
        env = {**git_env(root / "home", gitconfig), "NO_COLOR": "1"}
        (root / "home").mkdir()
        sets = ["--set", f"sources.flagtree.commit={pin}"]
        flagtree_url = "https://github.com/flagos-ai/FlagTree.git"
        cpu_url = "https://github.com/flagos-ai/flagtree-cpu.git"

        def manual(dest: Path) -> float:
            return (timed(["git", "clone", "--quiet", flagtree_url, str(dest / "FlagTree")], env)
                    + timed(["git", "checkout", "--quiet", pin], env, dest / "FlagTree")
                    + timed(["git", "clone", "--quiet", "--recursive", cpu_url,
                             str(dest / "FlagTree/third_party/triton-cpu")], env))

        def tool(dest: Path, *extra: str) -> float:
            return timed([cli, "-q", "-w", str(dest), *sets, "sync", *extra], env)

        cache = root / "git-cache"
        results = {
            "manual clone (git clone + checkout + clone --recursive)": manual(root / "manual1"),
            "flagtree-cpu sync, first workspace, no cache": tool(root / "ws1"),
            "flagtree-cpu sync, first workspace, filling --git-cache": tool(root / "ws2", "--git-cache", str(cache)),
            "flagtree-cpu sync, second workspace, from --git-cache": tool(root / "ws3", "--git-cache", str(cache)),
            "manual clone again (second workspace)": manual(root / "manual2"),
        }
        noop_sync = [tool(root / "ws1") for _ in range(RUNS)]
        timed([cli, "-q", "-w", str(root / "ws1"), *sets, "link"], env)
        noop_link = [timed([cli, "-q", "-w", str(root / "ws1"), *sets, "link"], env) for _ in range(RUNS)]
        daemon.close()
        size_mb = sum(f.stat().st_size for f in (world.root / "bare").rglob("*") if f.is_file()) / 2**20

        manual_s = results["manual clone again (second workspace)"]
        print(f"FlagTree stand-in: {size_mb:.0f} MB of packed repositories, served by git daemon on 127.0.0.1")
        print(f"{'what':62} {'seconds':>8} {'vs manual':>10}")
        for name, seconds in results.items():
            print(f"{name:62} {seconds:8.2f} {seconds / manual_s:9.2f}x")
        report = {
            "repository_mb": round(size_mb, 1),
            "clones_s": results,
            "second_workspace_ratio": results["flagtree-cpu sync, second workspace, from --git-cache"] / manual_s,
            "noop_sync_median_s": statistics.median(noop_sync),
            "noop_link_median_s": statistics.median(noop_link),
        }
        print(f"no-op sync: median {report['noop_sync_median_s']:.3f} s; no-op link: median "
              f"{report['noop_link_median_s']:.3f} s (budget {BUDGET_S} s each, {RUNS} runs)")
        print(f"results: {save('sync', report)}")
        over = [k for k in ("noop_sync_median_s", "noop_link_median_s") if report[k] > BUDGET_S]
        if over:
            print(f"OVER BUDGET: {', '.join(over)}")
            return 1
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
