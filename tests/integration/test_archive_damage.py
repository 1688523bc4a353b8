"""A damaged archive is exit 4 naming it and what is wrong with it — truncated, corrupt compressed data, a CRC
that does not match — on every path that reads one: unpacked as it downloads, unpacked from the download cache,
imported with --from, and zip archives; and its bytes are dropped, so the next run downloads it again. Never
exit 1 "unexpected ReadError". Real HTTP server on 127.0.0.1, the real CLI."""

from __future__ import annotations

import io
import json
import platform
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.fetching import URL_PATH, cache_root, dest, fetch, leftovers, partial_folders
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import cut_member_tarball, llvm_tarball, tarball_with

FILES = {"tool-1.0/bin/tool": b"#!/bin/sh\necho tool\n" * 50, "tool-1.0/share/doc.txt": bytes(range(256)) * 400}


def flipped(data: bytes, at: int, count: int = 16) -> bytes:
    return data[:at] + bytes(b ^ 0x5A for b in data[at:at + count]) + data[at + count:]


def zip_of(method: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in FILES.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def data_offset(archive: bytes, name: str) -> int:
    """Where the bytes of member ``name`` start in the zip ``archive``."""
    info = zipfile.ZipFile(io.BytesIO(archive)).getinfo(name)
    header = archive[info.header_offset:info.header_offset + 30]
    return info.header_offset + 30 + int.from_bytes(header[26:28], "little") + int.from_bytes(header[28:30], "little")


def damaged_zip(method: int) -> bytes:
    archive = zip_of(method)
    return flipped(archive, data_offset(archive, "tool-1.0/share/doc.txt") + 40)


def gzip_with_a_wrong_crc() -> bytes:
    data = tarball_with(FILES).data
    return data[:-8] + bytes(b ^ 0xFF for b in data[-8:-4]) + data[-4:]


def xz_tarball() -> bytes:
    return tarball_with(FILES, mode="w:xz").data


# name -> (kind, bytes, what the message says)
DAMAGE: dict[str, tuple[str, bytes, str]] = {
    "tar member cut short": ("tarball", cut_member_tarball().data, "is truncated"),
    "gzip cut": ("tarball", tarball_with(FILES).data[:-300], "ends early"),
    "gzip crc": ("tarball", gzip_with_a_wrong_crc(), "gzip data is corrupt"),
    "xz corrupt": ("tarball", flipped(xz_tarball(), len(xz_tarball()) // 2), "xz data is corrupt"),
    "xz cut": ("tarball", xz_tarball()[: len(xz_tarball()) // 2], "ends early"),
    "zip crc": ("zip", damaged_zip(zipfile.ZIP_STORED), "Bad CRC-32"),
    "zip deflate corrupt": ("zip", damaged_zip(zipfile.ZIP_DEFLATED), "cannot be read"),
    "zip lzma corrupt": ("zip", damaged_zip(zipfile.ZIP_LZMA), "cannot be read"),
    "zip bzip2 corrupt": ("zip", damaged_zip(zipfile.ZIP_BZIP2), "cannot be read"),
    "zip cut": ("zip", zip_of(zipfile.ZIP_DEFLATED)[:-100], "not a readable zip"),
}


class Kit:
    """A recipe with one artifact `tool` (no digest: trusted on first use), and the server it comes from."""

    def __init__(self, root: Path, server: LoopbackHTTPServer):
        self.root, self.server = root, server
        self.dest = root / "tools" / "tool"

    def fetch(self, artifact: dict[str, Any], *args: str, command: tuple[str, ...] = ("fetch",)) -> Result:
        data = {"schema_version": 2, "name": "damage-fixture", "platform": {"host": {"arch": [platform.machine()]}},
                "sources": {},
                "artifacts": {"tool": {"path": str(self.dest), **artifact}}}
        recipe = self.root / "damage.yaml"
        recipe.write_text(json.dumps(data))
        return CliRunner().invoke(app, ["-w", str(self.root / "ws"), "--recipe", str(recipe), *command, *args])

    def gets(self, path: str) -> int:
        return len([r for r in self.server.requests_for(path) if r.method == "GET"])


@pytest.fixture
def kit(tmp_path: Path, http_server: LoopbackHTTPServer) -> Kit:
    return Kit(tmp_path, http_server)


def nothing_kept(kit: Kit) -> bool:
    root = cache_root()
    return not [p for sub in ("blobs", "urls", "partial") for p in root.glob(f"{sub}/*")] \
        and not kit.dest.exists() and not list(kit.dest.parent.glob(".*flagtree-cpu*"))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_download_is_exit_4_naming_it_and_the_next_run_downloads_it_again(kit: Kit, damage: str) -> None:
    kind, data, said = DAMAGE[damage]
    path = "/releases/tool-1.0." + ("zip" if kind == "zip" else "tar.gz")
    url = kit.server.serve(path, data)
    result = kit.fetch({"url": url, "kind": kind})
    assert result.exit_code == 4, result.stderr
    assert said in result.stderr and url in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert nothing_kept(kit)
    again = kit.fetch({"url": url, "kind": kind})
    assert again.exit_code == 4 and kit.gets(path) >= 2  # nothing was trusted: downloaded again


@pytest.mark.parametrize("damage", ["tar member cut short", "zip lzma corrupt", "zip bzip2 corrupt", "zip crc"])
def test_bundle_create_drops_a_damaged_archive_nothing_vouches_for_with_exit_4(kit: Kit, damage: str) -> None:
    kind, data, said = DAMAGE[damage]
    url = kit.server.serve("/releases/tool-1.0." + ("zip" if kind == "zip" else "tar.gz"), data)
    bundle = kit.root / "out.bundle"
    result = kit.fetch({"url": url, "kind": kind}, "-o", str(bundle), command=("bundle", "create"))
    assert result.exit_code == 4, result.stderr
    assert url in result.stderr and "not a readable" in result.stderr and "unexpected" not in result.stderr
    assert not bundle.exists() and nothing_kept(kit)


def test_a_cached_tarball_that_turns_out_cut_short_is_dropped_and_downloaded_again(
        tmp_path: Path, http_server: LoopbackHTTPServer) -> None:
    good = llvm_tarball()
    url = http_server.serve(URL_PATH, good.data)
    assert fetch(tmp_path, url).exit_code == 0
    shutil.rmtree(dest())  # published once; the cache still holds the tarball
    [blob] = cache_root().glob("blobs/*[0-9a-f]")
    blob.write_bytes(cut_member_tarball().data)  # damaged in the cache since (a disk, a stray copy)

    result = fetch(tmp_path, url)
    assert result.exit_code == 4, result.stderr
    assert "is truncated" in result.stderr and url in result.stderr and str(blob) in result.stderr
    assert not blob.exists() and not dest().exists() and partial_folders() == []
    gets = len([r for r in http_server.requests_for(URL_PATH) if r.method == "GET"])
    again = fetch(tmp_path, url)
    assert again.exit_code == 0, again.stderr  # downloaded again, the good bytes
    assert len([r for r in http_server.requests_for(URL_PATH) if r.method == "GET"]) == gets + 1
    assert leftovers() == []


def test_an_imported_tarball_cut_short_is_exit_4_naming_the_file(tmp_path: Path,
                                                                   http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve(URL_PATH, llvm_tarball().data)
    copy = tmp_path / "llvm.tar.gz"
    copy.write_bytes(cut_member_tarball().data)
    result = fetch(tmp_path, url, "--from", f"llvm={copy}")
    assert result.exit_code == 4, result.stderr
    assert "is truncated" in result.stderr and str(copy) in result.stderr and url in result.stderr
    assert copy.is_file() and not dest().exists() and leftovers() == []
    assert not list(cache_root().glob("blobs/*"))
    assert http_server.requests_for(URL_PATH) == []  # --from: no download
