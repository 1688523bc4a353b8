"""Install-only boards: a second board from an empty workdir to validated kernels, on loopback.

Board A syncs, fetches and builds the fixture FlagTree (FIXTURE_BUILD_COMPILE real g++ compilations), publishes into
a wheelhouse that the loopback HTTP server serves beside the LLVM tarball. Then, each round, a fresh empty workdir
and a fresh venv (pip, setuptools, wheel, pybind11, ninja, torch, numpy linked in) run `setup --wheelhouse URL`:

- before: the empty workdir without a lock, so no pins key: today's path (clone the sources, download and unpack
  LLVM, then take the wheel by the build key);
- after: the empty workdir holding A's lock: the install-only path (no clone, no LLVM);
- the build: A's own `setup` (no wheelhouse), what a board costs without one.

Reported per path: wall time (median), bytes of LLVM served (GET responses' bodies), clones made (source checkouts
left in the workdir). The budget: after ≤ 5 s, 0 bytes of LLVM, no clone. The fixture LLVM tarball is small; a real
FlagTree LLVM is about 800 MB, which "before" downloads and "after" does not.
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
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv  # noqa: E402

ROUNDS = 3
UNITS = 40
BUDGET_S = 5.0
LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"
RUNTIME = "python.runtime=[torch>=2.0, numpy]"
ONE_KERNEL = "checks=[{uses: flagtree/vector-add, with: {size: 1024}}]"


def main() -> int:
    if shutil.which("g++") is None:
        print("skipped: no g++ on PATH (A's build compiles with it)")
        return 0
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-install-only-"))
    server = LoopbackHTTPServer()
    try:
        world = build_world(root / "world")
        env = fixture_env(root, world.gitconfig, FIXTURE_BUILD_COMPILE=str(UNITS))
        for name in ("FLAGTREE_CPU_WHEELHOUSE", "FLAGTREE_CPU_COMPILE_CACHE"):
            env.pop(name, None)
        tarball = llvm_tarball()
        url = server.serve(LLVM_PATH, tarball.data)
        commit = world["flagtree"].commits["cpu-backend"]
        sets = [f"sources.flagtree.commit={commit}", f"artifacts.llvm.url={url}", PREREQUISITES, RUNTIME, ONE_KERNEL]

        stage_s: dict[str, list[dict[str, float]]] = {}

        def board_env(workdir: Path) -> dict[str, str]:
            home = root / f"home-{workdir.name}"
            home.mkdir(exist_ok=True)
            return {**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
                    "CCACHE_DIR": str(root / f"ccache-{workdir.name}")}

        def setup(workdir: Path, python: Path, *args: str) -> tuple[float, int]:
            """Seconds of `setup` from ``workdir`` and the LLVM bytes the server sent meanwhile. Each board has its
            own HOME (its download cache and ~/.triton/llvm): a second board shares neither with the first."""
            argv = [cli, "-q", "-w", str(workdir), *(a for s in sets for a in ("--set", s)), "--json", "setup",
                    "--ignore-host", "--python", str(python), *args]
            before = _llvm_gets(server)
            start = time.perf_counter()
            done = subprocess.run(argv, env=board_env(workdir), check=False, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            if done.returncode != 0:
                raise RuntimeError(f"setup in {workdir} exited {done.returncode}: {done.stderr[-1200:]!r}")
            stages = json.loads(done.stdout)["result"]["stages"]
            stage_s.setdefault(workdir.name.split("-")[0], []).append(
                {s["stage"]: round(s.get("seconds") or 0.0, 2) for s in stages})
            return seconds, (_llvm_gets(server) - before) * len(tarball.data)

        full = [*TOOLS, "torch", "numpy"]
        build_s, build_bytes = setup(root / "a", build_venv(root / "venv-a", full))
        wheelhouse = root / "wheelhouse"
        published = subprocess.run([cli, "-q", "-w", str(root / "a"), *(a for s in sets for a in ("--set", s)),
                                    "build", "--ignore-host", "--python", str(root / "venv-a" / "bin" / "python"),
                                    "--wheel", str(root / "dist"), "--publish", str(wheelhouse)],
                                   env=board_env(root / "a"), capture_output=True, text=True, check=False)
        if published.returncode != 0:
            raise RuntimeError(f"A's publish exited {published.returncode}: {published.stderr[-800:]!r}")
        for path in wheelhouse.rglob("*"):
            if path.is_file():
                server.serve(f"/fleet/{path.relative_to(wheelhouse).as_posix()}", path.read_bytes())
        fleet = server.url("/fleet/")

        results: dict[str, dict[str, list]] = {p: {"s": [], "llvm_bytes": [], "clones": []}
                                               for p in ("before", "after")}
        for i in range(ROUNDS):
            for path in ("before", "after"):
                workdir = root / f"{path}-{i}"
                if path == "after":  # the same lock as A: every pin known before anything is downloaded
                    (workdir / ".flagtree-cpu").mkdir(parents=True)
                    shutil.copy(root / "a" / ".flagtree-cpu" / "lock.yaml", workdir / ".flagtree-cpu" / "lock.yaml")
                seconds, sent = setup(workdir, build_venv(root / f"venv-{path}-{i}", full), "--wheelhouse", fleet)
                results[path]["s"].append(seconds)
                results[path]["llvm_bytes"].append(sent)
                results[path]["clones"].append(sum((workdir / name).is_dir() for name in ("FlagTree",)))
        before, after = (statistics.median(results[p]["s"]) for p in ("before", "after"))
        after_bytes, after_clones = max(results["after"]["llvm_bytes"]), max(results["after"]["clones"])
        report = {"units": UNITS, "rounds": ROUNDS, "build_setup_s": build_s, "build_llvm_bytes": build_bytes,
                  "before_median_s": before, "after_median_s": after, "budget_s": BUDGET_S, "stage_s": stage_s, **{
                      f"{p}_{k}": v for p in results for k, v in results[p].items()}}
        print(f"the build (A's setup, no wheelhouse): {build_s:.2f} s, {build_bytes} bytes of LLVM, 1 clone")
        print(f"before (empty workdir, no lock: sync + fetch + take by build key): median {before:.2f} s, "
              f"{max(results['before']['llvm_bytes'])} bytes of LLVM, {max(results['before']['clones'])} clone(s)")
        print(f"after (empty workdir + A's lock: install-only): median {after:.2f} s, {after_bytes} bytes of LLVM, "
              f"{after_clones} clone(s) (budget <= {BUDGET_S:.0f} s, 0 bytes, no clone)")
        print(f"after, per stage (s): {stage_s.get('after', [{}])[0]}")
        print(f"results: {save('install_only', report)}")
        return 0 if after <= BUDGET_S and after_bytes == 0 and after_clones == 0 else 1
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


def _llvm_gets(server: LoopbackHTTPServer) -> int:
    return len([r for r in server.requests_for(LLVM_PATH) if r.method == "GET" and r.status in (200, 206)])


if __name__ == "__main__":
    raise SystemExit(main())
