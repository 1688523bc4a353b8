"""`Source.ref_from`: a source at the tag or branch another source's file names (googletest's `GIT_TAG v1.17.0` in
a CMake file), resolved to a commit once and locked (the file, the commit it was read at, the name, the commit it
resolved to); --frozen and --offline take the lock's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_source_reads import Kit, advance, make_repo, write_sources
from tests.integration.test_source_reads import kit as kit  # noqa: F401 (the fixture)
from tests.support.envelope import result_of
from tests.support.gitworld import git

RULE = {"source": "triton", "file": "unittest/googletest.cmake", "regex": r"GIT_TAG\s+(\S+)"}


def gtest_world(kit: Kit) -> tuple[dict[str, Any], Path, dict[str, str], dict[str, str]]:
    """A googletest with tags v1.16.0 and v1.17.0, and a triton whose CMake file names v1.16.0."""
    gt_url, gt_work, gt_env = make_repo(kit.root / "gtest", {"README": "gtest 1.16\n"})
    git("tag", "v1.16.0", cwd=gt_work, env=gt_env)
    second = advance(gt_work, gt_env, {"README": "gtest 1.17\n"})
    git("tag", "v1.17.0", cwd=gt_work, env=gt_env)
    advance(gt_work, gt_env, {"README": "gtest main moved on\n"})  # the branch tip is neither tag
    git("push", "--quiet", "--tags", "origin", cwd=gt_work, env=gt_env)
    tags = {"v1.16.0": git("rev-parse", "v1.16.0^{commit}", cwd=gt_work, env=gt_env), "v1.17.0": second}
    tr_url, tr_work, tr_env = make_repo(kit.root / "triton", {
        "unittest/googletest.cmake": "FetchContent_Declare(\n  googletest\n  GIT_TAG v1.16.0\n)\n"})
    sources = {"googletest": {"url": gt_url, "ref_from": RULE}, "triton": {"url": tr_url, "ref": "main"}}
    return sources, tr_work, tr_env, tags


def test_a_source_at_the_tag_another_sources_file_names_is_resolved_once_and_locked(kit: Kit) -> None:
    sources, tr_work, tr_env, tags = gtest_world(kit)
    write_sources(kit, sources)
    dry = kit.run("sync", "--dry-run", json_out=True)
    item = next(i for i in result_of(dry.stdout)["items"] if i["subject"] == "googletest")
    assert item["will"] == "created" and "unittest/googletest.cmake" in item["reason"], item
    result = kit.run("sync")
    assert result.exit_code == 0, result.stderr
    assert git("rev-parse", "HEAD", cwd=kit.ws / "googletest") == tags["v1.16.0"]
    lock = kit.lock()
    assert lock["lock_version"] == 2
    assert lock["sources"]["googletest"] | {"submodules": None, "patches": None} == {
        "url": sources["googletest"]["url"], "ref": "v1.16.0", "commit": tags["v1.16.0"], "resolved_from": "read",
        "submodules": None, "patches": None}
    assert lock["reads"]["sources.googletest.ref"] == {
        "source": "triton", "file": "unittest/googletest.cmake", "commit": lock["sources"]["triton"]["commit"],
        "value": "v1.16.0"}
    assert kit.run("sync", "--frozen").exit_code == 0
    assert kit.run("sync", "--offline").exit_code == 0  # the lock answers: no server asked
    before = kit.lock()
    assert kit.run("lock").exit_code == 0 and kit.lock() == before  # `lock` resolves it the same way
    advance(tr_work, tr_env, {"unittest/googletest.cmake": "  GIT_TAG v1.17.0\n"})  # triton bumps googletest
    moved = kit.run("sync", "--update")
    assert moved.exit_code == 0, moved.stderr
    assert git("rev-parse", "HEAD", cwd=kit.ws / "googletest") == tags["v1.17.0"]
    assert kit.lock()["reads"]["sources.googletest.ref"]["value"] == "v1.17.0"
    assert kit.lock()["sources"]["googletest"]["ref"] == "v1.17.0"


def test_a_frozen_sync_refuses_a_tag_the_lock_did_not_resolve(kit: Kit) -> None:
    sources, _tr_work, _tr_env, _tags = gtest_world(kit)
    write_sources(kit, sources)
    assert kit.run("sync").exit_code == 0
    # the lock was resolved for another tag than the file names (an older lock kept beside the recipe)
    lock_file = kit.ws / ".flagtree-cpu/lock.yaml"
    lock_file.write_text(lock_file.read_text().replace("ref: v1.16.0", "ref: v1.15.0"))
    frozen = kit.run("sync", "--frozen")
    assert frozen.exit_code == 3
    text = " ".join(frozen.stderr.split())
    assert "'v1.15.0'" in text and "names 'v1.16.0'" in text and "--frozen" in text, text
    offline = kit.run("sync", "--offline")  # only the server could say what v1.16.0 is now
    assert offline.exit_code == 3 and "--offline forbids it" in " ".join(offline.stderr.split())


@pytest.mark.parametrize("content, said", [
    ("GIT_TAG --upload-pack=touch\n", "not a branch or tag name"),
    ("GIT_TAG ../../x\n", "not a branch or tag name"),
    ("GIT_TAG v9.9.9\n", "has no branch or tag 'v9.9.9'"),
    ("nothing here\n", "has nothing matching"),
])
def test_a_file_that_names_no_usable_ref_stops_sync_naming_the_file(kit: Kit, content: str, said: str) -> None:
    sources, tr_work, tr_env, _tags = gtest_world(kit)
    advance(tr_work, tr_env, {"unittest/googletest.cmake": content})
    write_sources(kit, sources)
    result = kit.run("sync")
    assert result.exit_code == 3, result.output
    text = " ".join(result.stderr.split())
    assert said in text and "googletest" in text, text
    assert not (kit.ws / "googletest").exists()


@pytest.mark.parametrize("change, said", [
    ({"ref": "main"}, "give `ref_from` alone"),
    ({"commit_from": {"source": "triton", "file": "x"}}, "give `ref_from` alone"),
    ({"ref_from": {"source": "googletest", "file": "x"}}, "cannot be read from googletest"),
    ({"ref_from": {"source": "trito", "file": "x"}}, "did you mean 'triton'?"),
    ({"ref_from": {"source": "triton", "file": "x", "regex": "x", "json_path": "a"}}, "give one of"),
])
def test_a_ref_from_that_cannot_work_is_a_located_recipe_problem(kit: Kit, change: dict[str, Any],
                                                                 said: str) -> None:
    write_sources(kit, {"googletest": {"url": "https://example.invalid/gt.git", "ref_from": RULE, **change},
                        "triton": {"url": "https://example.invalid/triton.git", "ref": "main"}})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    assert "sources.googletest" in result.output
