"""The shared test harness behaves like the real things it stands in for."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
import urllib3

from tests.support.gitdaemon import GitDaemon
from tests.support.gitworld import GITHUB_URLS, GitWorld, git
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.netguard import NetworkAccessInTest
from tests.support.tcpproxy import ThrottledProxy

# --- network guard for integration tests -------------------------------------------------------


def test_integration_tests_may_use_loopback_only(http_server: LoopbackHTTPServer) -> None:
    http_server.serve("/ok", b"fine")
    assert requests.get(http_server.url("/ok"), timeout=5).content == b"fine"
    with pytest.raises(NetworkAccessInTest):
        socket.create_connection(("10.255.255.1", 80), timeout=0.1)
    with pytest.raises(NetworkAccessInTest):
        socket.getaddrinfo("pypi.org", 443)


def test_subprocesses_see_a_dead_proxy() -> None:
    assert os.environ["https_proxy"] == "http://127.0.0.1:9"
    assert "127.0.0.1" in os.environ["NO_PROXY"]


# --- git world ------------------------------------------------------------------------------------


def test_flagtree_fixture_history(git_world: GitWorld, tmp_path: Path) -> None:
    ft = git_world["flagtree"]
    assert len(set(ft.commits.values())) == 3
    clone = git_world.clone("flagtree", tmp_path / "FlagTree", commit=ft.commits["cpu-backend"])
    assert (clone / "cmake/llvm-hash.txt").read_text().strip() == "a66376b0dc3b2ea8a84fda26faca287980986f78"
    assert (clone / "third_party/cpu/backend/compiler.py").is_file()
    include = clone / "python/triton/_C/include"
    assert include.is_symlink() and os.readlink(include) == "../../../include/"
    for folder in ("include/triton/Dialect", "lib/Dialect", "third_party/cpu/language/cpu",
                   "python/triton/language/extra"):
        assert (clone / folder).is_dir(), folder
    branch_tip = git("rev-parse", "origin/triton_v3.3.x", cwd=clone, env=git_world.env)
    assert branch_tip == ft.commits["tip"]
    assert git("rev-parse", "origin/main", cwd=clone, env=git_world.env) == ft.commits["pre-cpu"]


def test_flagtree_cpu_fixture_has_every_link_target_and_a_real_sleef_submodule(
        git_world: GitWorld, tmp_path: Path) -> None:
    clone = git_world.clone("flagtree-cpu", tmp_path / "triton-cpu", recursive=True)
    for target in ("include/triton/Dialect/TritonCPU", "lib/Dialect/TritonCPU", "third_party/cpu/CMakeLists.txt",
                   "third_party/cpu/include", "third_party/cpu/lib", "third_party/cpu/runtime",
                   "third_party/cpu/triton_cpu.cc", "third_party/cpu/language/cpu/neon.py",
                   "third_party/cpu/language/cpu/runtime.py", "third_party/cpu/language/cpu/tle_ops.py"):
        assert (clone / target).exists(), target
    assert "add_neon_sdot_to_llvmir" in (clone / "third_party/cpu/triton_cpu.cc").read_text()
    sleef_head = git("rev-parse", "HEAD", cwd=clone / "third_party/sleef", env=git_world.env)
    assert sleef_head == git_world["sleef"].commits["first"] != git_world["sleef"].commits["second"]
    gitmodules = (clone / ".gitmodules").read_text()
    assert GITHUB_URLS["sleef"] in gitmodules


def test_flagtree_cpu_37_port_drops_the_pass_and_sleef(git_world: GitWorld, tmp_path: Path) -> None:
    clone = git_world.clone("flagtree-cpu", tmp_path / "port", commit=git_world["flagtree-cpu"].commits["v37"])
    assert "add_neon_sdot_to_llvmir" not in (clone / "third_party/cpu/triton_cpu.cc").read_text()
    assert not (clone / ".gitmodules").exists()


def test_insteadof_redirects_real_github_urls(github_redirect: GitWorld, tmp_path: Path) -> None:
    dest = tmp_path / "FlagTree"
    # the environment of this test: GIT_CONFIG_GLOBAL points at the world's insteadOf rules
    subprocess.run(["git", "clone", "--quiet", GITHUB_URLS["flagtree"], str(dest)], check=True)
    assert (dest / "cmake/llvm-hash.txt").is_file()


def test_git_daemon_serves_the_world(git_world: GitWorld, tmp_path: Path) -> None:
    daemon = GitDaemon(git_world.root / "bare", env=git_world.env)
    try:
        dest = tmp_path / "via-daemon"
        git("clone", "--quiet", daemon.url("flagos-ai/FlagTree.git"), dest, env=git_world.env)
        assert (dest / "python/setup.py").is_file()
    finally:
        daemon.close()


# --- the fixture build ----------------------------------------------------------------------------


def run_fixture_setup(checkout: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    record = tmp_path / "record.jsonl"
    full_env = {**os.environ, "FIXTURE_BUILD_RECORD": str(record), **env}
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env['PATH']}"  # ninja from the venv
    return subprocess.run([sys.executable, "setup.py", *args], cwd=checkout / "python", env=full_env,
                          capture_output=True, text=True, check=False)


def test_fixture_build_records_what_it_received(git_world: GitWorld, tmp_path: Path) -> None:
    clone = git_world.clone("flagtree", tmp_path / "FlagTree", commit=git_world["flagtree"].commits["cpu-backend"])
    result = run_fixture_setup(clone, tmp_path, "build", FIXTURE_BUILD_STEPS="3", MARKER="seen")
    assert result.returncode == 0, result.stderr
    assert "[3/3] Building CXX object" in result.stdout
    [entry] = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert entry["argv"][1:] == ["build"]
    assert entry["cwd"] == str(clone / "python")
    assert entry["env"]["MARKER"] == "seen"


def test_fixture_build_fails_with_the_given_log(git_world: GitWorld, tmp_path: Path) -> None:
    clone = git_world.clone("flagtree", tmp_path / "FlagTree")
    log = tmp_path / "failure.log"
    log.write_text("kernel.s: Error: junk at end of line, first unrecognized character is '\"'\n")
    result = run_fixture_setup(clone, tmp_path, "build", FIXTURE_BUILD_FAIL_LOG=str(log))
    assert result.returncode == 1
    assert "junk at end of line" in result.stdout


# --- HTTP server -----------------------------------------------------------------------------------

DATA = bytes(range(256)) * 64  # 16 KiB


def test_range_requests_get_206(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/f", DATA)
    response = requests.get(url, headers={"Range": "bytes=1000-"}, timeout=5)
    assert response.status_code == 206
    assert response.headers["Content-Range"] == f"bytes 1000-{len(DATA) - 1}/{len(DATA)}"
    assert response.content == DATA[1000:]
    assert requests.get(url, headers={"Range": f"bytes={len(DATA)}-"}, timeout=5).status_code == 416


def test_ignored_range_returns_the_whole_file(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/f", DATA, Faults(ignore_range=True))
    response = requests.get(url, headers={"Range": "bytes=1000-"}, timeout=5)
    assert (response.status_code, response.content) == (200, DATA)


def test_status_faults_count_down(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/f", DATA, Faults(status=503, status_times=2))
    assert [requests.get(url, timeout=5).status_code for _ in range(3)] == [503, 503, 200]
    assert requests.get(http_server.url("/missing"), timeout=5).status_code == 404
    assert [r.status for r in http_server.requests_for("/f")] == [503, 503, 200]


def test_dropped_connection_truncates_the_body(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/f", DATA, Faults(drop_after=5000, drop_times=1))
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(url, timeout=5).raise_for_status()
    assert requests.get(url, timeout=5).content == DATA  # the fault happened once


def test_throttled_rate(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/f", DATA, Faults(rate=32 * 1024))  # 16 KiB at 32 KiB/s ~ 0.5 s
    start = time.monotonic()
    assert requests.get(url, timeout=5).content == DATA
    assert time.monotonic() - start >= 0.4


def test_a_gate_holds_the_rest_of_the_body_until_released(http_server: LoopbackHTTPServer) -> None:
    faults = Faults(hold_after=5000)
    url = http_server.serve("/f", DATA, faults)
    with requests.get(url, stream=True, timeout=30) as response:
        first = response.raw.read(5000)
        assert faults.holding.wait(30) and first == DATA[:5000]
        assert http_server.sent["/f"] == 5000  # not a byte more while the gate is shut
        faults.released.set()
        assert first + response.raw.read() == DATA
    assert requests.get(url, timeout=5).content == DATA  # held once (hold_times=1), then straight through


def test_a_held_answer_ends_when_the_server_closes() -> None:
    server = LoopbackHTTPServer()
    faults = Faults(hold_after=100)
    url = server.serve("/f", DATA, faults)
    with requests.get(url, stream=True, timeout=30) as response:
        assert faults.holding.wait(30)
        server.close()  # never released: the server's close ends the answer instead of leaving it held
        with pytest.raises(urllib3.exceptions.ProtocolError):  # cut short of its Content-Length (not timed out)
            response.raw.read(decode_content=False)
    assert server.sent["/f"] == 100


def test_a_closed_proxy_leaves_no_thread_that_could_take_the_next_ones_connections(
        http_server: LoopbackHTTPServer) -> None:
    """A closed proxy's accept thread once stayed blocked in accept() on a descriptor the next test's proxy reused,
    took that proxy's connections and reset them ("Connection reset by peer" in a clone, one run in three)."""
    url = http_server.serve("/f", DATA)
    before = set(threading.enumerate())
    proxy = ThrottledProxy(http_server.port)
    relayed = url.replace(f":{http_server.port}/", f":{proxy.port}/")
    with requests.Session() as session:
        assert session.get(relayed, timeout=10).content == DATA
        proxy.close()  # with the connection still open: its relays end too
    left = set(threading.enumerate()) - before  # the proxy's, and the server's for the relayed request
    for thread in left:
        thread.join(timeout=10)
    assert [t.name for t in left if t.is_alive()] == []


def test_wrong_content_range_is_served_when_asked(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/f", DATA, Faults(wrong_content_range=True))
    response = requests.get(url, headers={"Range": "bytes=100-"}, timeout=5)
    assert response.headers["Content-Range"].startswith("bytes 101-")


def test_head_has_length_and_no_body(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/f", DATA)
    response = requests.head(url, timeout=5)
    assert response.headers["Content-Length"] == str(len(DATA))
    assert response.content == b""
