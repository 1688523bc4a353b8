"""Air-gapped bundles on the loopback world: `bundle create` and `bundle import` against doing the same by hand.

The world: the FlagTree fixture repositories (FlagTree, flagtree-cpu, its sleef submodule) behind `git daemon`
on 127.0.0.1, the stand-in LLVM tarball (BENCH_TARBALL_MB, default 64, incompressible) on a loopback HTTP server,
and the recipe's Python prerequisites as tiny wheels on a loopback PEP 503 index.

By hand, on the connected machine: `git clone --mirror` of the three repositories, `git bundle create --all` of
each, `pip download` of the wheels, and a copy of the tarball (what someone following the guide would carry);
on the board: `git clone` from each bundle, `cp` of the tarball. The tool does more (pins, a manifest of sha256s,
verification before anything is used, the caches seeded so every stage works offline), and the ratios say what
that costs.

The git part, before and after bundles of pinned commits only: "before" is each repository's whole history (`git
bundle create --all` of its mirror, what `bundle create` carried until then), "after" the tool's git members (one
pack of the pinned commits per repository). Measured on the fixture world as it is, and on a long-history world:
FlagTree grown by BENCH_BULK_MB (default 60) of history (four rewrites of 400 files, as bench_sync does) and pinned
at the grown tip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench_sync import grow  # noqa: E402
from common import save  # noqa: E402

from tests.support.gitdaemon import GitDaemon  # noqa: E402
from tests.support.gitworld import build_world  # noqa: E402
from tests.support.httpserver import LoopbackHTTPServer  # noqa: E402
from tests.support.tarballs import TOP, llvm_tarball  # noqa: E402
from tests.support.venvs import simple_index, tiny_wheel  # noqa: E402

TARBALL_MB = int(os.environ.get("BENCH_TARBALL_MB", "64"))
BULK_MB = int(os.environ.get("BENCH_BULK_MB", "60"))
REPOS = ("flagos-ai/FlagTree.git", "flagos-ai/flagtree-cpu.git", "shibatch/sleef.git")


def main() -> int:
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-bundle-"))
    server = LoopbackHTTPServer()
    try:
        world = build_world(root / "world")
        daemon = GitDaemon(world.root / "bare")
        home = root / "home"
        home.mkdir()
        gitconfig = root / "gitconfig"
        gitconfig.write_text(f'[url "{daemon.url("")}"]\n\tinsteadOf = https://github.com/\n'
                             '[protocol "file"]\n\tallow = always\n')
        env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
               "GIT_CONFIG_GLOBAL": str(gitconfig), "GIT_CONFIG_NOSYSTEM": "1", "NO_COLOR": "1"}
        env.pop("TRITON_HOME", None)
        tarball = llvm_tarball(size_kb=TARBALL_MB * 1024)
        llvm = server.serve(f"/public/llvm-builds/{TOP}.tar.gz", tarball.data)
        index = simple_index(server, "/pypi", tiny_wheel(root / "w1", "fixture-build-tool", "1.0"))
        simple_index(server, "/pypi", tiny_wheel(root / "w2", "fixture-runtime", "2.0"))
        env["PIP_INDEX_URL"] = index
        sets = ["--set", f"sources.flagtree.commit={world['flagtree'].commits['cpu-backend']}",
                "--set", f"artifacts.llvm.url={llvm}",
                "--set", "python.build=[fixture-build-tool]", "--set", "python.runtime=[fixture-runtime]"]

        def run(argv: list[str], **kw: object) -> float:
            start = time.perf_counter()
            subprocess.run(argv, env=env, check=True, capture_output=True, **kw)  # type: ignore[call-overload]
            return time.perf_counter() - start

        bundle = root / "flagtree.bundle"
        create = run([cli, "-q", "-w", str(root / "ws"), *sets, "bundle", "create", "-o", str(bundle)])
        size = bundle.stat().st_size
        git_after = _git_bytes(cli, env, root / "ws-git", sets, root / "git-only.bundle")

        by_hand = root / "by-hand"
        by_hand.mkdir()
        start = time.perf_counter()
        for repo in REPOS:
            name = repo.split("/")[-1]
            subprocess.run(["git", "clone", "--quiet", "--mirror", daemon.url(repo), str(by_hand / name)],
                           env=env, check=True, capture_output=True)
            subprocess.run(["git", "bundle", "create", str(by_hand / f"{name}.bundle"), "--all"],
                           cwd=by_hand / name, env=env, check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(by_hand / "wheels"),
                        "--only-binary=:all:", "fixture-build-tool", "fixture-runtime"], env=env, check=True,
                       capture_output=True)
        subprocess.run(["curl", "-s", "-o", str(by_hand / f"{TOP}.tar.gz"), llvm], env=env, check=True)
        manual_create = time.perf_counter() - start
        git_before = sum(p.stat().st_size for p in by_hand.glob("*.bundle"))
        manual_size = git_before + sum(
            p.stat().st_size for p in (by_hand / "wheels").iterdir()) + (by_hand / f"{TOP}.tar.gz").stat().st_size

        board_home = root / "board-home"
        board_home.mkdir()
        board_env = {**env, "HOME": str(board_home), "XDG_CACHE_HOME": str(board_home / ".cache"),
                     "FLAGTREE_CPU_NO_NETWORK": "1"}
        start = time.perf_counter()
        subprocess.run([cli, "-q", "-w", str(root / "board-ws"), *sets, "bundle", "import", str(bundle)],
                       env=board_env, check=True, capture_output=True)
        tool_import = time.perf_counter() - start
        start = time.perf_counter()
        for repo in REPOS:
            name = repo.split("/")[-1]
            subprocess.run(["git", "clone", "--quiet", "--mirror", str(by_hand / f"{name}.bundle"),
                            str(root / "board-by-hand" / name)], env=env, check=True, capture_output=True)
        shutil.copy(by_hand / f"{TOP}.tar.gz", root / "board-by-hand" / f"{TOP}.tar.gz")
        shutil.copytree(by_hand / "wheels", root / "board-by-hand" / "wheels")
        manual_import = time.perf_counter() - start
        long_before, long_after = _long_history(cli, env, world, daemon, sets, root)
        daemon.close()

        report = {"git_bytes_before": git_before, "git_bytes_after": git_after,
                  "long_history_git_bytes_before": long_before, "long_history_git_bytes_after": long_after,
                  "bulk_mb": BULK_MB,
                  "bundle_bytes": size, "manual_bytes": manual_size, "size_ratio": size / manual_size,
                  "create_s": create, "manual_create_s": manual_create, "create_ratio": create / manual_create,
                  "import_s": tool_import, "manual_import_s": manual_import,
                  "import_ratio": tool_import / manual_import,
                  "tarball_mb": TARBALL_MB}
        print(f"bundle: {size / 1e6:.1f} MB | by hand: {manual_size / 1e6:.1f} MB -> {size / manual_size:.2f}x")
        print(f"create: {create:.2f} s | by hand (3 mirrors + git bundle, pip download, curl): {manual_create:.2f} s "
              f"-> {create / manual_create:.2f}x")
        print(f"import: {tool_import:.2f} s | by hand (3 clones from bundles, copies): {manual_import:.2f} s "
              f"-> {tool_import / manual_import:.2f}x")
        print(f"git part, fixture world: whole history {git_before / 1e3:.1f} kB -> pinned commits "
              f"{git_after / 1e3:.1f} kB ({git_after / git_before:.2f}x)")
        print(f"git part, FlagTree with {BULK_MB} MB of history, pinned at its tip: whole history "
              f"{long_before / 1e6:.1f} MB -> pinned commits {long_after / 1e6:.1f} MB "
              f"({long_after / long_before:.2f}x)")
        print(f"results: {save('bundle', report)}")
        return 0
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


def _git_bytes(cli: str, env: dict[str, str], ws: Path, sets: list[str], out: Path) -> int:
    """The bytes of the git members of a `bundle create` (its --json sizes)."""
    done = subprocess.run([cli, "--json", "-w", str(ws), *sets, "bundle", "create", "-o", str(out)], env=env,
                          check=True, capture_output=True, text=True)
    return int(json.loads(done.stdout)["result"]["sizes"]["git"])


def _whole_history_bytes(daemon: GitDaemon, env: dict[str, str], dest: Path) -> int:
    """`git bundle create --all` of a mirror of each repository: the git part as whole histories."""
    dest.mkdir()
    for repo in REPOS:
        name = repo.split("/")[-1]
        subprocess.run(["git", "clone", "--quiet", "--mirror", daemon.url(repo), str(dest / name)], env=env,
                       check=True, capture_output=True)
        subprocess.run(["git", "bundle", "create", str(dest / f"{name}.bundle"), "--all"], cwd=dest / name, env=env,
                       check=True, capture_output=True)
    return sum(p.stat().st_size for p in dest.glob("*.bundle"))


def _long_history(cli: str, env: dict[str, str], world: object, daemon: GitDaemon, sets: list[str],
                  root: Path) -> tuple[int, int]:
    """(whole history, pinned commits) bytes of the git part once FlagTree has BULK_MB of history, pinned at its
    grown tip."""
    tip = grow(world.root, world.env)  # type: ignore[attr-defined]
    pinned = [*sets, "--set", f"sources.flagtree.commit={tip}"]
    after = _git_bytes(cli, env, root / "ws-long", pinned, root / "long.bundle")
    return _whole_history_bytes(daemon, env, root / "long-by-hand"), after


if __name__ == "__main__":
    raise SystemExit(main())
