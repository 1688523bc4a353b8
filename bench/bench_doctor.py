"""doctor on this machine: the whole run, text and --json, network probes included. Budget 2 s.

There is no manual equivalent to compare with: the guide's FAQ is read by a person. The
figure to watch is the wall time a user waits, median of RUNS.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from common import save, summary, time_command

BUDGET_S = 2.0
RUNS = 9


def main() -> int:
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    results = {
        # exit 7 is doctor's answer on a machine it finds wanting (this x86 box): a normal run
        "flagtree-cpu doctor": summary(time_command([cli, "doctor"], runs=RUNS, warmup=1, ok_codes=(0, 7))),
        "flagtree-cpu doctor --json": summary(time_command([cli, "doctor", "--json"], runs=RUNS, warmup=1,
                                                           ok_codes=(0, 7))),
    }
    for name, r in results.items():
        print(f"{name:30} median {r['median_s']:.2f} s (min {r['min_s']:.2f}, max {r['max_s']:.2f})")
    print(f"results: {save('doctor', {'budget_s': BUDGET_S, 'results': results})}")
    return 0 if all(r["median_s"] <= BUDGET_S for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
