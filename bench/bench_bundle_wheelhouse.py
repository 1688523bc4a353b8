"""For-wheelhouse bundles against full bundles: the bundle's size, and an air-gapped board's import + setup time.

Board A (the connected machine) sets up the fixture FlagTree on the loopback world (FIXTURE_BUILD_COMPILE real g++
compilations, a BENCH_TARBALL_MB (default 64) incompressible LLVM stand-in on a loopback HTTP server) and publishes
its build into a wheelhouse folder. From A's workspace:

- full: `bundle create` (the sources' pinned commits, LLVM, the build and run-time wheels);
- for-wheelhouse: `bundle create --for-wheelhouse --wheelhouse FOLDER` (the published build, the lock, the recipe
  and the run-time wheels).

Each board is a fresh HOME and empty workdir with every route closed (``FLAGTREE_CPU_NO_NETWORK=1``, pip's index a
dead port, git allowed only ``file``) and a venv with what the path needs (the full board builds: pip, setuptools,
wheel, pybind11, ninja, torch, numpy; the for-wheelhouse board only installs: pip, torch, numpy). Timed: `bundle
import FILE`, then `setup --offline` to validated kernels. Wheels come from a find-links folder (the suite's
test-wheels and a tiny run-time prerequisite), never from the network.
"""

from __future__ import annotations

import json
import os
import shutil
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
from tests.support.venvs import PREREQUISITES, TEST_WHEELS, TOOLS, build_venv, tiny_wheel  # noqa: E402

TARBALL_MB = int(os.environ.get("BENCH_TARBALL_MB", "64"))
UNITS = 40
RUNTIME = "python.runtime=[fixture-runtime==1.0]"  # the board's torch and numpy are its own (a vendor's install)
ONE_KERNEL = "checks=[{uses: flagtree/vector-add, with: {size: 1024}}]"
CLOSED = {"FLAGTREE_CPU_NO_NETWORK": "1", "PIP_INDEX_URL": "http://127.0.0.1:9/simple/", "GIT_CONFIG_COUNT": "2",
          "GIT_CONFIG_KEY_0": "protocol.allow",
          "GIT_CONFIG_VALUE_0": "never", "GIT_CONFIG_KEY_1": "protocol.file.allow", "GIT_CONFIG_VALUE_1": "always"}


def main() -> int:
    if shutil.which("g++") is None:
        print("skipped: no g++ on PATH (A's build compiles with it)")
        return 0
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-bundle-wheelhouse-"))
    server = LoopbackHTTPServer()
    try:
        world = build_world(root / "world")
        links = root / "find-links"
        shutil.copytree(TEST_WHEELS, links)
        shutil.copy(tiny_wheel(root / "w", "fixture-runtime", "1.0"), links)
        env = fixture_env(root, world.gitconfig, FIXTURE_BUILD_COMPILE=str(UNITS), PIP_NO_INDEX="1",
                          PIP_FIND_LINKS=str(links))
        for name in ("FLAGTREE_CPU_WHEELHOUSE", "FLAGTREE_CPU_COMPILE_CACHE", "FLAGTREE_CPU_COMPILE_FARM"):
            env.pop(name, None)
        url = server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball(size_kb=TARBALL_MB * 1024).data)
        commit = world["flagtree"].commits["cpu-backend"]
        sets = [a for s in (f"sources.flagtree.commit={commit}", f"artifacts.llvm.url={url}", PREREQUISITES, RUNTIME,
                            ONE_KERNEL) for a in ("--set", s)]

        stage_s: dict[str, dict[str, float]] = {}

        def run(workdir: Path, *args: str, environ: dict[str, str] = env) -> float:
            start = time.perf_counter()
            done = subprocess.run([cli, "-q", "-w", str(workdir), *sets, *args], env=environ, check=False,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(args[:3])} in {workdir} exited {done.returncode}: "
                                   f"{done.stderr[-1200:]!r}")
            if args[:2] == ("--json", "setup"):
                stage_s[workdir.name] = {s["stage"]: round(s.get("seconds") or 0.0, 2)
                                         for s in json.loads(done.stdout)["result"]["stages"]}
            return time.perf_counter() - start

        venv_a = build_venv(root / "venv-a", [*TOOLS, "torch", "numpy"])
        run(root / "a", "setup", "--ignore-host", "--python", str(venv_a))
        run(root / "a", "build", "--ignore-host", "--python", str(venv_a), "--wheel", str(root / "dist"),
            "--publish", str(root / "wheelhouse"))
        bundles = {"full": root / "full.bundle", "for_wheelhouse": root / "for-wheelhouse.bundle"}
        create_s = {"full": run(root / "a", "bundle", "create", "-o", str(bundles["full"])),
                    "for_wheelhouse": run(root / "a", "bundle", "create", "--for-wheelhouse", "--wheelhouse",
                                          str(root / "wheelhouse"), "-o", str(bundles["for_wheelhouse"]))}
        report: dict[str, object] = {"tarball_mb": TARBALL_MB, "units": UNITS}
        for kind, bundle in bundles.items():
            home = root / f"home-{kind}"
            home.mkdir()
            (home / ".gitconfig").write_text("")  # no redirect to the world: a board has no upstream
            board_env = {**{k: v for k, v in env.items() if k not in ("PIP_NO_INDEX", "PIP_FIND_LINKS")},
                         "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
                         "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), **CLOSED}
            names = [*TOOLS, "torch", "numpy"] if kind == "full" else ["pip", "torch", "numpy"]
            python = build_venv(root / f"venv-{kind}", names)
            workdir = root / f"board-{kind}"
            imported = run(workdir, "bundle", "import", str(bundle), "--python", str(python), environ=board_env)
            setup = run(workdir, "--json", "setup", "--offline", "--ignore-host", "--python", str(python),
                        environ=board_env)
            clones = int((workdir / "FlagTree").is_dir())
            report[kind] = {"bytes": bundle.stat().st_size, "create_s": create_s[kind], "import_s": imported,
                            "setup_s": setup, "board_s": imported + setup, "clones": clones,
                            "setup_stage_s": stage_s[workdir.name]}
        full, lean = report["full"], report["for_wheelhouse"]
        assert isinstance(full, dict) and isinstance(lean, dict)
        for kind, data in (("full bundle", full), ("for-wheelhouse bundle", lean)):
            print(f"{kind}: {data['bytes'] / 1e6:.2f} MB (create {data['create_s']:.2f} s); board: import "
                  f"{data['import_s']:.2f} s + setup --offline {data['setup_s']:.2f} s = {data['board_s']:.2f} s, "
                  f"{data['clones']} clone(s); per stage (s): {data['setup_stage_s']}")
        print(f"for-wheelhouse / full: size {lean['bytes'] / full['bytes']:.3f}x, board time "
              f"{lean['board_s'] / full['board_s']:.2f}x")
        print(f"results: {save('bundle_wheelhouse', report)}")
        return 0 if lean["clones"] == 0 and lean["bytes"] < full["bytes"] else 1
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
