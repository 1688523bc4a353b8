"""setup's order when some artifacts read a source's file: only those wait for the sources stage; the others are
fetched side by side with the clones, as before v3 (a failed clone does not stop their download)."""

from __future__ import annotations

import json

from tests.integration.test_source_reads import HASH, HASH_RULE, HOST, Kit, make_repo
from tests.integration.test_source_reads import kit as kit  # noqa: F401 (the fixture)


def write(kit: Kit, source_url: str) -> None:
    data = {"schema_version": 2, "name": "read-order", "platform": {"host": {"arch": [HOST]}},
            "sources": {"triton": {"url": source_url, "ref": "main"}},
            "artifacts": {
                "llvm": {"kind": "tarball", "root": {"strip": 1}, "url": kit.base + "llvm-{match}.tar.gz",
                         "path": "tools/llvm-{match}", "matches": HASH_RULE},
                "json": {"kind": "tarball", "root": {"strip": 1}, "url": kit.base + "json.tar.gz",
                         "path": "tools/json"}}}
    kit.recipe.write_text(json.dumps(data, indent=1))


def test_an_artifact_that_reads_nothing_is_fetched_beside_the_clone_even_when_the_clone_fails(kit: Kit) -> None:
    kit.serve(f"llvm-{HASH[:8]}.tar.gz")
    kit.serve("json.tar.gz")
    write(kit, (kit.root / "no-such-repo.git").as_uri())
    result = kit.run("setup", "--skip-build")
    assert result.exit_code == 3, result.output  # the clone failed
    assert (kit.ws / "tools/json/bin/clang").is_file()  # fetched side by side with it
    assert not list((kit.ws / "tools").glob("llvm-*"))  # the one that reads the source waited for it


def test_setup_fetches_both_the_reading_artifact_after_sync_and_the_other_beside_it(kit: Kit) -> None:
    url, _work, _env = make_repo(kit.root / "repo", {"cmake/llvm-hash.txt": HASH + "\n"})
    kit.serve(f"llvm-{HASH[:8]}.tar.gz")
    kit.serve("json.tar.gz")
    write(kit, url)
    result = kit.run("setup", "--skip-build", json_out=True)
    assert result.exit_code == 0, result.output
    assert (kit.ws / f"tools/llvm-{HASH[:8]}/bin/clang").is_file() and (kit.ws / "tools/json/bin/clang").is_file()
    lock = kit.lock()
    assert set(lock["artifacts"]) == {"llvm", "json"} and "artifacts.llvm.match" in lock["reads"]
    again = kit.run("setup", "--skip-build")
    assert again.exit_code == 0, again.output
