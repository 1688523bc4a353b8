"""`Patch.when`: a patch applies only on the hosts (and variants) its selector matches (triton-ascend's stdc++fs
patch only below GCC 9.4). One that does not hold is not applied, and the plan and sync say why; one applied
earlier, on a run where it held, is taken back like a patch removed from the recipe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.test_source_reads import HOST, Kit, make_repo
from tests.integration.test_source_reads import kit as kit  # noqa: F401 (the fixture)
from tests.support.envelope import result_of
from tests.support.gitworld import git

PATCH = "--- a/core.c\n+++ b/core.c\n@@ -1 +1 @@\n-int answer = 41;\n+int answer = 42;\n"


def write(kit: Kit, url: str, when: dict[str, Any]) -> None:
    data = {"schema_version": 2, "name": "patch-when", "platform": {"host": {"arch": [HOST]}},
            "sources": {"triton": {"url": url, "ref": "main",
                                   "patches": [{"file": "patches/fs.patch", "from": "triton", "when": when}]}}}
    kit.recipe.write_text(json.dumps(data, indent=1))


def test_a_patch_whose_when_does_not_hold_is_not_applied_and_one_applied_before_is_taken_back(kit: Kit) -> None:
    url, _work, _env = make_repo(kit.root / "repo", {"core.c": "int answer = 41;\n", "patches/fs.patch": PATCH})
    core = kit.ws / "triton" / "core.c"
    write(kit, url, {"arch": [HOST]})
    assert kit.run("sync").exit_code == 0
    assert core.read_text() == "int answer = 42;\n"
    assert [p["file"] for p in kit.lock()["sources"]["triton"]["patches"]] == ["triton:patches/fs.patch"]
    write(kit, url, {"os_id": ["no-such-os"]})  # the same workspace on a host the patch is not for
    dry = kit.run("sync", "--dry-run", json_out=True)
    item = next(i for i in result_of(dry.stdout)["items"] if i["subject"] == "triton")
    assert "patch triton:patches/fs.patch not applied: its `when` does not hold here" in item["detail"], item
    result = kit.run("sync")
    assert result.exit_code == 0, result.stderr
    assert core.read_text() == "int answer = 41;\n"  # taken back
    assert "not applied: its `when` does not hold here" in " ".join(result.stderr.split()) + result.stdout
    assert kit.lock()["sources"]["triton"]["patches"] == []
    assert git("status", "--porcelain", cwd=kit.ws / "triton") == ""


def test_a_patch_when_that_names_an_unknown_key_is_a_located_recipe_problem(kit: Kit, tmp_path: Path) -> None:
    write(kit, "https://example.invalid/t.git", {"arhc": [HOST]})
    result = kit.run("recipe", "validate", str(kit.recipe))
    assert result.exit_code == 2 and "sources.triton.patches[0].when" in result.output
    assert "did you mean 'arch'?" in result.output
