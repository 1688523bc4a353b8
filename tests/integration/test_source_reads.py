"""Values an artifact reads from a synced source's files (schema v3): `{match}` / `{match.NAME}` in its url, path and
digest, from one `matches` rule or a list (`as:`, a regex's named groups, json_path, chars); the lock records each
value read; plans say the value, or "read from FILE after sync"; setup fetches such an artifact after the sources.

A checkout here is either a file written in place (fetch only reads it) or a real bare repository (sync, setup)."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import result_of
from tests.support.gitworld import commit_all, git, git_env, publish_bare
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import tarball_with

HOST = platform.machine()
HASH = "a66376b0dc3b2ea8a84fda26faca287980986f78"
TOOL = {"llvm/bin/clang": b"#!/bin/sh\necho clang\n", "llvm/include/llvm.h": b"// llvm\n"}


class Kit:
    """A workspace, a recipe with one artifact `llvm` and one source `triton`, and the server the LLVM comes from."""

    def __init__(self, root: Path, server: LoopbackHTTPServer) -> None:
        self.root, self.server = root, server
        self.ws = root / "ws"
        self.recipe = root / "reads.yaml"

    def serve(self, name: str, files: dict[str, bytes] | None = None) -> tuple[str, str]:
        """The URL of a tarball served as ``name`` and its sha256."""
        archive = tarball_with(files or TOOL)
        return self.server.serve(f"/llvm/{name}", archive.data), archive.sha256

    @property
    def base(self) -> str:
        return self.server.url("/llvm/")

    def write(self, artifact: dict[str, Any], source: dict[str, Any] | None = None, **extra: Any) -> Path:
        data = {"schema_version": 2, "name": "reads-fixture", "platform": {"host": {"arch": [HOST]}},
                "sources": {"triton": source or {"url": "https://example.invalid/triton.git", "ref": "main"}},
                "artifacts": {"llvm": {"kind": "tarball", "root": {"strip": 1}, **artifact}}, **extra}
        self.recipe.write_text(json.dumps(data, indent=1))  # JSON is YAML
        return self.recipe

    def checkout(self, rel: str, text: str) -> Path:
        """A file of the source's checkout, written in place (no clone: fetch only reads it)."""
        path = self.ws / "triton" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def run(self, *args: str, json_out: bool = False) -> Result:
        return CliRunner().invoke(app, ["-w", str(self.ws), "--recipe", str(self.recipe),
                                        *(["--json"] if json_out else []), *args])

    def lock(self) -> dict[str, Any]:
        return yaml.safe_load((self.ws / ".flagtree-cpu/lock.yaml").read_text())


@pytest.fixture
def kit(tmp_path: Path, http_server: LoopbackHTTPServer) -> Kit:
    return Kit(tmp_path, http_server)


HASH_RULE = {"source": "triton", "file": "cmake/llvm-hash.txt", "chars": 8}


# --- {match}: the url and path read from the file ---------------------------------------------------------------


