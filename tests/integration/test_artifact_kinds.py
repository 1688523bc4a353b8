"""Recipe schema v2 artifacts end to end: `flagtree-cpu fetch` on a small recipe written here, against a real
HTTP server on 127.0.0.1. md5 and sha512 digests, zip archives and plain files, `root.find`, `after_unpack`
clean-ups, source pins by regex and JSON path (checked before any download), and zstd tarballs this Python
cannot read."""

from __future__ import annotations

import gzip
import json
import os
import platform
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.artifact_kinds import KINDS, Kind
from flagtree_cpu_build.cli import app
from flagtree_cpu_build.context import ContextRequest, open_context
from flagtree_cpu_build.stagekit.stage import RunOptions
from flagtree_cpu_build.stages.artifacts.fetch import run_fetch
from flagtree_cpu_build.stages.registry import plan_stage, stage_named
from flagtree_cpu_build.ui import UI
from tests.support.envelope import result_of
from tests.support.fetching import cache_root
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import Tarball, tarball_with, zip_with, zstd_lookalike

STAMP = ".flagtree-cpu-artifact.json"
HOST = platform.machine()
HASH = "abcdef1234567890abcdef1234567890abcdef12"


class Kit:
    """A workspace, a recipe with one artifact `tool`, and the server it downloads from."""

    def __init__(self, root: Path, server: LoopbackHTTPServer) -> None:
        self.root, self.server = root, server
        self.ws = root / "ws"
        self.dest = root / "tools" / "tool"

    def serve(self, name: str, archive: Tarball) -> str:
        return self.server.serve(f"/releases/{name}", archive.data)

    def write_recipe(self, artifact: dict[str, Any], sources: dict[str, Any] | None = None) -> Path:
        data = {"schema_version": 2, "name": "kinds-fixture", "platform": {"host": {"arch": [HOST]}},
                "sources": sources or {},
                "artifacts": {"tool": {"path": str(self.dest), **artifact}}}
        recipe = self.root / "kinds.yaml"
        recipe.write_text(json.dumps(data, indent=1))  # JSON is YAML
        return recipe

    def fetch(self, artifact: dict[str, Any], *args: str, sources: dict[str, Any] | None = None,
              json_out: bool = False) -> Result:
        recipe = self.write_recipe(artifact, sources)
        return CliRunner().invoke(app, ["-w", str(self.ws), "--recipe", str(recipe), *(["--json"] if json_out else []),
                                        "fetch", *args])

    def stamp(self) -> dict[str, Any]:
        return json.loads((self.dest / STAMP).read_text())

    def lock(self) -> dict[str, Any]:
        return yaml.safe_load((self.ws / ".flagtree-cpu/lock.yaml").read_text())["artifacts"]["tool"]

    def checkout(self, source: str, rel: str, text: str) -> dict[str, Any]:
        """A file in a source's checkout (no clone: fetch only reads it), and the recipe's sources entry."""
        path = self.ws / source / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return {source: {"url": "https://example.invalid/src.git", "ref": "main"}}


@pytest.fixture
def kit(tmp_path: Path, http_server: LoopbackHTTPServer) -> Kit:
    return Kit(tmp_path, http_server)


def nothing_kept() -> bool:
    """No verified blob and no note that a URL served some sha256: the cache holds nothing as good."""
    root = cache_root()
    return not list(root.glob("blobs/*")) and not list(root.glob("urls/*")) and not list(root.glob("partial/*.part"))


TOOL = {"tool-1.0/bin/tool": b"#!/bin/sh\necho tool\n", "tool-1.0/share/doc.txt": b"docs\n"}


# --- digests ----------------------------------------------------------------------------------------


def test_an_md5_artifact_is_verified_published_and_current_without_the_network(kit: Kit) -> None:
    archive = tarball_with(TOOL, executable=("tool-1.0/bin/tool",))
    url = kit.serve("tool-1.0.tar.gz", archive)
    artifact = {"url": url, "digest": {"md5": archive.md5.upper()}, "root": {"strip": 1}}
    result = kit.fetch(artifact, "--require-hashes")  # a stated md5 counts as a digest
    assert result.exit_code == 0, result.stderr
    assert "trusting it on first use" not in result.stderr
    assert (kit.dest / "bin/tool").read_bytes() == TOOL["tool-1.0/bin/tool"] and os.access(kit.dest / "bin/tool",
                                                                                          os.X_OK)
    stamp = kit.stamp()
    assert stamp["md5"] == archive.md5 and stamp["sha256"] == archive.sha256 and stamp["kind"] == "tarball"
    assert kit.lock() == {"url": url, "sha256": archive.sha256, "size": len(archive.data), "served_from": url,
                          "digest": {"md5": archive.md5}}
    assert (cache_root() / "blobs" / archive.sha256).is_file()
    served = len(kit.server.requests)
    again = kit.fetch(artifact, "--frozen")  # the lock records the md5 the recipe states
    assert again.exit_code == 0, again.stderr
    assert len(kit.server.requests) == served and " ok " in again.stderr


