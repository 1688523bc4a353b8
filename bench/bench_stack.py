"""The stacked recipe (`flaggems-arm` on `flagtree-cpu-arm64`) on the loopback fixtures: a cold
`setup` (the base first, then FlagGems) and a no-op re-run, against the manual way of making sure a
stack is current: running both pip builds again (FlagTree's `pip install -e python/` and FlagGems'
`pip install -e .`, each with its environment from `flagtree-cpu env --build`).

The fixture builds compile nothing, so the manual figure is pip's own floor; on a board a re-run of
FlagTree's pip also re-enters CMake and ninja, and FlagGems' re-enters scikit-build-core.
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
from tests.support.httpserver import LoopbackHTTPServer  # noqa: E402
from tests.support.tarballs import TOP, llvm_tarball  # noqa: E402
from tests.support.venvs import TOOLS, build_venv  # noqa: E402
from tests.support.worlds.flaggems import build_flaggems_world, stack_overrides, write_base_recipe  # noqa: E402

RUNS = 7
NOOP_BUDGET_S = 2.0


def main() -> int:
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-stack-"))
    server = LoopbackHTTPServer()
    try:
        world = build_flaggems_world(root / "world", build_world(root / "base-world"))
        env = fixture_env(root, world.gitconfig)
        recipes = root / "recipes"
        write_base_recipe(recipes, world, server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data))
        python = build_venv(root / "venv", [*TOOLS, "torch", "numpy", "pytest"])
        sets = [x for s in stack_overrides(world) for x in ("--set", s)]
        stack = [cli, "-q", "-w", str(root / "ws"), "--recipes-dir", str(recipes), "--recipe", "flaggems-arm", *sets]
        setup = [*stack, "setup", "--skip-validate", "--ignore-host", "--python", str(python)]

        start = time.perf_counter()
        subprocess.run(setup, env=env, check=True, capture_output=True)
        cold = time.perf_counter() - start

        manual = []
        for recipe, extra, cwd in (("flagtree-cpu-arm64", [], root / "ws" / "FlagTree"),
                                   ("flaggems-arm", sets, root / "ws" / "FlagGems")):
            base = [cli, "-q", "-w", str(root / "ws"), "--recipes-dir", str(recipes), "--recipe", recipe, *extra]
            document = json.loads(subprocess.run([*base, "--json", "env", "--build", "--python", str(python)],
                                                 env=env, check=True, capture_output=True, text=True).stdout)
            build_env = {k: v for k, v in env.items() if k not in document["result"]["unset"]}
            build_env.update(document["result"]["set"])
            argv = [str(python), "-m", "pip", "install", "--no-build-isolation", "-e",
                    "python/" if recipe == "flagtree-cpu-arm64" else "."]
            manual.append((argv, build_env, cwd))

        def timed(commands: list[tuple[list[str], dict[str, str], Path | None]]) -> float:
            begin = time.perf_counter()
            for argv, run_env, cwd in commands:
                subprocess.run(argv, env=run_env, cwd=cwd, check=True, capture_output=True)
            return time.perf_counter() - begin

        tool_s, manual_s = [], []
        for _ in range(RUNS):
            tool_s.append(timed([(setup, env, None)]))
            manual_s.append(timed(manual))
        tool, by_hand = statistics.median(tool_s), statistics.median(manual_s)
        report = {"cold_stack_setup_s": cold, "noop_stack_setup_median_s": tool, "manual_two_pip_median_s": by_hand,
                  "ratio": tool / by_hand, "runs": RUNS, "budget_s": NOOP_BUDGET_S}
        print(f"cold setup of the stack (base, then FlagGems; fixture builds): {cold:.2f} s")
        print(f"no-op setup of the stack: median {tool:.2f} s | both pip builds again by hand: median {by_hand:.2f} s "
              f"-> {tool / by_hand:.2f}x ({RUNS} runs each, interleaved)")
        print(f"results: {save('stack', report)}")
        return 0 if tool <= NOOP_BUDGET_S else 1
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
