"""`setup --dry-run` names the size of the download whenever it is knowable: from a partial download's
record, the lock, the recipe's `size`, or (online only) the server — a HEAD request, or a one-byte
range request when HEAD leaves the length out."""

from __future__ import annotations

import signal
from pathlib import Path

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.fetching import PATH_SET, URL_PATH, cache_root, fetch_process, wait_for
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.tarballs import llvm_tarball


def dry_run(tmp_path: Path, url: str, *args: str, sets: tuple[str, ...] = ()) -> Result:
    argv = ["-w", str(tmp_path / "ws"), "--set", f"artifacts.llvm.url={url}", "--set", PATH_SET]
    for assignment in sets:
        argv += ["--set", assignment]
    return CliRunner().invoke(app, [*argv, "setup", "--dry-run", "--ignore-host", "--skip-build", *args])


def test_a_dry_run_asks_for_the_size_when_head_leaves_out_the_length(tmp_path: Path,
                                                                     http_server: LoopbackHTTPServer) -> None:
    tarball = llvm_tarball()
    url = http_server.serve(URL_PATH, tarball.data, Faults(head_without_length=True))
    result = dry_run(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    size = f"{len(tarball.data) / 1000:.0f} KB"
    assert f"download llvm {size}" in result.stderr and f"download: {size}" in result.stderr
    assert [(r.method, r.range) for r in http_server.requests] == [("HEAD", None), ("GET", "bytes=0-0")]


def test_a_dry_run_offline_takes_the_size_from_the_recipe(tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    url = http_server.url(URL_PATH)
    result = dry_run(tmp_path, url, "--offline", sets=("artifacts.llvm.size=812000000",))
    # setup --offline stops here: nothing is cached, and first of all nothing is cloned (exit 3, the sources)
    assert result.exit_code == 3, result.stderr
    assert "stop: --offline forbids it: download llvm 812 MB" in " ".join(result.stderr.split())
    assert http_server.requests == []


def test_a_dry_run_after_an_interrupted_download_says_what_is_left(tmp_path: Path,
                                                                  http_server: LoopbackHTTPServer) -> None:
    tarball = llvm_tarball()
    url = http_server.serve(URL_PATH, tarball.data, Faults(hold_after=300_000))  # the rest waits: Ctrl-C lands
    process = fetch_process(tmp_path, url)
    [part] = wait_for(lambda: [p for p in cache_root().glob("partial/*.part") if p.stat().st_size > 100_000], 20,
                      "a partial download")
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)
    have = part.stat().st_size
    http_server.close()  # offline: what the server said is recorded with the partial download
    result = dry_run(tmp_path, url, "--offline")
    # setup --offline stops here: the rest needs the network, and first of all nothing is cloned (exit 3)
    assert result.exit_code == 3, result.stderr
    total = len(tarball.data)
    said = " ".join(result.stderr.split())
    assert f"resume downloading llvm at {have / 1000:.0f} KB of {total / 1000:.0f} KB" in said
    assert "--offline forbids it" in said


def test_a_dry_run_asks_the_mirror_for_the_size_when_the_original_is_unreachable(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    """On a network that reaches only a mirror, the plan's size comes from where the download would."""
    tarball = llvm_tarball()
    mirror = http_server.serve(f"/mirror{URL_PATH}", tarball.data)
    original = "http://127.0.0.1:9" + URL_PATH  # the discard port: nothing answers
    result = dry_run(tmp_path, original, "--mirror", f"http://127.0.0.1:9/={mirror.removesuffix(URL_PATH)}/")
    assert result.exit_code == 0, result.stderr
    assert f"download llvm {len(tarball.data) / 1000:.0f} KB" in result.stderr