def test_a_wrong_md5_is_refused_and_nothing_is_published_or_kept(kit: Kit) -> None:
    archive = tarball_with(TOOL)
    url = kit.serve("tool-1.0.tar.gz", archive)
    wrong = "0" * 32
    result = kit.fetch({"url": url, "digest": {"md5": wrong}, "root": {"strip": 1}})
    assert result.exit_code == 4
    assert f"md5 mismatch — expected {wrong}, got {archive.md5}" in result.stderr and url in result.stderr
    assert not kit.dest.exists() and not list(kit.dest.parent.glob(".*"))
    assert nothing_kept()


def test_a_sha512_mismatch_is_refused_even_when_the_sha256_matches(kit: Kit) -> None:
    archive = tarball_with(TOOL)
    url = kit.serve("tool-1.0.tar.gz", archive)
    wrong = "f" * 128
    result = kit.fetch({"url": url, "sha256": archive.sha256, "digest": {"sha512": wrong}})
    assert result.exit_code == 4
    assert f"sha512 mismatch — expected {wrong}, got {archive.sha512}" in result.stderr
    assert "sha256 mismatch" not in result.stderr
    assert not kit.dest.exists() and nothing_kept()


# --- kinds --------------------------------------------------------------------------------------------


def test_a_zip_with_a_top_folder_is_unpacked_with_root_strip(kit: Kit) -> None:
    archive = zip_with(TOOL, links={"tool-1.0/bin/t": "tool"}, executable=("tool-1.0/bin/tool",))
    url = kit.serve("tool-1.0.zip", archive)
    result = kit.fetch({"url": url, "sha256": archive.sha256, "kind": "zip", "root": {"strip": 1},
                        "version_file": "version.txt"})
    assert result.exit_code == 0, result.stderr
    assert (kit.dest / "share/doc.txt").read_bytes() == b"docs\n"
    assert os.access(kit.dest / "bin/tool", os.X_OK) and os.readlink(kit.dest / "bin/t") == "tool"
    assert (kit.dest / "version.txt").read_text() == url and kit.stamp()["kind"] == "zip"
    assert not (kit.dest / "tool-1.0").exists()


@pytest.mark.parametrize("files, links, why", [
    ({"tool-1.0/ok": b"ok", "tool-1.0/../../escaped.txt": b"pwned"}, {}, "climbs out with '..'"),
    ({"/tmp/flagtree-cpu-zip-escape.txt": b"pwned"}, {}, "has an absolute path"),
    ({"tool-1.0/out/pwned.txt": b"pwned"}, {"tool-1.0/out": "../../outside"}, "outside the tree"),
])
def test_a_zip_entry_escaping_the_tree_is_refused(kit: Kit, files: dict[str, bytes], links: dict[str, str],
                                                  why: str) -> None:
    archive = zip_with(files, links=links)
    url = kit.serve("tool-1.0.zip", archive)
    result = kit.fetch({"url": url, "kind": "zip", "root": {"strip": 1}})
    assert result.exit_code == 4, result.stderr
    assert "refusing to unpack tool" in result.stderr and why in result.stderr
    assert not kit.dest.exists() and not (kit.root / "escaped.txt").exists()
    assert not (kit.root / "tools" / "outside").exists() and not Path("/tmp/flagtree-cpu-zip-escape.txt").exists()
    assert nothing_kept()  # hostile bytes are not remembered


def test_a_plain_file_is_published_inside_the_folder_under_its_url_name(kit: Kit) -> None:
    blob = Tarball(b'{"models": ["a", "b"]}\n')
    url = kit.serve("catalog-v3.json", blob)
    result = kit.fetch({"url": url, "digest": {"sha512": blob.sha512}, "kind": "file", "version_file": "version.txt"})
    assert result.exit_code == 0, result.stderr
    assert (kit.dest / "catalog-v3.json").read_bytes() == blob.data
    assert (kit.dest / "version.txt").read_text() == url
    assert kit.stamp()["kind"] == "file" and kit.stamp()["sha512"] == blob.sha512


