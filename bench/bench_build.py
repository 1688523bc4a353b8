"""A no-op `flagtree-cpu build` vs re-running the guide's pip command, on the fixture FlagTree.

The manual way has no way to know nothing changed: it runs `pip install -e python/
--no-build-isolation -v` again, with the same environment (taken from `flagtree-cpu env
--build`). The fixture's setup.py does no compiling, so the manual figure here is pip's
own floor — on real FlagTree a re-run of pip also re-enters CMake and ninja.
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
from tests.support.tarballs import llvm_tarball  # noqa: E402
from tests.support.venvs import PREREQUISITES, build_venv  # noqa: E402

RUNS = 7


def main() -> int:
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-build-"))
    try:
        world = build_world(root / "world")
        env = fixture_env(root, world.gitconfig)
        python = build_venv(root / "venv", ["pip", "setuptools", "wheel", "pybind11", "ninja"])
        tarball = root / "llvm.tar.gz"
        tarball.write_bytes(llvm_tarball().data)
        base = [cli, "-q", "-w", str(root / "ws"), "--set",
                f"sources.flagtree.commit={world['flagtree'].commits['cpu-backend']}", "--set", PREREQUISITES]
        for step in (["sync"], ["link"], ["fetch", "--offline", "--from", str(tarball)],
                     ["build", "--ignore-host", "--python", str(python)]):
            subprocess.run([*base, *step], env=env, check=True, capture_output=True)
        build_env_doc = json.loads(subprocess.run([*base, "--json", "env", "--build", "--python", str(python)],
                                                  env=env, check=True, capture_output=True,
                                                  text=True).stdout)["result"]
        manual_env = {k: v for k, v in env.items() if k not in build_env_doc["unset"]}
        manual_env.update(build_env_doc["set"])
        manual = [str(python), "-m", "pip", "install", "-e", "python/", "--no-build-isolation", "-v"]

        def timed(argv: list[str], run_env: dict[str, str], cwd: Path | None = None) -> float:
            start = time.perf_counter()
            subprocess.run(argv, env=run_env, cwd=cwd, check=True, capture_output=True)
            return time.perf_counter() - start

        tool_s, manual_s = [], []
        for _ in range(RUNS):
            tool_s.append(timed([*base, "build", "--ignore-host", "--python", str(python)], env))
            manual_s.append(timed(manual, manual_env, root / "ws" / "FlagTree"))
        tool, by_hand = statistics.median(tool_s), statistics.median(manual_s)
        report = {"noop_build_median_s": tool, "manual_pip_median_s": by_hand, "ratio": tool / by_hand,
                  "runs": RUNS}
        print(f"no-op flagtree-cpu build: median {tool:.2f} s | the same pip command again: median {by_hand:.2f} s "
              f"-> {tool / by_hand:.2f}x ({RUNS} runs each, interleaved)")
        print(f"results: {save('build', report)}")
        return 0 if tool <= 1.5 else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