def test_a_url_and_path_templated_from_a_hash_file_fetch_the_tarball_the_file_names(kit: Kit) -> None:
    kit.checkout("cmake/llvm-hash.txt", HASH + "\n")
    url, sha = kit.serve(f"llvm-{HASH[:8]}-ubuntu.tar.gz")
    kit.write({"url": kit.base + "llvm-{match}-ubuntu.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE})
    result = kit.run("fetch")
    assert result.exit_code == 0, result.stderr
    assert (kit.ws / f"tools/llvm-{HASH[:8]}/bin/clang").is_file()
    lock = kit.lock()
    assert lock["artifacts"]["llvm"]["url"] == url and lock["artifacts"]["llvm"]["sha256"] == sha
    assert lock["reads"]["artifacts.llvm.match"] == {"source": "triton", "file": "cmake/llvm-hash.txt",
                                                     "commit": None, "value": HASH[:8]}  # no sync: no commit known


def test_a_list_of_rules_reads_the_hash_the_build_number_and_the_digest_from_llvm_info_json(kit: Kit) -> None:
    """triton-cpu's cmake/llvm-info.json: llvm_hash (the URL carries 8 characters), build_number, a sha256 per
    suffix; every value of the LLVM artifact comes from it."""
    url, sha = kit.serve(f"llvm-{HASH[:8]}-ubuntu-x64-2.tar.gz")
    kit.checkout("cmake/llvm-info.json", json.dumps({"llvm_hash": HASH, "build_number": 2,
                                                     "sha256sum": {"ubuntu-x64": sha}}))
    info = {"source": "triton", "file": "cmake/llvm-info.json"}
    kit.write({"url": kit.base + "llvm-{match.hash}-ubuntu-x64-{match.build}.tar.gz",
               "path": "tools/llvm-{match.hash}-ubuntu-x64-{match.build}",
               "digest": {"sha256": "{match.ubuntu_x64}"},
               "matches": [{**info, "json_path": "llvm_hash", "chars": 8, "as": "hash"},
                           {**info, "json_path": "build_number", "as": "build"},
                           {**info, "json_path": "sha256sum.ubuntu-x64", "as": "ubuntu_x64"}]})
    result = kit.run("fetch", "--require-hashes")  # the digest read from the file counts as stated
    assert result.exit_code == 0, result.stderr
    assert (kit.ws / f"tools/llvm-{HASH[:8]}-ubuntu-x64-2/bin/clang").is_file()
    assert kit.lock()["artifacts"]["llvm"]["url"] == url


def test_a_digest_read_from_the_file_that_the_download_does_not_have_is_refused(kit: Kit) -> None:
    kit.serve(f"llvm-{HASH[:8]}.tar.gz")
    kit.checkout("cmake/llvm-info.json", json.dumps({"llvm_hash": HASH, "sha": "0" * 64}))
    info = {"source": "triton", "file": "cmake/llvm-info.json"}
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm", "digest": {"sha256": "{match.sha}"},
               "matches": [{**info, "json_path": "llvm_hash", "chars": 8}, {**info, "json_path": "sha", "as": "sha"}]})
    result = kit.run("fetch")
    assert result.exit_code == 4 and "0" * 64 in result.stderr
    assert not (kit.ws / "tools/llvm").exists()


def test_a_regex_rule_names_its_groups_as_placeholders(kit: Kit) -> None:
    kit.checkout("cmake/nvidia.cmake", 'set(PTXAS_VERSION "12.8.93")\n')
    kit.serve("ptxas-12.8.93-linux.tar.gz")
    kit.write({"url": kit.base + "ptxas-{match.major}.{match.minor}.{match.patch}-linux.tar.gz",
               "path": "tools/ptxas-{match}",
               "matches": {"source": "triton", "file": "cmake/nvidia.cmake",
                           "regex": r'PTXAS_VERSION "((?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+))"'}})
    result = kit.run("fetch")
    assert result.exit_code == 0, result.stderr
    assert (kit.ws / "tools/ptxas-12.8.93/bin/clang").is_file()


def test_a_recipe_that_pins_the_literal_value_is_still_checked_against_the_file(kit: Kit) -> None:
    """No placeholder uses the rule: it checks the URL, as before v3, and says how to read the value instead."""
    kit.checkout("cmake/llvm-hash.txt", HASH)
    url, _ = kit.serve("llvm-deadbeef.tar.gz")
    kit.write({"url": url, "path": "tools/llvm", "matches": HASH_RULE})
    result = kit.run("fetch")
    assert result.exit_code == 4 and f"asks for '{HASH[:8]}'" in result.stderr
    assert "{match}" in result.stderr and kit.server.requests == []


def test_a_url_written_out_over_a_path_that_reads_is_checked_against_the_file(kit: Kit) -> None:
    """`--set artifacts.llvm.url=...` on a recipe whose path reads {match}: the path would name the build the file
    asks for while the URL downloads another, so the rule checks the URL, as a pinned URL is checked."""
    kit.checkout("cmake/llvm-hash.txt", HASH)
    url, _ = kit.serve("llvm-deadbeef.tar.gz")
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE})
    result = kit.run("--set", f"artifacts.llvm.url={url}", "fetch")
    assert result.exit_code == 4 and f"asks for '{HASH[:8]}'" in result.stderr and "llvm-deadbeef" in result.stderr
    assert kit.server.requests == [] and not (kit.ws / "tools").exists()


# --- hostile files --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, said", [
    ("../../../etc/x\n", "not a plain name"),
    ("a/b\n", "not a plain name"),
])
def test_a_value_that_is_not_a_plain_name_is_refused_before_any_download(kit: Kit, text: str, said: str) -> None:
    kit.checkout("cmake/llvm-hash.txt", text)
    kit.serve("llvm-x.tar.gz")
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}",
               "matches": {**HASH_RULE, "regex": r"^(.*)$", "chars": None}})
    result = kit.run("fetch")
    assert result.exit_code == 4, result.stderr
    assert said in result.stderr and "cmake/llvm-hash.txt" in result.stderr
    assert kit.server.requests == [] and not (kit.root / "etc").exists() and not (kit.ws / "tools").exists()


