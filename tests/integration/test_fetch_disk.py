"""A full disk, for real: the download cache or TRITON_HOME on a 4 MiB tmpfs. fetch must stop with exit 4
naming the file system, the space needed and what to free — before writing when the sizes are known,
and cleanly when the disk fills anyway — keeping the partial download for the next run to resume."""

from __future__ import annotations

import io
import os
import random
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.disks import tmpfs
from tests.support.fetching import URL_PATH, fetch, partial_folders
from tests.support.httpserver import Faults, LoopbackHTTPServer
from tests.support.tarballs import TOP, Tarball, llvm_tarball


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "small-disk", "4m", "a real full disk needs root") as mount:
        yield mount


def parts(cache: Path) -> list[Path]:
    return sorted(cache.glob("downloads/partial/*.part"))


def test_a_download_larger_than_the_cache_disk_stops_before_writing(
        tmp_path: Path, http_server: LoopbackHTTPServer, small_disk: Path) -> None:
    big = llvm_tarball(size_kb=6000)  # 6 MB, incompressible
    url = http_server.serve(URL_PATH, big.data)
    result = fetch(tmp_path, url, "--cache-dir", str(small_disk))
    assert result.exit_code == 4, result.stderr
    assert f"the file system at {small_disk}" in result.stderr
    assert f"needs {len(big.data) / 1e6:.1f} MB" in result.stderr
    assert "free at least" in result.stderr and "--cache-dir" in result.stderr
    assert "unexpected" not in result.stderr and parts(small_disk) == [] and partial_folders() == []
    roomy = fetch(tmp_path, url, "--cache-dir", str(tmp_path / "roomy-cache"))
    assert roomy.exit_code == 0, roomy.stderr


def test_a_cache_disk_that_fills_during_the_download_keeps_the_part_for_the_resume(
        tmp_path: Path, http_server: LoopbackHTTPServer, small_disk: Path) -> None:
    tarball = llvm_tarball(size_kb=3000)  # 3 MB: would fit, but another program fills the disk meanwhile
    filler = small_disk / "someone-elses-file"
    filler.write_bytes(b"\0" * (2 << 20))
    faults = Faults(no_length=True)  # no Content-Length: the size cannot be checked before
    url = http_server.serve(URL_PATH, tarball.data, faults)
    result = fetch(tmp_path, url, "--cache-dir", str(small_disk))
    assert result.exit_code == 4, result.stderr
    assert "not enough disk space for downloading llvm" in result.stderr and str(small_disk) in result.stderr
    assert "is kept" in result.stderr and "unexpected" not in result.stderr
    [part] = parts(small_disk)
    kept = part.stat().st_size
    assert kept > 1_000_000 and partial_folders() == []

    filler.unlink()  # the space is back
    again = fetch(tmp_path, url, "--cache-dir", str(small_disk))
    assert again.exit_code == 0, again.stderr
    assert f"resuming llvm at {kept / 1e6:.1f} MB" in again.stderr
    assert http_server.requests_for(URL_PATH)[-1].range == f"bytes={kept}-"


def expanding_tarball() -> Tarball:
    """3 MB to download, 8 MB unpacked: a download that fits on 4 MiB, a tree that does not."""
    rng = random.Random(7)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in ((f"{TOP}/bin/clang", rng.randbytes(3 << 20)), (f"{TOP}/share/zeros", bytes(5 << 20))):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return Tarball(buffer.getvalue())


def test_a_triton_home_that_fills_while_unpacking_stops_cleanly_and_keeps_the_download(
        tmp_path: Path, http_server: LoopbackHTTPServer, small_disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_HOME", str(small_disk))
    tarball = expanding_tarball()
    url = http_server.serve(URL_PATH, tarball.data, Faults(rate=4 << 20))
    result = fetch(tmp_path, url)
    assert result.exit_code == 4, result.stderr
    assert "not enough disk space for unpacking llvm" in result.stderr
    assert f"file system at {small_disk}" in result.stderr
    assert "TRITON_HOME" in result.stderr and "unexpected" not in result.stderr
    llvm = small_disk / ".triton" / "llvm"
    assert partial_folders(llvm) == [] and not (llvm / TOP).exists()  # the half tree is gone ...
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "flagtree-cpu"
    assert [p.stat().st_size > 0 for p in parts(cache)] == [True]  # ... the download is kept

    # with the unpacked size in the recipe, the next run knows before it starts unpacking; the kept (complete)
    # download is not fetched again
    stated = fetch(tmp_path, url, sets=("artifacts.llvm.unpacked_size=8400000",))
    assert stated.exit_code == 4, stated.stderr
    assert "needs 8.4 MB" in stated.stderr and f"file system at {small_disk}" in stated.stderr
    assert partial_folders(llvm) == [] and [p.stat().st_size for p in parts(cache)] == [len(tarball.data)]
    assert [r.status for r in http_server.requests_for(URL_PATH)][1:] in ([416], [206])


def test_a_tree_larger_than_triton_home_stops_before_downloading(
        tmp_path: Path, http_server: LoopbackHTTPServer, small_disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_HOME", str(small_disk))
    big = llvm_tarball(size_kb=6000)
    url = http_server.serve(URL_PATH, big.data)
    result = fetch(tmp_path, url)
    assert result.exit_code == 4, result.stderr
    assert "unpacking llvm" in result.stderr and "at least" in result.stderr and str(small_disk) in result.stderr
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "flagtree-cpu"
    assert parts(cache) == [] and partial_folders(small_disk / ".triton" / "llvm") == []