def test_root_find_publishes_the_folder_that_holds_bin(kit: Kit) -> None:
    archive = tarball_with({"spine-mlir-1.2/bin/mlir-opt": b"\x7fELF", "spine-mlir-1.2/lib/libMLIR.a": b"lib",
                            "README": b"top-level readme\n"})
    url = kit.serve("spine-mlir-1.2.tar.gz", archive)
    result = kit.fetch({"url": url, "root": {"find": "bin"}})
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in kit.dest.iterdir()) == sorted(["bin", "lib", STAMP])
    assert kit.stamp()["find"] == "bin"


def test_root_find_not_found_names_the_entry_and_the_top_levels(kit: Kit) -> None:
    archive = tarball_with({"spine-mlir-1.2/tools/mlir-opt": b"\x7fELF"})
    url = kit.serve("spine-mlir-1.2.tar.gz", archive)
    result = kit.fetch({"url": url, "root": {"find": "bin"}})
    assert result.exit_code == 4
    assert "no folder of tool holds 'bin'" in result.stderr and "spine-mlir-1.2/tools/" in result.stderr
    assert not kit.dest.exists() and not list(kit.dest.parent.glob(".*"))
    # the bytes were fine: fixing the recipe needs no second download
    fixed = kit.fetch({"url": url, "root": {"find": "tools"}})
    assert fixed.exit_code == 0, fixed.stderr
    assert len(kit.server.requests) == 1 and (kit.dest / "tools/mlir-opt").is_file()


def test_after_unpack_removes_what_its_globs_match_and_a_new_list_republishes(kit: Kit) -> None:
    archive = tarball_with({"sdk/sysroot/lib64/cmake/a.cmake": b"a", "sdk/sysroot/lib64/cmake/sub/b.cmake": b"b",
                            "sdk/sysroot/lib64/libc.so": b"libc", "sdk/bin/cc": b"cc"})
    url = kit.serve("sdk.tar.gz", archive)
    artifact = {"url": url, "root": {"strip": 1}, "after_unpack": [{"remove": "sysroot/lib64/cmake/*"}]}
    result = kit.fetch(artifact)
    assert result.exit_code == 0, result.stderr
    assert (kit.dest / "sysroot/lib64/cmake").is_dir() and not list((kit.dest / "sysroot/lib64/cmake").iterdir())
    assert (kit.dest / "sysroot/lib64/libc.so").is_file() and (kit.dest / "bin/cc").is_file()
    assert kit.stamp()["after_unpack"] == ["sysroot/lib64/cmake/*"]
    again = kit.fetch({**artifact, "after_unpack": [{"remove": "bin"}]})  # another clean-up: not current
    assert again.exit_code == 0, again.stderr
    assert not (kit.dest / "bin").exists() and (kit.dest / "sysroot/lib64/cmake/a.cmake").is_file()
    assert len(kit.server.requests) == 1  # from the download cache


def test_a_zip_is_held_to_the_unpack_limits(kit: Kit) -> None:
    bomb = zip_with({"top/zeros.bin": bytes(4 << 20)})
    url = kit.serve("bomb.zip", bomb)
    result = kit.fetch({"url": url, "kind": "zip", "unpacked_size": 1000})
    assert result.exit_code == 4 and "expands to more than 2 KB" in result.stderr
    assert not kit.dest.exists() and not list(kit.dest.parent.glob(".*"))
    many = zip_with({f"top/f{i}": b"" for i in range(5)})
    url = kit.serve("many.zip", many)
    result = kit.fetch({"url": url, "kind": "zip", "unpacked_entries": 2})
    assert result.exit_code == 4 and "more than 4 files, folders and links" in result.stderr


def test_an_imported_file_with_the_wrong_md5_is_refused_naming_the_algorithm(kit: Kit) -> None:
    archive = tarball_with(TOOL)
    local = kit.root / "downloaded.tar.gz"
    local.write_bytes(archive.data)
    result = kit.fetch({"url": "https://example.invalid/tool.tar.gz", "digest": {"md5": "1" * 32}},
                       "--from", f"tool={local}")
    assert result.exit_code == 4
    assert f"is not the expected file: md5 {archive.md5}, expected {'1' * 32}" in result.stderr
    assert not kit.dest.exists() and nothing_kept()