def test_a_file_that_links_out_of_the_checkout_is_not_read(kit: Kit) -> None:
    outside = kit.root / "secret.txt"
    outside.write_text(HASH)
    link = kit.ws / "triton/cmake/llvm-hash.txt"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE})
    result = kit.run("fetch")
    assert result.exit_code == 4 and "outside the checkout" in result.stderr
    assert kit.server.requests == []


def test_a_fifo_where_the_file_should_be_is_refused_without_hanging(kit: Kit) -> None:
    import os

    fifo = kit.ws / "triton/cmake/llvm-hash.txt"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE})
    result = kit.run("fetch")
    assert result.exit_code == 4 and "cmake/llvm-hash.txt" in result.stderr and "FIFO" in result.stderr


# --- the recipe's own mistakes: located, exit 2 ------------------------------------------------------------------


@pytest.mark.parametrize("artifact, said", [
    ({"url": "https://x.invalid/llvm-{match.hsh}.tar.gz", "matches": {**HASH_RULE, "as": "hash"}},
     "{match.hsh} is not captured by any of the artifact's matches rules (did you mean 'hash'?)"),
    ({"url": "https://x.invalid/llvm-{match}.tar.gz"}, "{match} reads a source's file, but the artifact has no"),
    ({"url": "https://x.invalid/llvm.tar.gz", "digest": {"sha256": "{match.sha}"}, "matches": HASH_RULE},
     "{match.sha} is not captured"),
    ({"url": "https://x.invalid/llvm.tar.gz", "matches": [{**HASH_RULE, "as": "h"}, {**HASH_RULE, "as": "h"}]},
     "{match.h} is captured twice"),
    ({"url": "https://x.invalid/llvm.tar.gz", "matches": {**HASH_RULE, "as": "no-dash"}}, "does not match"),
])
def test_a_match_placeholder_the_rules_do_not_capture_is_a_located_recipe_problem(kit: Kit, artifact: dict[str, Any],
                                                                                  said: str) -> None:
    kit.write({"path": "tools/llvm", **artifact})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert said in text and "reads.yaml:" in text and "artifacts.llvm" in text


def test_a_match_placeholder_outside_an_artifact_is_an_unknown_placeholder(kit: Kit) -> None:
    kit.write({"url": "https://x.invalid/llvm-{match}.tar.gz", "path": "tools/llvm", "matches": HASH_RULE},
              build={"argv": ["true"], "env": {"set": {"LLVM": "{match}"}}})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2 and "unknown placeholder {match}" in result.output


# --- plans, the lock, changes --------------------------------------------------------------------------------


def test_fetch_before_the_source_is_checked_out_says_it_reads_the_file_after_sync(kit: Kit) -> None:
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE})
    dry = kit.run("fetch", "--dry-run", json_out=True)
    [item] = [i for i in result_of(dry.stdout)["items"] if i["area"] == "artifacts"]
    assert item["will"] == "stop" and "read from triton's cmake/llvm-hash.txt after sync" in item["reason"]
    result = kit.run("fetch")
    assert result.exit_code == 3, result.stderr
    text = " ".join(result.stderr.split())
    assert "triton's cmake/llvm-hash.txt" in text and "reads.yaml sync, then fetch again" in text
    assert kit.server.requests == [] and not (kit.ws / "tools").exists()


def make_repo(root: Path, files: dict[str, str]) -> tuple[str, Path, dict[str, str]]:
    """A bare repository holding ``files`` on main: its URL, a work tree to commit more, and git's environment."""
    env = git_env(root / "home")
    (root / "home").mkdir(parents=True, exist_ok=True)
    work = root / "work"
    work.mkdir(parents=True)
    git("init", "--quiet", "-b", "main", cwd=work, env=env)
    write_files(work, files)
    commit_all(work, "first", env)
    publish_bare(work, root / "bare.git", env)
    git("remote", "add", "origin", root / "bare.git", cwd=work, env=env)
    return (root / "bare.git").as_uri(), work, env


def write_files(work: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)


def advance(work: Path, env: dict[str, str], files: dict[str, str]) -> str:
    write_files(work, files)
    commit = commit_all(work, "later", env)
    git("push", "--quiet", "origin", "HEAD:main", cwd=work, env=env)
    return commit


