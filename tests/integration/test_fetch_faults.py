"""`flagtree-cpu fetch` under the faults of a fault campaign, each injected for real (the loopback server
serving wrong bytes, a mirror that keeps dropping, files and folders damaged in the cache), then judged by
the outcome and by what is left on disk: never exit 1, never a cache that stays broken once the cause is
gone, never the progress of a download thrown away."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from flagtree_cpu_build.artifact_cache import url_key
from flagtree_cpu_build.progress import ProgressTask
from tests.support.fetching import (
    URL_PATH,
    cache_is_empty,
    cache_root,
    dest,
    fetch,
    leftovers,
    lock_of,
    release_when,
    unpacked_files,
)
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.tarballs import TOP, Tarball, llvm_tarball

HTML = b"<!DOCTYPE html><html><body>Service temporarily unavailable</body></html>\n" * 40


@pytest.fixture
def tarball() -> Tarball:
    return llvm_tarball()


def gets(server: LoopbackHTTPServer, path: str = URL_PATH) -> int:
    return len([r for r in server.requests_for(path) if r.method == "GET"])


# --- 1. bytes that do not unpack never become the artifact's identity -------------------------------------


@pytest.mark.parametrize("fault, message", [
    ("truncated", "it ends early (the download is truncated)"),
    ("not-a-tarball", "it is not a gzip, xz, bzip2 or plain tarball (it starts with '<!DOCTYPE html>"),
])
def test_wrong_content_served_once_is_forgotten_and_the_rerun_downloads_again(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball, fault: str, message: str) -> None:
    # trust on first use (no sha256 anywhere), and a server that once serves other bytes with consistent headers
    faults = Faults(truncate_to=len(tarball.data) // 2, bad_times=1) if fault == "truncated" else \
        Faults(replace_with=HTML, bad_times=1)
    url = http_server.serve(URL_PATH, tarball.data, faults)
    result = fetch(tmp_path, url)
    assert result.exit_code == 4, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert "nothing of this download was kept: run the same command again" in result.stderr
    assert cache_is_empty(), list(cache_root().rglob("*"))  # no blob, no urls/ note, no .part
    assert not (tmp_path / "ws/.flagtree-cpu/lock.yaml").exists() and not dest().exists() and leftovers() == []

    again = fetch(tmp_path, url)  # the server is fixed (the fault served once)
    assert again.exit_code == 0, again.stderr
    assert gets(http_server) == 2  # the re-run asked the server again
    assert lock_of(tmp_path)["artifacts"]["llvm"]["sha256"] == tarball.sha256
    assert (dest() / "bin/clang").read_bytes() == tarball.member("bin/clang")


def test_a_cached_file_that_does_not_unpack_is_dropped_so_the_next_run_downloads(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    # what an older version left: a truncated download remembered as the URL's file (blob + urls/ note)
    url = http_server.serve(URL_PATH, tarball.data)
    bad = tarball.data[: len(tarball.data) // 2]
    import hashlib

    sha = hashlib.sha256(bad).hexdigest()
    for sub in ("blobs", "urls"):
        (cache_root() / sub).mkdir(parents=True, exist_ok=True)
    (cache_root() / "blobs" / sha).write_bytes(bad)
    (cache_root() / "urls" / url_key(url)).write_text(sha + "\n")
    result = fetch(tmp_path, url)
    assert result.exit_code == 4, result.stderr
    assert "removed from the download cache: run the same command again" in result.stderr
    assert gets(http_server) == 0 and cache_is_empty()
    again = fetch(tmp_path, url)
    assert again.exit_code == 0, again.stderr
    assert gets(http_server) == 1 and lock_of(tmp_path)["artifacts"]["llvm"]["sha256"] == tarball.sha256


def test_an_imported_file_that_is_not_a_tarball_is_not_remembered(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                                    tarball: Tarball) -> None:
    wrong = tmp_path / "Downloads" / f"{TOP}.tar.gz"
    wrong.parent.mkdir()
    wrong.write_bytes(HTML)  # what a browser saves from an error page
    url = http_server.serve(URL_PATH, tarball.data)
    result = fetch(tmp_path, url, "--from", f"llvm={wrong}")
    assert result.exit_code == 4, result.stderr
    assert "is not a readable tarball" in result.stderr and f"{wrong} is not a usable copy" in result.stderr
    assert cache_is_empty() and leftovers() == [] and wrong.read_bytes() == HTML
    again = fetch(tmp_path, url)  # without --from: the cache did not keep the wrong file
    assert again.exit_code == 0, again.stderr
    assert lock_of(tmp_path)["artifacts"]["llvm"]["sha256"] == tarball.sha256


# --- 3. a download that gave up keeps its bytes; each URL resumes its own -----------------------------------


def test_a_mirror_that_keeps_dropping_keeps_its_bytes_and_the_next_run_resumes_them(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    mirror_path = f"/mirror/llvm-builds/{TOP}.tar.gz"
    faults = Faults(drop_after=100_000)  # every request: 100 KB, then the connection drops
    http_server.serve(mirror_path, tarball.data, faults)
    url = http_server.url(URL_PATH)  # the original is unreachable (404) on this network
    mirror = ("--mirror", f"{http_server.base_url}/public/={http_server.base_url}/mirror/")
    result = fetch(tmp_path, url, *mirror)
    assert result.exit_code == 4, result.stderr
    assert "gave up after 5 attempts" in result.stderr and "500 KB" in result.stderr and "is kept" in result.stderr
    assert "run the same command again to resume" in result.stderr
    parts = sorted(cache_root().glob("partial/*.part"))
    assert [p.stat().st_size for p in parts] == [500_000]  # trying the original did not discard it

    faults.drop_after = None  # the mirror recovers
    again = fetch(tmp_path, url, *mirror)
    assert again.exit_code == 0, again.stderr
    assert f"resuming llvm at 500 KB of {len(tarball.data) / 1000:.0f} KB" in again.stderr
    last = http_server.requests_for(mirror_path)[-1]
    assert last.range == "bytes=500000-" and last.status == 206
    assert lock_of(tmp_path)["artifacts"]["llvm"]["sha256"] == tarball.sha256 and leftovers() == []


def test_bytes_of_two_urls_are_never_spliced(tmp_path: Path, http_server: LoopbackHTTPServer,
                                             tarball: Tarball) -> None:
    other = llvm_tarball(seed=5)  # the mirror holds another build under the same name
    mirror_path = f"/mirror/llvm-builds/{TOP}.tar.gz"
    http_server.serve(mirror_path, other.data, Faults(drop_after=300_000, status=None))
    url = http_server.serve(URL_PATH, tarball.data)
    mirror = ("--mirror", f"{http_server.base_url}/public/={http_server.base_url}/mirror/")
    result = fetch(tmp_path, url, *mirror, sets=(f"artifacts.llvm.sha256={tarball.sha256}",))
    assert result.exit_code == 0, result.stderr  # the mirror gave up; the original was read from byte 0
    assert [r.range for r in http_server.requests_for(URL_PATH)] == [None]
    assert (dest() / "bin/clang").read_bytes() == tarball.member("bin/clang") and leftovers() == []


# --- 7. a named input that does not exist ----------------------------------------------------------------


def test_from_a_file_that_does_not_exist_is_an_error_even_when_published(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    assert fetch(tmp_path, url).exit_code == 0
    missing = tmp_path / "nonexistent.tar.gz"
    result = fetch(tmp_path, url, "--from", f"llvm={missing}")
    assert result.exit_code == 2, result.stderr  # a wrong argument: a usage error, before anything is done
    assert f"--from llvm={missing}: does not exist" in result.stderr and "fix:" in result.stderr


# --- 9. the unpack progress knows the total ----------------------------------------------------------------


def test_the_unpack_progress_shows_a_share_of_the_known_size(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                              tarball: Tarball,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ProgressTask, "LOG_EVERY_S", 0.0)  # a log line per update, as a bar would redraw
    faults = Faults(hold_after=len(tarball.data) // 2)  # the second half waits until unpacking has begun
    url = http_server.serve(URL_PATH, tarball.data, faults)
    unpacking_began = release_when(faults, unpacked_files)
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    assert unpacking_began.is_set(), "nothing was unpacked while the download was held half-way"
    unpacking = [line for line in result.stderr.splitlines() if line.startswith("unpacking llvm:")]
    total = f"of {len(tarball.data) / 1000:.0f} KB"
    assert any(total in line for line in unpacking), unpacking  # "..., 48%, 377 KB of 787 KB"


# --- 10. damaged cache state is repaired or named, never "unexpected" ------------------------------------------


def damage(path: Path, how: str) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    if how == "empty folder":
        path.mkdir(parents=True)
    elif how == "folder with contents":
        path.mkdir(parents=True)
        (path / "something").write_text("not ours\n")
    elif how == "truncated":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"url": "htt')


def cache_file(kind: str, url: str, sha: str) -> Path:
    return {"urls note": cache_root() / "urls" / url_key(url),
            "blob note": cache_root() / "blobs" / f"{sha}.json",
            "lock": cache_root() / "locks" / f"{url_key(url)}.lock",
            "part note": cache_root() / "partial" / f"{url_key(url)}.part.source",
            "stamp": dest() / ".flagtree-cpu-artifact.json"}[kind]


@pytest.mark.parametrize("kind, how", [
    ("urls note", "truncated"), ("urls note", "empty folder"),
    ("blob note", "truncated"), ("blob note", "empty folder"),
    ("lock", "truncated"), ("lock", "empty folder"),
    ("part note", "truncated"), ("part note", "empty folder"),
    ("stamp", "truncated"), ("stamp", "empty folder"),
])
def test_damaged_cache_state_is_repaired(tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball,
                                         kind: str, how: str) -> None:
    url = http_server.serve(URL_PATH, tarball.data, Faults(drop_after=300_000, drop_times=1))
    first = fetch(tmp_path, url)
    assert first.exit_code == 0, first.stderr
    if kind != "stamp":  # everything in the cache must be rebuilt: make the tree go, keep the cache
        shutil.rmtree(dest())
    if kind == "part note":  # a download in progress: a partial file and its note
        blob = cache_root() / "blobs" / tarball.sha256
        part = cache_root() / "partial" / f"{url_key(url)}.part"
        part.write_bytes(tarball.data[:300_000])
        blob.unlink()
        (cache_root() / "urls" / url_key(url)).unlink()
    damage(cache_file(kind, url, tarball.sha256), how)
    result = fetch(tmp_path, url)
    assert result.exit_code == 0, result.stderr
    assert json.loads((dest() / ".flagtree-cpu-artifact.json").read_text())["sha256"] == tarball.sha256
    if kind != "stamp" and (kind, how) != ("lock", "truncated"):  # a lock file's text is only informative
        assert "warning:" in result.stderr and str(cache_file(kind, url, tarball.sha256)) in result.stderr
    again = fetch(tmp_path, url)  # and stays repaired
    assert again.exit_code == 0 and " ok " in again.stderr, again.stderr


@pytest.mark.parametrize("kind", ["urls note", "blob note", "lock", "part note", "stamp"])
def test_a_folder_with_contents_where_a_cache_file_belongs_is_named_not_deleted(
        tmp_path: Path, http_server: LoopbackHTTPServer, tarball: Tarball, kind: str) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    assert fetch(tmp_path, url).exit_code == 0
    (cache_root() / "blobs" / tarball.sha256).unlink()  # the next run has to download and record again
    if kind != "stamp":
        shutil.rmtree(dest())
    else:
        (cache_root() / "blobs").mkdir(exist_ok=True)
    path = cache_file(kind, url, tarball.sha256)
    if kind == "part note":
        (cache_root() / "partial" / f"{url_key(url)}.part").write_bytes(tarball.data[:1000])
    damage(path, "folder with contents")
    result = fetch(tmp_path, url)
    assert result.exit_code == 4, result.stderr
    assert str(path) in result.stderr and "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert "fix:" in result.stderr
    assert (path / "something").read_text() == "not ours\n"  # not ours: left alone


def test_a_damaged_stamp_without_the_tarball_names_the_stamp(tmp_path: Path, http_server: LoopbackHTTPServer,
                                                            tarball: Tarball) -> None:
    url = http_server.serve(URL_PATH, tarball.data)
    assert fetch(tmp_path, url).exit_code == 0
    shutil.rmtree(cache_root())  # no tarball to verify the tree against
    stamp = dest() / ".flagtree-cpu-artifact.json"
    stamp.write_text("{")
    result = fetch(tmp_path, url)
    assert result.exit_code == 4, result.stderr
    assert f"{stamp} is damaged" in result.stderr and "--from llvm=FILE" in result.stderr
    assert (dest() / "bin/clang").is_file()  # the tree is left alone
    assert os.path.exists(stamp)
