"""`flagtree-cpu fetch` against a real HTTP server on 127.0.0.1, with injected faults."""

from __future__ import annotations

import json
import os
import signal
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.envelope import result_of
from tests.support.fetching import (
    URL_PATH,
    cache_root,
    dest,
    fetch,
    fetch_process,
    leftovers,
    lock_of,
    partial_folders,
    triton_llvm,
    unpacked_files,
    wait_for,
)
from tests.support.fixes import without_context
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.tarballs import TOP, Tarball, hostile_tarball, llvm_tarball


@pytest.fixture
def tarball() -> Tarball:
    return llvm_tarball()


# --- the happy path ----------------------------------------------------------------------------


def test_fresh_fetch_publishes_where_triton_looks(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                 tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    tree = dest()
    assert (tree / "version.txt").read_text() == url  # exactly what setup.py compares with ==
    stamp = json.loads((tree / ".flagtree-cpu-artifact.json").read_text())
    assert stamp["sha256"] == tarball.sha256 and stamp["url"] == url
    assert os.access(tree / "bin/clang", os.X_OK)  # exec bit kept
    assert os.readlink(tree / "lib/libfoo.so") == "libfoo.so.1"  # internal symlink kept
    assert os.stat(tree / "lib/libfoo-copy.so").st_ino == os.stat(tree / "lib/libfoo.so.1").st_ino
    assert (tree / "include/llvm/Config/llvm-config.h").is_file()
    assert "trusting it on first use" in result.stderr  # the recipe has no sha256
    assert lock_of(tmp_path)["artifacts"]["llvm"] == {"url": url, "sha256": tarball.sha256,
                                                      "size": len(tarball.data), "served_from": url}
    assert (cache_root() / "CACHEDIR.TAG").is_file()
    assert (cache_root() / "blobs" / tarball.sha256).is_file()
    assert leftovers() == []


def test_rerun_when_published_does_no_network(tmp_path: Path, http_server: LoopbackHTTPServer,
                                              tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    assert fetch(tmp_path, url).exit_code == 0
    requests_before = len(http_server.requests)
    http_server.close()
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    assert len(http_server.requests) == requests_before
    assert " ok " in result.stderr


def test_a_second_workspace_reuses_the_download_cache(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                      tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    assert fetch(tmp_path, url).exit_code == 0
    other_home_llvm = tmp_path / "other-triton-home"
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws2"), "--set", f"artifacts.llvm.url={url}", "--set",
                                      f"artifacts.llvm.path={other_home_llvm}/{TOP}", "fetch"])
    assert result.exit_code == 0, result.stderr
    assert len(http_server.requests_for(URL_PATH)) == 1
    assert (other_home_llvm / TOP / "bin/clang").is_file()


# --- resume, retries, integrity ---------------------------------------------------------------------


def test_dropped_connection_is_resumed_with_range(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                  tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data, Faults(drop_after=200_000, drop_times=1))
    result = fetch(tmp_path, url, sets=(f"artifacts.llvm.sha256={tarball.sha256}",))
    assert result.exit_code == 0, result.stderr
    gets = [r for r in http_server.requests_for(URL_PATH) if r.method == "GET"]
    assert len(gets) == 2
    assert gets[0].range is None and gets[1].range == "bytes=200000-"
    assert gets[1].status == 206
    assert json.loads((dest() / ".flagtree-cpu-artifact.json").read_text())["sha256"] == tarball.sha256


def test_server_errors_are_retried(tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data, Faults(status=503, status_times=2))
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    assert [r.status for r in http_server.requests_for(URL_PATH)] == [503, 503, 200]


def test_not_found_is_not_retried(tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    url = http_server.url(URL_PATH)  # nothing served there
    result = fetch(tmp_path, url)
    assert result.exit_code == 4
    assert len(http_server.requests_for(URL_PATH)) == 1
    assert f"{url}: HTTP 404 (not found); not retried" in result.stderr
    assert "--mirror" in result.stderr and "--from" in result.stderr
    assert not dest().exists()


def test_wrong_bytes_are_rejected_and_nothing_is_kept(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                      tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    expected = "0" * 64
    result = fetch(tmp_path, url, sets=(f"artifacts.llvm.sha256={expected}",))
    assert result.exit_code == 4
    assert f"expected {expected}, got {tarball.sha256} ({len(tarball.data)} bytes)" in result.stderr
    assert url in result.stderr
    assert leftovers() == [] and not list(cache_root().glob("blobs/*"))
    assert not dest().exists() and partial_folders() == []  # what was unpacked while it came is gone too


def test_a_server_that_ignores_range_is_read_from_the_start(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                            tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data, Faults(drop_after=150_000, drop_times=1, ignore_range=True))
    result = fetch(tmp_path, url, sets=(f"artifacts.llvm.sha256={tarball.sha256}",))
    assert result.exit_code == 0, result.stderr
    gets = http_server.requests_for(URL_PATH)
    assert [g.range for g in gets] == [None, "bytes=150000-"] and [g.status for g in gets] == [200, 200]


def test_a_wrong_content_range_restarts_from_zero(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                  tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data,
                            Faults(drop_after=150_000, drop_times=1, wrong_content_range=True))
    result = fetch(tmp_path, url, sets=(f"artifacts.llvm.sha256={tarball.sha256}",))
    assert result.exit_code == 0, result.stderr
    assert [g.range for g in http_server.requests_for(URL_PATH)] == [None, "bytes=150000-", None]
    # the bytes unpacked before the restart were void: the tree comes from the verified file
    assert (dest() / "bin" / "clang").read_bytes() == tarball.member("bin/clang") and partial_folders() == []


def test_require_hashes_refuses_before_any_request(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                   tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    result = fetch(tmp_path, url, "--require-hashes")
    assert result.exit_code == 4
    assert "--require-hashes: artifact llvm has no sha256" in result.stderr
    assert http_server.requests == []


def test_the_lock_verifies_later_downloads(tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    assert fetch(tmp_path, url).exit_code == 0  # trust on first use: the digest goes into the lock
    http_server.serve(URL_PATH, llvm_tarball(seed=2).data)  # upstream silently replaced the file
    for leftover in (dest(), cache_root()):
        import shutil

        shutil.rmtree(leftover)
    result = fetch(tmp_path, url, "--require-hashes")  # the lock's digest counts as known
    assert result.exit_code == 4
    assert "sha256 mismatch" in result.stderr and tarball.sha256 in result.stderr


# --- interrupts and concurrency (real processes) ---------------------------------------------------


def test_ctrl_c_exits_130_and_the_next_run_resumes(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                   tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data, Faults(hold_after=200_000))  # the rest waits: Ctrl-C lands
    process = fetch_process(tmp_path, url)
    try:
        [part] = wait_for(lambda: [p for p in cache_root().glob("partial/*.part") if p.stat().st_size > 100_000], 60,
                          "the first 100 KB of the download")
    except AssertionError:
        process.kill()
        raise
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=20)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    kept = part.stat().st_size
    assert kept > 100_000 and not dest().exists() and partial_folders() == []
    result = fetch(tmp_path, url, sets=(f"artifacts.llvm.sha256={tarball.sha256}",))
    assert result.exit_code == 0, result.stderr
    resumed = http_server.requests_for(URL_PATH)[-1]
    assert resumed.range == f"bytes={kept}-" and resumed.status == 206
    assert f"resuming llvm at {kept / 1000:.0f} KB of {len(tarball.data) / 1000:.0f} KB" in result.stderr


def test_the_tarball_is_unpacked_while_it_downloads(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                   tarball: Tarball) -> None:
    faults = Faults(hold_after=len(tarball.data) // 2)  # the second half waits until something is unpacked
    url = http_server.serve(URL_PATH, tarball.data, faults)
    process = fetch_process(tmp_path, url, "--require-hashes", "--set", f"artifacts.llvm.sha256={tarball.sha256}")
    try:
        wait_for(unpacked_files, 60, "a file unpacked before the last byte arrived")
        assert http_server.sent[URL_PATH] < len(tarball.data)  # the gate is still shut
    finally:
        faults.released.set()
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert (dest() / "bin" / "clang").read_bytes() == tarball.member("bin/clang")
    assert partial_folders() == []


def test_two_workspaces_download_once_and_both_succeed(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                       tarball: Tarball) -> None:
    # two workspaces of one user share the download cache and ~/.triton/llvm (one workspace is
    # held by one run at a time: a second run there exits 8, see test_setup)
    url = http_server.serve(URL_PATH, tarball.data, Faults(rate=1024 * 1024))
    first, second = fetch_process(tmp_path, url, workspace="ws1"), fetch_process(tmp_path, url, workspace="ws2")
    results = [p.communicate(timeout=60) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, results
    assert len([r for r in http_server.requests_for(URL_PATH) if r.method == "GET"]) == 1
    assert "waiting for another flagtree-cpu process" in results[0][1] + results[1][1]
    assert json.loads((dest() / ".flagtree-cpu-artifact.json").read_text())["sha256"] == tarball.sha256


# --- hostile tarballs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, member", [
    ("traversal", f"{TOP}/../../escaped.txt"),
    ("absolute", "/tmp/flagtree-cpu-absolute-escape.txt"),
    ("symlink-escape", f"{TOP}/out"),
    ("symlink-chain", f"{TOP}/here/up"),
    ("hardlink-escape", f"{TOP}/passwd"),
    ("device", f"{TOP}/dev-null"),
    ("symlink-compose", f"{TOP}/a"),  # links each inside when made; their composition leads out
])
def test_hostile_tarballs_are_refused_and_nothing_is_created_outside(
        tmp_path: Path, http_server: LoopbackHTTPServer, kind: str, member: str) -> None:
    hostile = hostile_tarball(kind)
    url = http_server.serve(URL_PATH, hostile.data)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = fetch(tmp_path, url)
    assert result.exit_code == 4, result.stderr
    assert f"member {member!r}" in result.stderr and "refusing to unpack" in result.stderr
    assert not Path("/tmp/flagtree-cpu-absolute-escape.txt").exists()
    assert not (triton_llvm() / "escaped.txt").exists() and not (triton_llvm().parent / "escaped.txt").exists()
    assert not (triton_llvm() / "outside").exists()
    assert not list(triton_llvm().parent.rglob("pwned.txt"))
    assert not dest().exists() and leftovers() == []
    assert {p.name for p in tmp_path.iterdir()} <= {*before, "ws"}
    assert not (tmp_path / "ws/.flagtree-cpu/lock.yaml").exists()  # a refused tarball is never trusted


# --- mirrors, offline, import -----------------------------------------------------------------------------


def test_mirrors_are_tried_in_order_then_the_original(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                      tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)  # only the original has it
    prefix = http_server.base_url + "/public/"
    result = fetch(tmp_path, url, "--mirror", f"{prefix}={http_server.base_url}/mirror-a/",
                   "--mirror", f"{prefix}={http_server.base_url}/mirror-b/")
    assert result.exit_code == 0, result.stderr
    asked = [r.path for r in http_server.requests]
    assert asked == [f"/mirror-a/llvm-builds/{TOP}.tar.gz", f"/mirror-b/llvm-builds/{TOP}.tar.gz", URL_PATH]
    assert lock_of(tmp_path)["artifacts"]["llvm"]["served_from"] == url


def test_a_folder_mirror_serves_the_bytes_and_version_txt_keeps_the_real_url(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = tmp_path / "usb-stick" / "llvm-builds"
    mirror.mkdir(parents=True)
    (mirror / f"{TOP}.tar.gz").write_bytes(tarball.data)
    url = http_server.url(URL_PATH)  # the original would 404
    monkeypatch.setenv("FLAGTREE_CPU_MIRRORS", f"{http_server.base_url}/public/={tmp_path / 'usb-stick'}/")
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    assert http_server.requests == []
    assert lock_of(tmp_path)["artifacts"]["llvm"]["served_from"] == f"{tmp_path / 'usb-stick'}/llvm-builds/{TOP}.tar.gz"
    assert (dest() / "version.txt").read_text() == url


def test_offline_lists_what_is_missing_and_how_to_get_it(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                         tarball: Tarball) -> None:
    url = http_server.url(URL_PATH)
    result = fetch(tmp_path, url, "--offline", sets=(f"artifacts.llvm.sha256={tarball.sha256}",))
    assert result.exit_code == 4
    assert f"llvm: {url} (sha256 {tarball.sha256})" in result.stderr
    assert "flagtree-cpu --recipe flagtree-cpu-arm64 fetch --cache-dir DIR" in without_context(result.stderr)
    assert "--from NAME=FILE" in result.stderr
    assert http_server.requests == []


def test_from_imports_a_downloaded_file_offline(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                tarball: Tarball) -> None:
    downloaded = tmp_path / "Downloads" / f"{TOP}.tar.gz"
    downloaded.parent.mkdir()
    downloaded.write_bytes(tarball.data)
    url = http_server.url(URL_PATH)
    result = fetch(tmp_path, url, "--offline", "--from", str(downloaded),
                   sets=(f"artifacts.llvm.sha256={tarball.sha256}",))
    assert result.exit_code == 0, result.stderr
    assert http_server.requests == []
    assert (dest() / "bin/clang").is_file() and downloaded.is_file()


def test_from_a_wrong_file_is_refused(tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    wrong = tmp_path / "wrong.tar.gz"
    wrong.write_bytes(llvm_tarball(seed=3).data)
    result = fetch(tmp_path, http_server.url(URL_PATH), "--from", f"llvm={wrong}",
                   sets=(f"artifacts.llvm.sha256={tarball.sha256}",))
    assert result.exit_code == 4
    assert "is not the expected file" in result.stderr and not dest().exists()


# --- trees we did not publish ------------------------------------------------------------------------------


def unpack_by_hand(tarball: Tarball) -> None:
    """What the install guide does: wget into ~/.triton/llvm and tar xzf there."""
    triton_llvm().mkdir(parents=True)
    saved = triton_llvm() / f"{TOP}.tar.gz"
    saved.write_bytes(tarball.data)
    with tarfile.open(saved) as tar:
        tar.extractall(triton_llvm(), filter="tar")


def test_a_hand_unpacked_tree_is_verified_by_listing_and_adopted(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                                 tarball: Tarball) -> None:
    unpack_by_hand(tarball)
    assert not (dest() / "version.txt").exists()
    clang_inode = os.stat(dest() / "bin/clang").st_ino
    url = http_server.url(URL_PATH)  # not served: nothing may be downloaded
    result = fetch(tmp_path, url, "--json")  # the stderr table wraps its detail column where the temp path is long
    assert result.exit_code == 0, result.stderr
    [action] = result_of(result.stdout)["actions"]
    assert (action["status"], action["detail"]) == ("updated", f"existing tree at {dest()} matches the tarball; "
                                                               "adopted")
    assert http_server.requests == []
    assert (dest() / "version.txt").read_text() == url  # now setup.py will not wipe ~/.triton/llvm
    assert os.stat(dest() / "bin/clang").st_ino == clang_inode  # not re-extracted


def test_a_hand_unpacked_tree_that_differs_is_left_alone(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                         tarball: Tarball) -> None:
    unpack_by_hand(tarball)
    (dest() / "bin/clang").write_bytes(b"patched by hand\n")
    result = fetch(tmp_path, http_server.url(URL_PATH))
    assert result.exit_code == 4
    assert "differs from the verified tarball; it is left alone" in result.stderr
    assert "bin/clang: size" in result.stderr
    assert (dest() / "bin/clang").read_bytes() == b"patched by hand\n"
    assert not (dest() / "version.txt").exists()


def test_a_foreign_tree_without_a_tarball_is_reported_not_downloaded_over(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    unpack_by_hand(tarball)
    (triton_llvm() / f"{TOP}.tar.gz").unlink()
    url = http_server.serve(URL_PATH, tarball.data)
    result = fetch(tmp_path, url)
    assert result.exit_code == 4
    assert "was not published by flagtree-cpu" in result.stderr and "--from llvm=FILE" in result.stderr
    assert http_server.requests == [] and (dest() / "bin/clang").is_file()


def test_nothing_else_under_triton_llvm_is_touched(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                   tarball: Tarball) -> None:
    other = triton_llvm() / "llvm-deadbeef-ubuntu-arm64"
    other.mkdir(parents=True)
    (other / "version.txt").write_text("someone else's")
    os.symlink(other, triton_llvm() / "llvm-ubuntu-arm64")  # setup.py's own stable link
    url = http_server.serve(URL_PATH, tarball.data)
    assert fetch(tmp_path, url).exit_code == 0
    assert (other / "version.txt").read_text() == "someone else's"
    assert os.readlink(triton_llvm() / "llvm-ubuntu-arm64") == str(other)
    assert sorted(p.name for p in triton_llvm().iterdir()) == sorted([other.name, "llvm-ubuntu-arm64", TOP])