def test_sync_records_the_value_read_and_frozen_refuses_a_changed_one(kit: Kit) -> None:
    url, work, env = make_repo(kit.root / "repo", {"cmake/llvm-hash.txt": HASH + "\n"})
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE},
              source={"url": url, "ref": "main"})
    result = kit.run("sync")
    assert result.exit_code == 0, result.stderr
    lock = kit.lock()
    commit = lock["sources"]["triton"]["commit"]
    assert lock["reads"] == {"artifacts.llvm.match": {"source": "triton", "file": "cmake/llvm-hash.txt",
                                                      "commit": commit, "value": HASH[:8]}}
    advance(work, env, {"cmake/llvm-hash.txt": "0123456789abcdef\n"})
    frozen = kit.run("sync", "--update", "--frozen")
    assert frozen.exit_code == 3
    moved = kit.run("sync", "--update")
    assert moved.exit_code == 0, moved.stderr
    assert "01234567 read from triton's cmake/llvm-hash.txt (was a66376b0)" in " ".join(moved.stderr.split())
    assert kit.lock()["reads"]["artifacts.llvm.match"]["value"] == "01234567"
    assert kit.run("sync", "--frozen").exit_code == 0


def test_setup_fetches_an_artifact_that_reads_a_source_after_that_source(kit: Kit) -> None:
    """On a fresh workspace the file is not there when setup starts: the dry run says it is read after sync, and
    setup syncs first, reads the hash, then downloads the LLVM it names."""
    url, _work, _env = make_repo(kit.root / "repo", {"cmake/llvm-hash.txt": HASH + "\n"})
    kit.serve(f"llvm-{HASH[:8]}.tar.gz")
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE},
              source={"url": url, "ref": "main"})
    dry = kit.run("setup", "--dry-run", "--skip-build", json_out=True)
    [item] = [i for i in result_of(dry.stdout)["items"] if i["area"] == "artifacts"]
    assert item["will"] == "created" and item["reason"] == "read from triton's cmake/llvm-hash.txt after sync"
    result = kit.run("setup", "--skip-build")
    assert result.exit_code == 0, result.stderr
    assert (kit.ws / f"tools/llvm-{HASH[:8]}/bin/clang").is_file()
    assert kit.lock()["reads"]["artifacts.llvm.match"]["value"] == HASH[:8]


def test_the_plan_shows_the_value_read_and_a_changed_value_as_a_change(kit: Kit) -> None:
    url, _work, _env = make_repo(kit.root / "repo", {"cmake/llvm-hash.txt": HASH + "\n"})
    kit.serve(f"llvm-{HASH[:8]}.tar.gz")
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE},
              source={"url": url, "ref": "main"})
    assert kit.run("sync").exit_code == 0
    kit.checkout("cmake/llvm-hash.txt", "0123456789abcdef")  # the user's edit in the checkout
    dry = kit.run("fetch", "--dry-run", json_out=True)
    [item] = [i for i in result_of(dry.stdout)["items"] if i["area"] == "artifacts"]
    assert "{match} = 01234567 read from triton's cmake/llvm-hash.txt, was a66376b0" in item["detail"]
    assert "read value changed: {match} a66376b0 -> 01234567" in item["reason"]
    assert item["reads"]["values"][0]["was"] == HASH[:8]


# --- commit_from: a source's commit read from another source's file ----------------------------------------------


def two_repos(kit: Kit) -> tuple[dict[str, Any], Path, dict[str, str], list[str]]:
    """An `llvm-project` with two commits, and a `flagtree` whose cmake/llvm-hash.txt names the first; the recipe's
    sources (llvm-project written first: the order comes from commit_from, not from the file)."""
    llvm_url, llvm_work, env = make_repo(kit.root / "llvm", {"README": "llvm 1\n"})
    llvm_commits = [git("rev-parse", "HEAD", cwd=llvm_work, env=env), advance(llvm_work, env, {"README": "llvm 2\n"})]
    ft_url, ft_work, ft_env = make_repo(kit.root / "flagtree", {"cmake/llvm-hash.txt": llvm_commits[0] + "\n"})
    sources = {"llvm-project": {"url": llvm_url, "commit_from": {"source": "flagtree", "file": "cmake/llvm-hash.txt"}},
               "flagtree": {"url": ft_url, "ref": "main"}}
    return sources, ft_work, ft_env, llvm_commits


def write_sources(kit: Kit, sources: dict[str, Any]) -> None:
    data = {"schema_version": 2, "name": "reads-fixture", "platform": {"host": {"arch": [HOST]}}, "sources": sources}
    kit.recipe.write_text(json.dumps(data, indent=1))


