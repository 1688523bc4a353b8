"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def time_command(argv: Sequence[str], *, runs: int, warmup: int = 2, ok_codes: Sequence[int] = (0,),
                 **kwargs: object) -> list[float]:
    """Wall-clock seconds of each of ``runs`` executions (after ``warmup`` discarded ones); a run that
    exits with another code than ``ok_codes`` stops the benchmark instead of being timed."""
    samples = []
    for i in range(warmup + runs):
        start = time.perf_counter()
        done = subprocess.run(list(argv), check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)
        if done.returncode not in ok_codes:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]!r}")
        if i >= warmup:
            samples.append(time.perf_counter() - start)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples),
            "runs": len(samples)}


def save(name: str, document: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def fixture_env(root: Path, gitconfig: Path, **extra: str) -> dict[str, str]:
    """The environment a benchmark runs the tool in: this shell's, with HOME and caches under ``root``, git
    pointed at the fixture world (``gitconfig``), the fixture build's record file, and ``extra``; no TRITON_HOME
    (the tool's LLVM goes under that HOME)."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "GIT_CONFIG_GLOBAL": str(gitconfig), "GIT_CONFIG_NOSYSTEM": "1", "NO_COLOR": "1",
           "FIXTURE_BUILD_RECORD": str(root / "record.jsonl"), **extra}
    env.pop("TRITON_HOME", None)
    return env
