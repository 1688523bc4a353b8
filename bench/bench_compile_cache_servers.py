"""The compile cache against servers that do not behave: never slower than building without the cache.

The tool's build of the fixture FlagTree (FIXTURE_BUILD_COMPILE units through ccache, `--force`, an empty
CCACHE_DIR each time) without a compile cache, and with `--compile-cache` pointing at a server that accepts
connections and never answers (a Redis URL and an HTTP one). The tool probes the server in its protocol for at
most 2 s, warns, and builds with the local ccache only.

For comparison, the same compilations by hand with `ccache g++` (no tool): with the silent server as ccache's
remote storage the way the tool set it before the probe (the bare URL: ccache's own 10 s operation timeout, paid
by every compilation), and with a Redis that is stopped (SIGSTOP: it accepted, then answers nothing; what a
server that dies after the probe looks like) under ccache's default timeouts and under the tool's
(`connect-timeout`, `operation-timeout`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import fixture_env, save  # noqa: E402

from flagtree_cpu_build.cache_url import parse_url, remote_storage  # noqa: E402
from tests.support.gitworld import build_world  # noqa: E402
from tests.support.hostileserver import HostileServer  # noqa: E402
from tests.support.redisserver import RedisServer, missing_parts  # noqa: E402
from tests.support.tarballs import llvm_tarball  # noqa: E402
from tests.support.venvs import PREREQUISITES, build_venv  # noqa: E402

UNITS = 8
SETUP_PY = HERE.parent / "tests" / "fixtures" / "projects" / "flagtree-base" / "python" / "setup.py"


def main() -> int:
    why = missing_parts()
    if why:
        print(f"skipped: {why}")
        return 0
    # this checkout's code (a console script on PATH, or the venv's, may be another checkout's install)
    cli = [sys.executable, "-m", "flagtree_cpu_build"]
    root = Path(tempfile.mkdtemp(prefix="bench-compile-cache-servers-"))
    try:
        world = build_world(root / "world")
        env = fixture_env(root, world.gitconfig, FIXTURE_BUILD_COMPILE=str(UNITS), PYTHONPATH=str(HERE.parent))
        env.pop("FLAGTREE_CPU_COMPILE_CACHE", None)
        tarball = root / "llvm.tar.gz"
        tarball.write_bytes(llvm_tarball().data)
        python = build_venv(root / "venv", ["pip", "setuptools", "wheel", "pybind11", "ninja"])
        base = [*cli, "-q", "-w", str(root / "ws"), "--set",
                f"sources.flagtree.commit={world['flagtree'].commits['cpu-backend']}", "--set", PREREQUISITES]
        for step in (["sync"], ["link"], ["fetch", "--offline", "--from", str(tarball)]):
            subprocess.run([*base, *step], env=env, check=True, capture_output=True)
        counter = iter(range(1000))

        def build(*args: str) -> tuple[float, dict]:
            start = time.perf_counter()
            done = subprocess.run([*base, "--json", "build", "--force", "--ignore-host", "--python", str(python),
                                   *args], env={**env, "CCACHE_DIR": str(root / f"ccache-{next(counter)}")},
                                  check=True, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            return seconds, json.loads(done.stdout)["result"]["actions"][0].get("compile_cache", {})

        report: dict[str, float] = {"units": UNITS}
        report["tool_no_cache_s"], _ = build()
        with HostileServer("silent") as server:
            for scheme, path in (("redis", ""), ("http", "/ccache")):
                seconds, data = build("--compile-cache", server.url(scheme, path))
                assert not data["active"] and data["stats"]["remote_storage_timeout"] == 0, data
                report[f"tool_silent_{scheme}_s"] = seconds
            report["tool_silent_connections"] = server.accepted  # the two probes; no compilation connected
            report["by_hand_silent_bare_url_s"] = _by_hand(root, env, server.url("redis"))
        report["by_hand_no_cache_s"] = _by_hand(root, env, None)
        redis = RedisServer(root / "redis-stopped")
        try:
            redis.freeze()
            report["by_hand_stopped_redis_ccache_timeouts_s"] = _by_hand(root, env, redis.url)
            report["by_hand_stopped_redis_tool_timeouts_s"] = _by_hand(
                root, env, remote_storage(parse_url(redis.url), (4, 7)))
        finally:
            redis.stop()
        _print(report)
        print(f"results: {save('compile_cache_servers', report)}")
        # the budget: a silent server costs the build no more than the probe's 2 s (and some noise)
        worst = max(report["tool_silent_redis_s"], report["tool_silent_http_s"])
        return 0 if worst <= report["tool_no_cache_s"] * 1.25 + 2.0 else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _by_hand(root: Path, env: dict[str, str], storage: str | None) -> float:
    """UNITS compilations by `ccache g++` in a fresh folder and cache, with ``storage`` as the remote storage."""
    text = SETUP_PY.read_text()
    unit = text.split('UNIT = """', 1)[1].split('"""', 1)[0]
    folder = Path(tempfile.mkdtemp(prefix="by-hand-", dir=root))
    cache_env = {**env, "CCACHE_DIR": str(folder / "ccache"), "CCACHE_BASEDIR": str(folder)}
    if storage:
        cache_env["CCACHE_REMOTE_STORAGE"] = storage
    start = time.perf_counter()
    for i in range(1, UNITS + 1):
        source = folder / f"unit{i}.cpp"
        source.write_text(unit.replace("UNIT", str(i)))
        subprocess.run(["ccache", "g++", "-O2", "-std=c++17", "-c", str(source), "-o", str(folder / f"unit{i}.o")],
                       env=cache_env, cwd=folder, check=True)
    return time.perf_counter() - start


def _print(r: dict[str, float]) -> None:
    print(f"build of {r['units']:g} units by the tool: no compile cache {r['tool_no_cache_s']:.1f} s | "
          f"--compile-cache on a server that accepts and never answers: redis:// {r['tool_silent_redis_s']:.1f} s, "
          f"http:// {r['tool_silent_http_s']:.1f} s ({r['tool_silent_connections']:g} connections: the probes)")
    print(f"by hand (ccache g++): no remote storage {r['by_hand_no_cache_s']:.1f} s | the silent server as the bare "
          f"URL (the tool before the probe) {r['by_hand_silent_bare_url_s']:.1f} s")
    print(f"by hand, a Redis stopped after it accepted: ccache's timeouts "
          f"{r['by_hand_stopped_redis_ccache_timeouts_s']:.1f} s | the tool's timeouts "
          f"{r['by_hand_stopped_redis_tool_timeouts_s']:.1f} s")


if __name__ == "__main__":
    raise SystemExit(main())
