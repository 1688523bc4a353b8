"""fetch vs `curl -o` + `tar -xzf`, on an incompressible tarball served from 127.0.0.1.

Budgets (issue 4): download throughput >= 0.9x curl, extraction time <= 1.3x tar, peak
RSS of a whole `flagtree-cpu fetch` <= 150 MB. The download and extraction phases of the
tool are timed in-process (the same Downloader and unpack the CLI uses); the whole
command is timed too, under /usr/bin/time for its peak RSS. Median of RUNS each.

Since the hardening issue (bounded decompression, limits, a symlink check over the whole
tree) the per-entry cost is measured too: SMALL_FILES empty files, `tar -xzf` vs the tool,
on a tmpfs when one is at hand (/dev/shm) so the file system's cost does not hide the
extractor's. Budget: <= 4x tar (tar is C; before the issue the tool managed ~48 entries/s).
"""

from __future__ import annotations

import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import save  # noqa: E402

from flagtree_cpu_build.archive import limits_for  # noqa: E402
from flagtree_cpu_build.download import Downloader  # noqa: E402
from flagtree_cpu_build.extract import unpack  # noqa: E402
from flagtree_cpu_build.ui import UI  # noqa: E402

SIZE_MB = int(os.environ.get("BENCH_TARBALL_MB", "220"))
SMALL_FILES = int(os.environ.get("BENCH_SMALL_FILES", "20000"))
RUNS = 5
TOP = "llvm-a66376b0-ubuntu-arm64"


