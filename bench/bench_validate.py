"""validate's overhead over running the same kernel scripts by hand. Budget: at most 1.5x.

The manual way is what the guide asks of a user: run each validation snippet with the build's
Python and read what it prints. Here both run vector-add and softmax with this venv's Python
through PyPI's triton in its interpreter (TRITON_INTERPRET=1) — the only Triton that runs on this
x86_64 machine; on a board the kernels take longer and the ratio only gets closer to 1. The tool
adds the prerequisite check (one short process), a log per kernel and the judgement.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import save, summary, time_command

BUDGET_RATIO = 1.5
RUNS = 5
KERNELS = ("vector_add.py", "softmax.py")


def main() -> int:
    try:
        import triton  # noqa: F401
    except ImportError:
        print("skipped: PyPI's triton is not installed in this venv (x86_64 Linux only)")
        return 0
    from flagtree_cpu_build.presets import PRESETS_DIR

    scripts = PRESETS_DIR / "flagtree"  # the FEP presets' scripts

    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    env = {**os.environ, "TRITON_INTERPRET": "1", "FLAGTREE_BACKEND": "cpu"}
    with tempfile.TemporaryDirectory() as workdir:
        by_hand = [sys.executable, "-c", "import subprocess, sys\n"
                   f"for script in {[str(scripts / k) for k in KERNELS]!r}:\n"
                   "    subprocess.run([sys.executable, script], check=True)"]
        tool = [cli, "-w", workdir, "--set", "python.runtime=[torch>=2.0, numpy]", "validate", "--python",
                sys.executable, "--check", "vector-add", "--check", "softmax"]
        manual_samples: list[float] = []
        tool_samples: list[float] = []
        for _ in range(RUNS):  # interleaved, so both see the same machine
            manual_samples += time_command(by_hand, runs=1, warmup=0, env=env)
            tool_samples += time_command(tool, runs=1, warmup=0, env=env)
    manual, ours = summary(manual_samples), summary(tool_samples)
    ratio = ours["median_s"] / manual["median_s"]
    print(f"{'scripts by hand':30} median {manual['median_s']:.2f} s")
    print(f"{'flagtree-cpu validate':30} median {ours['median_s']:.2f} s  ({ratio:.2f}x, budget {BUDGET_RATIO}x)")
    document = {"budget_ratio": BUDGET_RATIO, "by_hand": manual, "validate": ours, "ratio": ratio}
    print(f"results: {save('validate', document)}")
    return 0 if ratio <= BUDGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