def test_a_source_at_the_commit_another_sources_file_names_follows_that_file(kit: Kit) -> None:
    sources, ft_work, ft_env, llvm_commits = two_repos(kit)
    write_sources(kit, sources)
    dry = kit.run("sync", "--dry-run", json_out=True)
    item = next(i for i in result_of(dry.stdout)["items"] if i["subject"] == "llvm-project")
    assert item["will"] == "created" and item["reason"] == "commit read from flagtree's cmake/llvm-hash.txt"
    result = kit.run("sync")
    assert result.exit_code == 0, result.stderr
    assert git("rev-parse", "HEAD", cwd=kit.ws / "llvm-project") == llvm_commits[0]
    lock = kit.lock()
    assert lock["sources"]["llvm-project"]["resolved_from"] == "read"
    assert lock["reads"]["sources.llvm-project.commit"] == {
        "source": "flagtree", "file": "cmake/llvm-hash.txt", "commit": lock["sources"]["flagtree"]["commit"],
        "value": llvm_commits[0]}
    advance(ft_work, ft_env, {"cmake/llvm-hash.txt": llvm_commits[1] + "\n"})  # FlagTree bumps its LLVM
    moved = kit.run("sync", "--update")
    assert moved.exit_code == 0, moved.stderr
    assert git("rev-parse", "HEAD", cwd=kit.ws / "llvm-project") == llvm_commits[1]
    assert kit.lock()["reads"]["sources.llvm-project.commit"]["value"] == llvm_commits[1]
    assert kit.run("sync", "--frozen").exit_code == 0


def test_a_file_that_names_no_commit_stops_sync_naming_the_file(kit: Kit) -> None:
    sources, ft_work, ft_env, _commits = two_repos(kit)
    advance(ft_work, ft_env, {"cmake/llvm-hash.txt": "main; rm -rf /\n"})
    write_sources(kit, sources)
    result = kit.run("sync")
    assert result.exit_code == 3
    text = " ".join(result.stderr.split())
    assert "sources.llvm-project.commit_from: flagtree's cmake/llvm-hash.txt gives" in text
    assert "is not a commit id" in text and not (kit.ws / "llvm-project").exists()


@pytest.mark.parametrize("change, said", [
    ({"commit": "0" * 40}, "give `commit` or `commit_from`, not both"),
    ({"commit_from": {"source": "llvm-project", "file": "x"}}, "cannot be read from llvm-project"),
    ({"commit_from": {"source": "flagtre", "file": "x"}}, "did you mean 'flagtree'?"),
])
def test_a_commit_from_that_cannot_work_is_a_located_recipe_problem(kit: Kit, change: dict[str, Any],
                                                                    said: str) -> None:
    write_sources(kit, {"llvm-project": {"url": "https://example.invalid/llvm.git",
                                         "commit_from": {"source": "flagtree", "file": "cmake/llvm-hash.txt"},
                                         **change},
                        "flagtree": {"url": "https://example.invalid/flagtree.git", "ref": "main"}})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2 and said in " ".join(result.output.split())
    assert "sources.llvm-project" in result.output


def test_without_the_checkout_the_lock_gives_the_values_it_recorded_and_a_hostile_one_is_refused(kit: Kit) -> None:
    """A workspace whose checkout is gone (or not made yet, as after a bundle's lock): the plan takes the values the
    lock recorded at the commit the source is at; a lock edited to climb out of a folder is refused."""
    url, _work, _env = make_repo(kit.root / "repo", {"cmake/llvm-hash.txt": HASH + "\n"})
    kit.serve(f"llvm-{HASH[:8]}.tar.gz")
    kit.write({"url": kit.base + "llvm-{match}.tar.gz", "path": "tools/llvm-{match}", "matches": HASH_RULE},
              source={"url": url, "ref": "main"})
    assert kit.run("setup", "--skip-build").exit_code == 0
    shutil.rmtree(kit.ws / "triton")
    dry = kit.run("fetch", "--dry-run", json_out=True)
    [item] = [i for i in result_of(dry.stdout)["items"] if i["area"] == "artifacts"]
    assert item["will"] == "ok", item
    assert "{match} = a66376b0 as the lock recorded it from triton's cmake/llvm-hash.txt" in item["detail"]
    lock_file = kit.ws / ".flagtree-cpu/lock.yaml"
    lock = yaml.safe_load(lock_file.read_text())
    lock["reads"]["artifacts.llvm.match"]["value"] = "../../../escape"
    lock_file.write_text(yaml.safe_dump(lock))
    result = kit.run("fetch")
    assert result.exit_code == 4 and "not a plain name" in result.stderr and "reads.artifacts.llvm.match" in \
        result.stderr
    assert not (kit.root / "escape").exists()
