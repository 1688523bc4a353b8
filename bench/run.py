"""Run every benchmark (bench_*.py) in this folder; non-zero exit when one misses its budget."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    sys.path.insert(0, str(HERE))
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.stem}")
        module = runpy.run_path(str(script))
        if module["main"]() != 0:
            failed.append(script.stem)
    if failed:
        print(f"benchmarks over budget: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
