"""A 40-unit C++ build alone, with a compile farm of two local distccd helpers, and from the cache.

The fixture FlagTree compiles FIXTURE_BUILD_COMPILE=40 generated units through `ccache g++`, MAX_JOBS at once
(FIXTURE_BUILD_PARALLEL=1, as ninja runs them). Three `build --force` runs, each round from empty local caches:
- alone: no farm, `--jobs 2`;
- farm: `--compile-farm` with two distccd on 127.0.0.1 (2 slots each): {jobs} = 2 + 4, every unit a ccache miss
  that distcc sends to a helper;
- from the cache: the same farm again on the ccache the farm build filled: every unit a hit, nothing sent.
On one machine the helpers share its cores, so the farm cannot be faster here than alone; what it shows is the
farm's overhead (probe, distcc's transfer) and that cache and farm compose. Skipped without distcc/ccache.
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

from tests.support.distccd import Distccd, missing_parts  # noqa: E402
from tests.support.gitworld import build_world  # noqa: E402
from tests.support.tarballs import llvm_tarball  # noqa: E402
from tests.support.venvs import PREREQUISITES, build_venv  # noqa: E402

ROUNDS = 3
UNITS = 40


def main() -> int:
    why = missing_parts()
    if why:
        print(f"skipped: {why}")
        return 0
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-farm-"))
    helpers = [Distccd(jobs=2), Distccd(jobs=2)]
    try:
        world = build_world(root / "world")
        env = fixture_env(root, world.gitconfig, FIXTURE_BUILD_COMPILE=str(UNITS), FIXTURE_BUILD_PARALLEL="1")
        env.pop("FLAGTREE_CPU_COMPILE_FARM", None)
        tarball = root / "llvm.tar.gz"
        tarball.write_bytes(llvm_tarball().data)
        python = build_venv(root / "venv", ["pip", "setuptools", "wheel", "pybind11", "ninja"])
        commit = world["flagtree"].commits["cpu-backend"]
        base = [cli, "-q", "-w", str(root / "ws"), "--set", f"sources.flagtree.commit={commit}", "--set", PREREQUISITES]
        for step in (["sync"], ["link"], ["fetch", "--offline", "--from", str(tarball)]):
            subprocess.run([*base, *step], env=env, check=True, capture_output=True)
        farm = " ".join(h.spec for h in helpers)

        def build(ccache_dir: Path, *extra: str) -> tuple[float, dict]:
            start = time.perf_counter()
            done = subprocess.run([*base, "--json", "build", "--force", "--ignore-host", "--jobs", "2", "--python",
                                   str(python), *extra], env={**env, "CCACHE_DIR": str(ccache_dir)},
                                  check=True, capture_output=True, text=True)
            return time.perf_counter() - start, json.loads(done.stdout)["result"]["actions"][0]

        alone, farmed, cached, sent = [], [], [], []
        for i in range(ROUNDS):
            alone.append(build(root / f"ccache-alone-{i}")[0])
            before = sum(len(h.compiled()) for h in helpers)
            seconds, action = build(root / f"ccache-farm-{i}", "--compile-farm", farm)
            assert action["compile_farm"]["active"], action
            farmed.append(seconds)
            sent.append(sum(len(h.compiled()) for h in helpers) - before)
            before = sum(len(h.compiled()) for h in helpers)
            cached.append(build(root / f"ccache-farm-{i}", "--compile-farm", farm)[0])
            sent.append(sum(len(h.compiled()) for h in helpers) - before)
        report = {"units": UNITS, "rounds": ROUNDS, "alone_median_s": statistics.median(alone),
                  "farm_median_s": statistics.median(farmed), "from_cache_median_s": statistics.median(cached),
                  "units_sent_per_build": sent}
        print(f"{UNITS} units, --jobs 2: alone {report['alone_median_s']:.2f} s | farm of 2 local distccd "
              f"(jobs 6) {report['farm_median_s']:.2f} s | from the cache {report['from_cache_median_s']:.2f} s "
              f"(medians of {ROUNDS}; units sent to the farm per build: {sent})")
        print(f"results: {save('farm', report)}")
        ok = all(n == UNITS for n in sent[0::2]) and not any(sent[1::2])
        return 0 if ok else 1
    finally:
        for helper in helpers:
            helper.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
