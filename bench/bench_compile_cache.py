"""A cold build vs a second workspace's build from the shared compile cache (a real Redis on loopback).

Both workspaces build the fixture FlagTree with FIXTURE_BUILD_COMPILE units compiled through ccache and
`--compile-cache redis://127.0.0.1:PORT`; each has its own CCACHE_DIR, so the second one's hits are all
remote. Each round starts with an empty Redis and empty local caches; both builds are `--force`d. The
by-hand figure is the same compilations with `ccache g++` and CCACHE_REMOTE_STORAGE set by hand (no pip,
no tool): the cache's own ratio, which the tool's figure approaches as the build's own cost shrinks
relative to compiling (a real FlagTree build compiles for tens of minutes).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import fixture_env, save  # noqa: E402

from tests.support.gitworld import build_world  # noqa: E402
from tests.support.redisserver import RedisServer, missing_parts  # noqa: E402
from tests.support.tarballs import llvm_tarball  # noqa: E402
from tests.support.venvs import PREREQUISITES, build_venv  # noqa: E402

ROUNDS = 3
UNITS = 16
SETUP_PY = HERE.parent / "tests" / "fixtures" / "projects" / "flagtree-base" / "python" / "setup.py"


def main() -> int:
    why = missing_parts()
    if why:
        print(f"skipped: {why}")
        return 0
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-compile-cache-"))
    try:
        world = build_world(root / "world")
        env = fixture_env(root, world.gitconfig, FIXTURE_BUILD_COMPILE=str(UNITS))
        env.pop("FLAGTREE_CPU_COMPILE_CACHE", None)
        tarball = root / "llvm.tar.gz"
        tarball.write_bytes(llvm_tarball().data)
        commit = world["flagtree"].commits["cpu-backend"]
        workspaces = {}
        for name in ("a", "b"):
            python = build_venv(root / f"venv-{name}", ["pip", "setuptools", "wheel", "pybind11", "ninja"])
            base = [cli, "-q", "-w", str(root / name), "--set", f"sources.flagtree.commit={commit}",
                    "--set", PREREQUISITES]
            for step in (["sync"], ["link"], ["fetch", "--offline", "--from", str(tarball)]):
                subprocess.run([*base, *step], env=env, check=True, capture_output=True)
            workspaces[name] = (base, python)

        def build(name: str, url: str, ccache_dir: Path) -> tuple[float, dict]:
            base, python = workspaces[name]
            start = time.perf_counter()
            done = subprocess.run([*base, "--json", "build", "--force", "--ignore-host", "--python", str(python),
                                   "--compile-cache", url], env={**env, "CCACHE_DIR": str(ccache_dir)},
                                  check=True, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            return seconds, json.loads(done.stdout)["result"]["actions"][0]["compile_cache"]["stats"]

        cold_s, warm_s, hits = [], [], []
        for i in range(ROUNDS):
            server = RedisServer(root / f"redis-{i}")
            try:
                seconds, _ = build("a", server.url, root / f"ccache-a-{i}")
                cold_s.append(seconds)
                seconds, stats = build("b", server.url, root / f"ccache-b-{i}")
                warm_s.append(seconds)
                hits.append(stats["remote_storage_hit"])
            finally:
                server.stop()
        by_hand = _by_hand(root, env)
        cold, warm = statistics.median(cold_s), statistics.median(warm_s)
        report = {"units": UNITS, "rounds": ROUNDS, "cold_build_median_s": cold, "shared_cache_build_median_s": warm,
                  "ratio": warm / cold, "remote_hits": hits, **by_hand}
        print(f"build of {UNITS} units, cold: median {cold:.2f} s | another workspace from the shared cache: median "
              f"{warm:.2f} s -> {warm / cold:.2f}x ({ROUNDS} rounds; remote hits {hits})")
        print(f"by hand (ccache g++ with CCACHE_REMOTE_STORAGE): cold {by_hand['by_hand_cold_s']:.2f} s, "
              f"from the shared cache {by_hand['by_hand_warm_s']:.2f} s -> {by_hand['by_hand_ratio']:.2f}x")
        print(f"results: {save('compile_cache', report)}")
        return 0 if all(h == UNITS for h in hits) and warm < cold else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _by_hand(root: Path, env: dict[str, str]) -> dict[str, float]:
    """The same units compiled by `ccache g++` in two folders sharing one Redis (what the tool sets up)."""
    text = SETUP_PY.read_text()
    unit = text.split('UNIT = """', 1)[1].split('"""', 1)[0]
    server = RedisServer(root / "redis-by-hand")
    seconds = {}
    try:
        for name in ("cold", "warm"):
            folder = root / f"by-hand-{name}"
            folder.mkdir()
            cache_env = {**env, "CCACHE_DIR": str(root / f"ccache-by-hand-{name}"), "CCACHE_BASEDIR": str(folder),
                         "CCACHE_REMOTE_STORAGE": server.url, "CCACHE_NAMESPACE": "bench"}
            start = time.perf_counter()
            for i in range(1, UNITS + 1):
                source = folder / f"unit{i}.cpp"
                source.write_text(unit.replace("UNIT", str(i)))
                subprocess.run(["ccache", "g++", "-O2", "-std=c++17", "-c", str(source), "-o",
                                str(folder / f"unit{i}.o")], env=cache_env, cwd=folder, check=True)
            seconds[name] = time.perf_counter() - start
    finally:
        server.stop()
    return {"by_hand_cold_s": seconds["cold"], "by_hand_warm_s": seconds["warm"],
            "by_hand_ratio": seconds["warm"] / seconds["cold"]}


if __name__ == "__main__":
    raise SystemExit(main())
