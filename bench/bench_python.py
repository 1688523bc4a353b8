"""The python stage with pip and with uv, cold and warm: `flagtree-cpu python --skip-runtime` into a new workspace
venv, installing the fixture FlagTree's build prerequisites (setuptools, wheel, pybind11, ninja, packaging) from a
PEP 503 index on 127.0.0.1 (the test suite's own wheels, served by a thread of this process).

Cold: a new workspace and empty caches (pip's and uv's, under a fresh XDG_CACHE_HOME). Warm: a new workspace (so a
new venv: the install is done again), the caches of the previous run kept. pip and uv rounds alternate; median of
ROUNDS. `python -m venv` is the same for both; the by-hand rows time the installer alone (`uv pip install --python`
vs `python -m pip install` into a fresh venv) to show what the stage adds. Reported, no budget: the ratio is the
point (uv is expected to be several times faster, most of all warm).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import save  # noqa: E402

from tests.support.httpserver import LoopbackHTTPServer  # noqa: E402
from tests.support.venvs import TEST_WHEELS  # noqa: E402

ROUNDS = 3
WANTED = ["setuptools", "wheel", "pybind11", "ninja", "packaging"]


def serve_index(server: LoopbackHTTPServer) -> str:
    """Every wanted wheel of the suite's wheel folder on a PEP 503 index; its URL."""
    for project in WANTED:
        links = []
        for wheel in sorted(TEST_WHEELS.glob(f"{project}-*.whl")):
            server.serve(f"/files/{wheel.name}", wheel.read_bytes())
            links.append(f'<a href="/files/{wheel.name}">{wheel.name}</a>')
        if not links:
            raise SystemExit(f"{TEST_WHEELS} has no {project} wheel: `make test` fills it")
        server.serve(f"/simple/{project}/", f"<html><body>{''.join(links)}</body></html>".encode(),
                     **{"Content-Type": "text/html"})
    return server.url("/simple/")


def stage(cli: str, root: Path, installer: str, cache: Path, index: str, n: int) -> float:
    env = {**os.environ, "HOME": str(root / "home"), "XDG_CACHE_HOME": str(cache), "PIP_INDEX_URL": index,
           "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "NO_COLOR": "1"}
    for name in ("VIRTUAL_ENV", "UV_CACHE_DIR", "FLAGTREE_CPU_INSTALLER", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        env.pop(name, None)
    argv = [cli, "--installer", installer, "-w", str(root / f"ws-{installer}-{n}"), "--set",
            f"python.build=[{', '.join(WANTED)}]", "--set", "python.runtime=[]", "--set", "python.constraints=[]",
            "python", "--skip-runtime"]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def by_hand(root: Path, installer: str, cache: Path, index: str, n: int) -> float:
    venv = root / f"hand-{installer}-{n}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PIP_CONFIG_FILE": os.devnull,
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("UV_CACHE_DIR", None)
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    argv = ([uv, "pip", "install", "--python", str(python), "--index-url", index, *WANTED] if installer == "uv"
            else [str(python), "-m", "pip", "install", "--index-url", index, *WANTED])
    start = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> int:
    cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
    if not (Path(sys.executable).parent / "uv").exists() and not shutil.which("uv"):
        print("skipped: no uv (the test extra installs it)")
        return 0
    root = Path(tempfile.mkdtemp(prefix="bench-python-"))
    server = LoopbackHTTPServer()
    try:
        index = serve_index(server)
        times: dict[str, list[float]] = {}
        for n in range(ROUNDS):
            for installer in ("pip", "uv"):
                cache = root / f"cache-{installer}-{n}"  # cold: empty; the warm run after it reuses it
                times.setdefault(f"stage {installer} cold", []).append(stage(cli, root, installer, cache, index, 2 * n))
                times.setdefault(f"stage {installer} warm", []).append(
                    stage(cli, root, installer, cache, index, 2 * n + 1))
                hand = root / f"hand-cache-{installer}-{n}"
                times.setdefault(f"by hand {installer} cold", []).append(by_hand(root, installer, hand, index, 2 * n))
                times.setdefault(f"by hand {installer} warm", []).append(
                    by_hand(root, installer, hand, index, 2 * n + 1))
        medians = {name: statistics.median(samples) for name, samples in times.items()}
        for name, median in medians.items():
            print(f"{name:24} median {median:6.2f} s  ({', '.join(f'{s:.2f}' for s in times[name])})")
        ratios = {f"uv/pip {kind}": medians[f"{kind.split()[0]} uv {kind.split()[1]}"] /
                  medians[f"{kind.split()[0]} pip {kind.split()[1]}"]
                  for kind in ("stage cold", "stage warm")}
        ratios.update({f"uv/pip by hand {w}": medians[f"by hand uv {w}"] / medians[f"by hand pip {w}"]
                       for w in ("cold", "warm")})
        for name, ratio in ratios.items():
            print(f"{name:24} {ratio:.2f}x")
        saved = save('python', {'rounds': ROUNDS, 'wanted': WANTED, 'medians_s': medians, 'ratios': ratios})
        print(f"results: {saved}")
        return 0
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