def make_tarball(path: Path) -> None:
    """SIZE_MB of random bytes: 40 large files (libraries) and 2000 small ones (headers)."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        big = (SIZE_MB * 1024 * 1024 - 2000 * 4096) // 40
        for i in range(40):
            data = os.urandom(big)
            info = tarfile.TarInfo(f"{TOP}/lib/libLLVM{i}.a")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for i in range(2000):
            data = os.urandom(4096)
            info = tarfile.TarInfo(f"{TOP}/include/llvm/part{i % 50}/header{i}.h")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


class ServerProcess:
    """The file server in its own process: in the benchmark's process it would share the GIL with
    the in-process download, a handicap curl (a separate process) does not have."""

    SCRIPT = (
        "import sys, time\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.support.httpserver import Faults, LoopbackHTTPServer\n"
        "server = LoopbackHTTPServer()\n"
        "from pathlib import Path\n"
        "rate = int(sys.argv[4]) or None\n"
        "print(server.serve(sys.argv[3], Path(sys.argv[2]).read_bytes(), Faults(rate=rate)), flush=True)\n"
        "time.sleep(3600)\n"
    )

    def __init__(self, tarball: Path, path: str, rate: int = 0):
        """``rate``: bytes per second the server sends at (0: as fast as loopback goes)."""
        self.process = subprocess.Popen([sys.executable, "-c", self.SCRIPT, str(HERE.parent), str(tarball), path,
                                         str(rate)], stdout=subprocess.PIPE, text=True)
        self.url = self.process.stdout.readline().strip()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def make_small_files(path: Path) -> None:
    """SMALL_FILES empty files in 100 folders: the per-entry cost, with nearly nothing to decompress."""
    with tarfile.open(path, "w:gz") as tar:
        for i in range(SMALL_FILES):
            info = tarfile.TarInfo(f"{TOP}/include/d{i % 100}/f{i}.h")
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(b""))


def small_files_ratio(quiet: UI) -> dict[str, float]:
    shm = Path("/dev/shm")
    where = Path(tempfile.mkdtemp(prefix="bench-entries-", dir=shm if shm.is_dir() else None))
    try:
        tarball = where / "small.tar.gz"
        make_small_files(tarball)

        def tar_x() -> None:
            out = where / "tar-out"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            subprocess.run(["tar", "-xzf", str(tarball), "-C", str(out)], check=True)

        def tool_unpack() -> None:
            out = where / "tool-out"
            shutil.rmtree(out, ignore_errors=True)
            unpack(tarball, out / TOP, strip=1, ui=quiet, label="llvm", limits=limits_for("llvm", None, None))

        tar_s, tool_s = interleaved(tar_x, tool_unpack, runs=3)
        return {"small_files": SMALL_FILES, "small_tar_s": tar_s, "small_tool_s": tool_s,
                "small_entries_per_s": SMALL_FILES / tool_s, "small_files_ratio": tool_s / tar_s,
                "small_on_tmpfs": float(shm.is_dir())}
    finally:
        shutil.rmtree(where, ignore_errors=True)


def interleaved(manual, tool, runs: int = RUNS) -> tuple[float, float]:
    """Median seconds of each, alternating runs so caches and a warming server favour neither."""
    samples: tuple[list[float], list[float]] = ([], [])
    manual()  # warm-up: page cache, server, first-run effects
    for _ in range(runs):
        for fn, out in ((manual, samples[0]), (tool, samples[1])):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return statistics.median(samples[0]), statistics.median(samples[1])


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    tarball = root / f"{TOP}.tar.gz"
    make_tarball(tarball)
    size = tarball.stat().st_size
    server = ServerProcess(tarball, f"/llvm-builds/{TOP}.tar.gz")
    url = server.url
    try:
        quiet = UI(quiet=True)

        def curl() -> None:
            subprocess.run(["curl", "-sS", "-o", str(root / "curl.tar.gz"), url], check=True)

        def tool_download() -> None:
            part = root / "tool.part"
            part.unlink(missing_ok=True)
            Downloader(quiet).fetch([url], lambda _url: part, label="llvm")

        def tar_x() -> None:
            out = root / "tar-out"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            subprocess.run(["tar", "-xzf", str(tarball), "-C", str(out)], check=True)

        def tool_unpack() -> None:
            dest = root / "tool-out" / TOP
            shutil.rmtree(dest.parent, ignore_errors=True)
            dest.parent.mkdir()
            unpack(tarball, dest, strip=1, ui=quiet, label="llvm", limits=limits_for("llvm", None, None))

        curl_s, tool_dl_s = interleaved(curl, tool_download)
        tar_s, tool_x_s = interleaved(tar_x, tool_unpack)
        small = small_files_ratio(quiet)

        cli = shutil.which("flagtree-cpu") or str(Path(sys.executable).parent / "flagtree-cpu")
        whole, rss = [], []
        for i in range(RUNS):
            home = root / f"home{i}"
            home.mkdir()
            env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "NO_COLOR": "1"}
            env.pop("TRITON_HOME", None)
            start = time.perf_counter()
            out = subprocess.run(["/usr/bin/time", "-f", "%M", cli, "-q", "-w", str(root / f"ws{i}"), "--set",
                                  f"artifacts.llvm.url={url}", "fetch"], env=env, capture_output=True, text=True)
            whole.append(time.perf_counter() - start)
            if out.returncode != 0:
                print(out.stderr)
                return 1
            rss.append(int(out.stderr.strip().splitlines()[-1]) / 1024)
        report = {
            "tarball_mb": round(size / 2**20, 1),
            "curl_s": curl_s, "tool_download_s": tool_dl_s,
            "curl_mb_s": size / 2**20 / curl_s, "tool_mb_s": size / 2**20 / tool_dl_s,
            "download_throughput_ratio": curl_s / tool_dl_s,
            "tar_xzf_s": tar_s, "tool_unpack_s": tool_x_s, "extraction_time_ratio": tool_x_s / tar_s,
            "curl_plus_tar_s": curl_s + tar_s, "flagtree_cpu_fetch_s": statistics.median(whole),
            "peak_rss_mb": max(rss), **small,
        }
        print(f"tarball: {report['tarball_mb']} MB of random data, served from 127.0.0.1")
        print(f"download:   curl {curl_s:.2f} s ({report['curl_mb_s']:.0f} MB/s) | flagtree-cpu {tool_dl_s:.2f} s "
              f"({report['tool_mb_s']:.0f} MB/s) -> throughput {report['download_throughput_ratio']:.2f}x curl "
              "(budget >= 0.9)")
        print(f"extraction: tar -xzf {tar_s:.2f} s | flagtree-cpu {tool_x_s:.2f} s -> "
              f"{report['extraction_time_ratio']:.2f}x tar (budget <= 1.3)")
        print(f"entries:    {SMALL_FILES} empty files{' on a tmpfs' if small['small_on_tmpfs'] else ''}: tar -xzf "
              f"{small['small_tar_s']:.2f} s | flagtree-cpu {small['small_tool_s']:.2f} s "
              f"({small['small_entries_per_s']:.0f} entries/s) -> {small['small_files_ratio']:.2f}x tar (budget <= 4)")
        whole_s = report["flagtree_cpu_fetch_s"]
        print(f"whole:      curl + tar {curl_s + tar_s:.2f} s | flagtree-cpu fetch {whole_s:.2f} s "
              f"(download + sha256 + safe unpack + publish), peak RSS {report['peak_rss_mb']:.0f} MB (budget <= 150)")
        print(f"results: {save('fetch', report)}")
        failed = [name for name, ok in (("throughput", report["download_throughput_ratio"] >= 0.9),
                                        ("extraction", report["extraction_time_ratio"] <= 1.3),
                                        ("rss", report["peak_rss_mb"] <= 150),
                                        ("entries", report["small_files_ratio"] <= 4)) if not ok]
        if failed:
            print(f"OVER BUDGET: {', '.join(failed)}")
            return 1
        return 0
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
