"""A fleet's wheelhouse: workspace A builds and publishes, workspace B installs that build without compiling.

Workspace A builds the fixture FlagTree with FIXTURE_BUILD_COMPILE real g++ compilations and publishes the
wheel (`build --force --publish WH`, a fresh wheelhouse folder each round); workspace B, set up from the same
git world and recipe in another folder, then runs `build --wheelhouse WH` into a fresh target venv (and
without its stamp), so each round is a real download, verification and pip install; B's build record must
stay empty. B's sync wrote the lock A's is, so B takes the install-only path (the build keyed by the lock's pins,
`stages/build/install_only.py`: no build prerequisites, the record `install-only.json`); the check requires it. A's
time is what B would cost without the wheelhouse (a real FlagTree build compiles for tens of
minutes, so the ratio only gets smaller). Then B again with nothing changed: "up to date".

The by-hand figure is what a person would do to reuse A's wheel on B: copy it from A's dist folder and
`pip install --no-deps --no-index --force-reinstall` it into a fresh venv (no tool, no verification, no
stamp): the floor the tool's install approaches.
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
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv  # noqa: E402

ROUNDS = 3
UNITS = 40  # ~16 s of g++ here; a real FlagTree build compiles for tens of minutes
BUDGET = 0.10  # B's install over A's build and publish
FROM_WHEELHOUSE = "installed from the wheelhouse"


def main() -> int:
    if shutil.which("g++") is None:
        print("skipped: no g++ on PATH (A's build compiles with it)")
        return 0
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    root = Path(tempfile.mkdtemp(prefix="bench-wheelhouse-"))
    try:
        world = build_world(root / "world")
        env = fixture_env(root, world.gitconfig, FIXTURE_BUILD_COMPILE=str(UNITS))
        for name in ("FLAGTREE_CPU_WHEELHOUSE", "FLAGTREE_CPU_COMPILE_CACHE"):
            env.pop(name, None)
        tarball = root / "llvm.tar.gz"
        tarball.write_bytes(llvm_tarball().data)
        commit = world["flagtree"].commits["cpu-backend"]
        bases = {}
        for name in ("a", "b"):
            base = [cli, "-q", "-w", str(root / name), "--set", f"sources.flagtree.commit={commit}",
                    "--set", PREREQUISITES]
            for step in (["sync"], ["link"], ["fetch", "--offline", "--from", str(tarball)]):
                subprocess.run([*base, *step], env=env, check=True, capture_output=True)
            bases[name] = base
        python_a = build_venv(root / "venv-a", TOOLS)

        def build(name: str, python: Path, *args: str, ccache_dir: Path) -> tuple[float, dict]:
            record = root / f"record-{name}.jsonl"
            start = time.perf_counter()
            done = subprocess.run([*bases[name], "--json", "build", "--ignore-host", "--python", str(python), *args],
                                  env={**env, "FIXTURE_BUILD_RECORD": str(record), "CCACHE_DIR": str(ccache_dir)},
                                  check=False, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            if done.returncode != 0:
                raise RuntimeError(f"build {name} {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]!r}")
            return seconds, json.loads(done.stdout)["result"]["actions"][0]

        a_s, b_s, noop_s, hand_s, details, noops, b_builds = [], [], [], [], [], [], []
        for i in range(ROUNDS):
            wheelhouse = root / f"wheelhouse-{i}"
            seconds, built = build("a", python_a, "--force", "--publish", str(wheelhouse),
                                  ccache_dir=root / f"ccache-a-{i}")
            if built["published"]["status"] != "published":
                raise RuntimeError(f"A did not publish: {built['published']}")
            a_s.append(seconds)

            python_b = build_venv(root / f"venv-b-{i}", TOOLS)
            (root / "b" / ".flagtree-cpu" / "build-editable.json").unlink(missing_ok=True)
            record_b = root / "record-b.jsonl"
            record_b.unlink(missing_ok=True)
            seconds, taken = build("b", python_b, "--wheelhouse", str(wheelhouse), ccache_dir=root / "ccache-b")
            b_s.append(seconds)
            details.append(taken["detail"] if taken.get("install_only") else f"not install-only: {taken['detail']}")
            b_builds.append(len(record_b.read_text().splitlines()) if record_b.exists() else 0)
            if taken.get("wheelhouse", {}).get("sha256") != built["published"]["sha256"]:
                details[-1] = f"not A's wheel: {taken.get('wheelhouse')}"  # fails the check below

            seconds, again = build("b", python_b, "--wheelhouse", str(wheelhouse), ccache_dir=root / "ccache-b")
            noop_s.append(seconds)
            noops.append(again["detail"])

            hand_s.append(_by_hand(root, Path(built["wheel"]["path"]), i))
        a, b, noop, hand = (statistics.median(s) for s in (a_s, b_s, noop_s, hand_s))
        taken_ok = all(d.startswith(FROM_WHEELHOUSE) for d in details) and not any(b_builds)
        noop_ok = all(d == "up to date" for d in noops)
        report = {"units": UNITS, "rounds": ROUNDS, "a_build_publish_median_s": a, "b_install_median_s": b,
                  "ratio": b / a, "budget": BUDGET, "by_hand_pip_install_median_s": hand,
                  "b_vs_by_hand": b / hand, "noop_median_s": noop, "a_build_publish_s": a_s, "b_install_s": b_s,
                  "noop_s": noop_s, "by_hand_pip_install_s": hand_s, "b_details": details, "b_builds_run": b_builds,
                  "noop_details": noops}
        print(f"A builds {UNITS} units and publishes: median {a:.2f} s | B installs from the wheelhouse: median "
              f"{b:.2f} s -> {b / a:.3f}x (budget < {BUDGET:.2f}; {ROUNDS} rounds; B builds run {b_builds})")
        print(f"by hand (copy A's wheel, pip install --no-deps --no-index --force-reinstall): median {hand:.2f} s "
              f"-> B is {b / hand:.2f}x that")
        print(f"B again, nothing changed: median {noop:.2f} s ({', '.join(sorted(set(noops)))})")
        print(f"B's detail: {details[0]}")
        print(f"results: {save('wheelhouse', report)}")
        return 0 if b / a < BUDGET and taken_ok and noop_ok else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _by_hand(root: Path, wheel: Path, i: int) -> float:
    """Copy A's wheel and pip install it into a fresh venv, as a person would: seconds of the copy and install."""
    python = build_venv(root / f"venv-hand-{i}", TOOLS)
    folder = root / f"by-hand-{i}"
    folder.mkdir()
    start = time.perf_counter()
    copy = Path(shutil.copy2(wheel, folder / wheel.name))
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall",
                    "--disable-pip-version-check", "--no-input", str(copy)], check=True, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
