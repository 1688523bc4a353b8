"""Start-up time of the CLI: --version and --help must stay under 0.3 s (median).

The floor is the bare interpreter (`python -c pass`); the ratio says how much the CLI
adds on top of Python itself. Run by `make bench`, not by the test suite.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from common import save, summary, time_command

BUDGET_S = 0.3
RUNS = 21


def main() -> int:
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    cases = {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "flagtree-cpu --version": [cli, "--version"],
        "flagtree-cpu --help": [cli, "--help"],
        "flagtree-cpu recipe validate": [cli, "recipe", "validate"],
        "flagtree-cpu recipe show": [cli, "recipe", "show"],
    }
    results = {name: summary(time_command(argv, runs=RUNS)) for name, argv in cases.items()}
    floor = results["python -c pass (floor)"]["median_s"]
    print(f"{'command':34} {'median':>8} {'min':>8} {'max':>8} {'x floor':>8}")
    for name, r in results.items():
        r["ratio_to_floor"] = r["median_s"] / floor
        print(f"{name:34} {r['median_s']:8.3f} {r['min_s']:8.3f} {r['max_s']:8.3f} {r['ratio_to_floor']:8.1f}")
    over = [n for n in ("flagtree-cpu --version", "flagtree-cpu --help") if results[n]["median_s"] > BUDGET_S]
    path = save("startup", {"budget_s": BUDGET_S, "results": results})
    print(f"results: {path}")
    if over:
        print(f"OVER BUDGET ({BUDGET_S}s): {', '.join(over)}")
        return 1
    print(f"--version and --help are within the {BUDGET_S}s budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