def test_a_tree_someone_else_unpacked_from_a_zip_is_adopted_when_it_matches(kit: Kit) -> None:
    archive = zip_with(TOOL)
    local = kit.root / "tool-1.0.zip"
    local.write_bytes(archive.data)
    for name, data in TOOL.items():  # what `unzip` and a `mv tool-1.0 tools/tool` leave
        (kit.dest / name.split("/", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        (kit.dest / name.split("/", 1)[1]).write_bytes(data)
    artifact = {"url": "https://example.invalid/tool-1.0.zip", "kind": "zip", "root": {"strip": 1}}
    # judged on --json: the stderr table wraps its detail column, so a longer temporary path (another user
    # name, pytest-of-<user>/pytest-10 instead of pytest-9) splits the words across two lines
    result = kit.fetch(artifact, "--from", f"tool={local}", json_out=True)
    assert result.exit_code == 0, result.stderr
    [action] = result_of(result.stdout)["actions"]
    assert (action["status"], action["detail"]) == ("updated", f"existing tree at {kit.dest} matches the tarball; "
                                                               "adopted")
    assert kit.stamp()["kind"] == "zip"
    (kit.dest / STAMP).unlink()
    (kit.dest / "share/doc.txt").write_bytes(b"edited\n")
    result = kit.fetch(artifact, "--from", f"tool={local}")
    assert result.exit_code == 4 and "share/doc.txt: a file of 7 bytes, the archive has a file of 5 bytes" in \
        result.stderr
    assert (kit.dest / "share/doc.txt").read_bytes() == b"edited\n"  # left alone


def test_a_new_kind_is_one_table_entry_and_its_unpack_function(kit: Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzip-compressed single file, added only as an entry of `artifact_kinds.KINDS`: fetch plans it, downloads
    it, unpacks it with the entry's function, stamps it, and finds it current afterwards."""
    payload = b"#!/bin/sh\necho tool\n"
    blob = Tarball(gzip.compress(payload))
    url = kit.serve("tool.gz", blob)

    def unpack_gz(artifact: Any, source: Any, tree: Path, **_: Any) -> None:
        tree.mkdir(parents=True)
        (tree / "tool").write_bytes(gzip.decompress(Path(source).read_bytes()))

    monkeypatch.setitem(KINDS, "gzfile", Kind("a gzip-compressed file", folders=False, unpack=unpack_gz))
    recipe = kit.write_recipe({"url": url, "sha256": blob.sha256})
    ctx = open_context(ContextRequest(recipe=str(recipe), workdir=str(kit.ws)), UI())
    # the recipe's accepted values are read from the table when the model is imported: set the kind on the loaded one
    tool = replace(ctx.recipe.artifacts["tool"], kind="gzfile")
    ctx = replace(ctx, recipe=replace(ctx.recipe, artifacts={"tool": tool}))
    options = RunOptions(python=Path())
    [action] = run_fetch(ctx, options, plan_stage(stage_named("artifacts"), ctx, options)).actions
    assert action.status == "created", action
    assert (kit.dest / "tool").read_bytes() == payload and kit.stamp()["kind"] == "gzfile"
    [again] = plan_stage(stage_named("artifacts"), ctx, options)
    assert again.current, again


# --- source pins, before any download --------------------------------------------------------------------


def test_a_json_path_pin_that_disagrees_with_the_url_stops_before_any_download(kit: Kit) -> None:
    sources = kit.checkout("triton", "cmake/llvm-info.json", json.dumps({"llvm_hash": HASH, "builds": [{"id": 7}]}))
    url = kit.serve("llvm-deadbeef-ubuntu.tar.gz", tarball_with(TOOL))
    pin = {"source": "triton", "file": "cmake/llvm-info.json", "json_path": "llvm_hash"}
    result = kit.fetch({"url": url, "matches": pin}, sources=sources)
    assert result.exit_code == 4
    assert f"asks for '{HASH}' (at llvm_hash)" in result.stderr and url in result.stderr
    assert kit.server.requests == [] and not kit.dest.exists()


def test_a_json_path_pin_that_agrees_lets_the_download_go(kit: Kit) -> None:
    sources = kit.checkout("triton", "cmake/llvm-info.json", json.dumps({"builds": [{"hash": "a66376b0"}]}))
    url = kit.serve("llvm-a66376b0-ubuntu.tar.gz", tarball_with(TOOL))
    pin = {"source": "triton", "file": "cmake/llvm-info.json", "json_path": "builds.0.hash"}
    result = kit.fetch({"url": url, "matches": pin}, sources=sources)
    assert result.exit_code == 0, result.stderr


def test_chars_narrow_a_json_path_value_to_the_short_hash_the_url_carries(kit: Kit) -> None:
    """triton-cpu's llvm-info.json holds the whole 40-character hash; its tarball names the first 8."""
    sources = kit.checkout("triton", "cmake/llvm-info.json", json.dumps({"llvm_hash": HASH}))
    pin = {"source": "triton", "file": "cmake/llvm-info.json", "json_path": "llvm_hash", "chars": 8}
    wrong = kit.serve("llvm-deadbeef-ubuntu.tar.gz", tarball_with(TOOL))
    refused = kit.fetch({"url": wrong, "matches": pin}, sources=sources)
    assert refused.exit_code == 4 and f"asks for '{HASH[:8]}' (the first 8 characters at llvm_hash)" in \
        refused.stderr
    assert kit.server.requests == [] and not kit.dest.exists()
    right = kit.serve(f"llvm-{HASH[:8]}-ubuntu.tar.gz", tarball_with(TOOL))
    assert kit.fetch({"url": right, "matches": pin}, sources=sources).exit_code == 0


@pytest.mark.parametrize("text, path, said", [
    ("not json {", "llvm_hash", "is not JSON"),
    (json.dumps({"llvm": {"hash": HASH}}), "llvm.commit", "llvm has no key 'commit'; its keys: hash"),
    (json.dumps({"builds": []}), "builds.0", "builds is a list of 0"),
])
def test_a_json_path_pin_that_cannot_be_read_says_why(kit: Kit, text: str, path: str, said: str) -> None:
    sources = kit.checkout("triton", "cmake/llvm-info.json", text)
    url = kit.serve("llvm-x.tar.gz", tarball_with(TOOL))
    result = kit.fetch({"url": url, "matches": {"source": "triton", "file": "cmake/llvm-info.json",
                                                "json_path": path}}, sources=sources)
    assert result.exit_code == 4
    assert "cmake/llvm-info.json" in result.stderr and said in result.stderr
    assert kit.server.requests == []


def test_a_regex_pin_compares_its_first_group_with_the_url(kit: Kit) -> None:
    sources = kit.checkout("triton", "cmake/llvm.cmake", f'set(LLVM_COMMIT "{HASH}")\n')
    pin = {"source": "triton", "file": "cmake/llvm.cmake", "regex": r'LLVM_COMMIT "([0-9a-f]{12})'}
    wrong = kit.serve("llvm-000000000000.tar.gz", tarball_with(TOOL))
    result = kit.fetch({"url": wrong, "matches": pin}, sources=sources)
    assert result.exit_code == 4 and f"asks for '{HASH[:12]}'" in result.stderr
    assert kit.server.requests == []
    right = kit.serve(f"llvm-{HASH[:12]}.tar.gz", tarball_with(TOOL))
    assert kit.fetch({"url": right, "matches": pin}, sources=sources).exit_code == 0


# --- compression ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["w:xz", "w:bz2", "w"])
def test_xz_bzip2_and_plain_tarballs_are_read(kit: Kit, mode: str) -> None:
    archive = tarball_with(TOOL, mode=mode)
    url = kit.serve("tool-1.0.tar", archive)
    result = kit.fetch({"url": url, "sha256": archive.sha256, "root": {"strip": 1}})
    assert result.exit_code == 0, result.stderr
    assert (kit.dest / "share/doc.txt").read_bytes() == b"docs\n"


def test_a_zstd_tarball_is_refused_before_download_when_its_url_says_so(kit: Kit) -> None:
    url = kit.serve("tool-1.0.tar.zst", zstd_lookalike())
    result = kit.fetch({"url": url})
    assert result.exit_code == 4
    assert "cannot read zstd" in result.stderr and ".tar.xz" in result.stderr
    assert kit.server.requests == [] and not kit.dest.exists()


def test_a_zstd_tarball_under_another_name_is_refused_clearly(kit: Kit) -> None:
    blob = zstd_lookalike()
    url = kit.serve("tool-1.0.tar.gz", blob)
    result = kit.fetch({"url": url, "sha256": blob.sha256})
    assert result.exit_code == 4
    assert "is a zstd-compressed tarball" in result.stderr and "cannot read zstd" in result.stderr
    assert "not a readable tarball" not in result.stderr
    assert not kit.dest.exists()
