"""Published trees know whose they are: `fetch` never silently replaces a tree another recipe or workspace
published (only with `--replace NAME`), never replaces a `shared` one, never removes a published tree inside or
around its destination; `clean --trees` removes only this recipe's own, unused, unshared trees; and `fetch`
goes on past one failed artifact and names every failure at the end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.extract import STAMP_NAME
from tests.support.envelope import result_of
from tests.support.fetching import PATH_SET, URL_PATH, dest, triton_llvm
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball


def run(tmp_path: Path, workspace: str, url: str, *args: str, sets: tuple[str, ...] = ()) -> Result:
    # the default recipe reads its LLVM's name from FlagTree's cmake/llvm-hash.txt after sync: a fetch without a
    # checkout gives the path as it gives the URL (a later --set of the path wins)
    argv = ["-w", str(tmp_path / workspace), "--set", f"artifacts.llvm.url={url}", "--set", PATH_SET]
    for assignment in sets:
        argv += ["--set", assignment]
    return CliRunner().invoke(app, [*argv, *args])


def lock_of(tmp_path: Path, workspace: str) -> dict:
    return yaml.safe_load((tmp_path / workspace / ".flagtree-cpu/lock.yaml").read_text())


def stamp(tree: Path) -> dict:
    return json.loads((tree / STAMP_NAME).read_text())


@pytest.fixture
def urls(http_server: LoopbackHTTPServer) -> dict[str, str]:
    """Two different builds served at two URLs (as two pins of one recipe would be)."""
    return {"one": http_server.serve(URL_PATH, llvm_tarball(seed=1, size_kb=64).data),
            "two": http_server.serve(f"/two/{TOP}.tar.gz", llvm_tarball(seed=2, size_kb=64).data)}


def test_the_stamp_records_the_recipe_workspace_and_digest_that_published_the_tree(tmp_path: Path, urls) -> None:
    assert run(tmp_path, "a", urls["one"], "fetch").exit_code == 0
    owner = stamp(dest())["owner"]
    assert owner["recipe"] == "flagtree-cpu-arm64" and owner["workspace"] == str(tmp_path / "a")
    assert len(owner["recipe_digest"]) == 64 and owner["publish"] == "own"


def test_fetch_refuses_to_replace_a_tree_another_workspace_published_and_names_it(tmp_path: Path, urls) -> None:
    assert run(tmp_path, "a", urls["one"], "fetch").exit_code == 0
    before = stamp(dest())
    refused = run(tmp_path, "b", urls["two"], "fetch")
    assert refused.exit_code == 4, refused.output
    assert f"workspace {tmp_path / 'a'}" in refused.stderr and "--replace llvm" in refused.stderr
    assert stamp(dest()) == before  # left alone: workspace a still has its LLVM
    dry = run(tmp_path, "b", urls["two"], "fetch", "--dry-run")  # the plan says so too, and exits as the run
    assert dry.exit_code == 4 and f"published by recipe flagtree-cpu-arm64 of workspace {tmp_path / 'a'}" in dry.output
    replaced = run(tmp_path, "b", urls["two"], "fetch", "--replace", "llvm")
    assert replaced.exit_code == 0, replaced.output
    assert stamp(dest())["owner"]["workspace"] == str(tmp_path / "b")
    assert stamp(dest())["sha256"] != before["sha256"]


def test_replace_names_an_artifact_of_the_recipe(tmp_path: Path, urls) -> None:
    result = run(tmp_path, "a", urls["one"], "fetch", "--replace", "lvm")
    assert result.exit_code == 2 and "no artifact named 'lvm'" in result.stderr and "llvm" in result.stderr


def test_setup_takes_replace_too(tmp_path: Path, urls) -> None:
    assert run(tmp_path, "a", urls["one"], "fetch").exit_code == 0
    plan = run(tmp_path, "b", urls["two"], "setup", "--dry-run", "--skip-build", "--ignore-host")
    assert plan.exit_code == 4 and f"workspace {tmp_path / 'a'}" in plan.output
    plan = run(tmp_path, "b", urls["two"], "setup", "--dry-run", "--skip-build", "--ignore-host", "--replace", "llvm",
               "--json")
    assert plan.exit_code == 0, plan.output  # no longer a stop: the plan downloads and replaces it
    [item] = [i for i in result_of(plan.stdout)["items"] if i["area"] == "artifacts"]
    assert item["will"] == "updated" and item["owner"]["workspace"] == str(tmp_path / "a")


def test_the_same_bytes_another_workspace_published_are_reused_and_its_clean_leaves_them(tmp_path: Path,
                                                                                          urls) -> None:
    assert run(tmp_path, "a", urls["one"], "fetch").exit_code == 0
    reused = run(tmp_path, "b", urls["one"], "fetch", "--json")
    assert reused.exit_code == 0, reused.output
    [action] = result_of(reused.stdout)["actions"]
    assert action["status"] == "ok"
    assert [u["workspace"] for u in stamp(dest())["users"]] == [str(tmp_path / "b")]
    status = run(tmp_path, "b", urls["one"], "status")  # status names whose the tree is
    assert f"published by recipe flagtree-cpu-arm64 of workspace {tmp_path / 'a'}" in " ".join(status.stdout.split())
    # workspace a moves its pin to another folder: its clean must not take b's LLVM away
    moved = (f"artifacts.llvm.path={{triton_home}}/.triton/llvm/{TOP}-new",)
    assert run(tmp_path, "a", urls["two"], "fetch", sets=moved).exit_code == 0
    cleaned = run(tmp_path, "a", urls["two"], "clean", "--trees", "--json", sets=moved)
    assert cleaned.exit_code == 0, cleaned.output
    item = next(i for i in result_of(cleaned.stdout)["items"] if Path(i["path"]) == dest())
    assert item["removed"] is False and f"also used by recipe flagtree-cpu-arm64 of workspace {tmp_path / 'b'}" \
        in item["reason"]
    assert (dest() / "bin").is_dir()


def test_clean_removes_only_its_own_unused_trees(tmp_path: Path, urls) -> None:
    other = (f"artifacts.llvm.path={{triton_home}}/.triton/llvm/{TOP}-b",)
    old = (f"artifacts.llvm.path={{triton_home}}/.triton/llvm/{TOP}-old",)
    assert run(tmp_path, "b", urls["two"], "fetch", sets=other).exit_code == 0
    assert run(tmp_path, "a", urls["two"], "fetch", sets=old).exit_code == 0
    assert run(tmp_path, "a", urls["one"], "fetch").exit_code == 0
    cleaned = run(tmp_path, "a", urls["one"], "clean", "--trees", "--json")
    assert cleaned.exit_code == 0, cleaned.output
    items = {Path(i["path"]).name: i for i in result_of(cleaned.stdout)["items"]}
    assert items[f"{TOP}-old"]["removed"] is True and not (triton_llvm() / f"{TOP}-old").exists()
    assert items[f"{TOP}-b"]["removed"] is False and f"workspace {tmp_path / 'b'}" in items[f"{TOP}-b"]["reason"]
    assert (triton_llvm() / f"{TOP}-b" / "bin").is_dir()


def test_a_tree_stamped_without_an_owner_is_never_cleaned(tmp_path: Path, urls) -> None:
    old = (f"artifacts.llvm.path={{triton_home}}/.triton/llvm/{TOP}-old",)
    assert run(tmp_path, "a", urls["two"], "fetch", sets=old).exit_code == 0
    tree = triton_llvm() / f"{TOP}-old"
    written = stamp(tree)
    del written["owner"]  # as flagtree-cpu before this change wrote it
    (tree / STAMP_NAME).write_text(json.dumps(written))
    cleaned = run(tmp_path, "a", urls["one"], "clean", "--trees", "--json")
    item = next(i for i in result_of(cleaned.stdout)["items"] if Path(i["path"]) == tree)
    assert item["removed"] is False and f"rm -r {tree}" in item["reason"] and tree.is_dir()


def test_a_shared_tree_with_other_content_is_refused_naming_both_and_never_cleaned(tmp_path: Path, urls) -> None:
    shared = ("artifacts.llvm.publish=shared",)
    assert run(tmp_path, "a", urls["one"], "fetch", sets=shared).exit_code == 0
    assert stamp(dest())["owner"]["publish"] == "shared"
    assert run(tmp_path, "b", urls["one"], "fetch", sets=shared).exit_code == 0  # same digests: reused
    refused = run(tmp_path, "b", urls["two"], "fetch", "--replace", "llvm", sets=shared)
    assert refused.exit_code == 4, refused.output
    assert f"workspace {tmp_path / 'a'}" in refused.stderr and f"workspace {tmp_path / 'b'}" in refused.stderr
    assert "shared tree is never replaced" in refused.stderr
    moved = (*shared, f"artifacts.llvm.path={{triton_home}}/.triton/llvm/{TOP}-new")
    assert run(tmp_path, "a", urls["two"], "fetch", sets=moved).exit_code == 0
    cleaned = run(tmp_path, "a", urls["two"], "clean", "--trees", "--json", sets=moved)
    item = next(i for i in result_of(cleaned.stdout)["items"] if Path(i["path"]) == dest())
    assert item["removed"] is False and "never removed" in item["reason"] and (dest() / "bin").is_dir()


@pytest.mark.parametrize("where", ["around", "inside"])
def test_fetch_never_replaces_or_writes_into_another_published_tree(tmp_path: Path, urls, where: str) -> None:
    assert run(tmp_path, "a", urls["one"], "fetch").exit_code == 0
    before = stamp(dest())
    path = triton_llvm() if where == "around" else dest() / "nested"
    refused = run(tmp_path, "b", urls["two"], "fetch", "--replace", "llvm", sets=(f"artifacts.llvm.path={path}",))
    assert refused.exit_code == 4, refused.output
    assert str(dest()) in refused.stderr and f"workspace {tmp_path / 'a'}" in refused.stderr
    assert stamp(dest()) == before and not (dest() / "nested").exists()


def test_fetch_goes_on_past_a_failed_artifact_and_names_every_failure(tmp_path: Path, urls,
                                                                       http_server: LoopbackHTTPServer) -> None:
    gone = urls["one"].replace(URL_PATH, "/missing/llvm.tar.gz")  # the server answers 404
    extra = (f"artifacts.extra.url={urls['two']}", "artifacts.extra.path={triton_home}/.triton/extra",
             "artifacts.extra.root.strip=1",
             f"artifacts.third.url={gone}x", "artifacts.third.path={triton_home}/.triton/third")
    result = run(tmp_path, "a", gone, "fetch", sets=extra)
    assert result.exit_code == 4, result.output
    assert "2 of 3 artifacts could not be published: llvm, third" in result.stderr
    assert "/missing/llvm.tar.gz" in result.stderr and "/missing/llvm.tar.gzx" in result.stderr
    home = Path(os.environ["HOME"])
    assert (home / ".triton/extra/bin").is_dir()  # the one that could be fetched was
    assert set(lock_of(tmp_path, "a")["artifacts"]) == {"extra"}  # what was published is recorded
