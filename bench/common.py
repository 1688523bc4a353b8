"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import json
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
