"""`flagtree-cpu sync` and `lock` against real git repositories — and the user's work is never lost."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from flagtree_cpu_build.context import ContextRequest, open_context
from flagtree_cpu_build.lockfile import read_lock
from flagtree_cpu_build.partials import PartialFolder
from flagtree_cpu_build.stagekit.stage import RunOptions
from flagtree_cpu_build.stages.registry import plan_stage, stage_named
from flagtree_cpu_build.stages.sources.sync import run_sync
from flagtree_cpu_build.ui import UI
from tests.support.cli import Workspace, new_workspace
from tests.support.fixes import without_context
from tests.support.gitworld import GitWorld, git
from tests.support.httpserver import Faults
from tests.support.leftovers import killed_partial


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path) -> Workspace:
    return new_workspace(world, tmp_path / "ws")


def synced(ws: Workspace, *args: str) -> Workspace:
    result = ws.run("sync", *args)
    assert result.exit_code == 0, result.stderr
    return ws


# --- fresh sync, no-op, pins ---------------------------------------------------------------------


def test_fresh_sync_clones_nested_sources_at_their_pins(ws: Workspace) -> None:
    result = ws.run("sync")
    assert result.exit_code == 0, result.stderr
    world = ws.world
    assert ws.head(ws.flagtree) == world["flagtree"].commits["cpu-backend"]
    # flagtree-cpu follows `main`: resolved once, to the branch tip
    assert ws.head(ws.flagtree_cpu) == world["flagtree-cpu"].commits["v33"]
    # sleef at the gitlink flagtree-cpu records, not at sleef's newer tip
    assert ws.head(ws.flagtree_cpu / "third_party/sleef") == world["sleef"].commits["first"]
    # origin is the recipe's URL even though git's insteadOf rule fetched from the world
    assert git("config", "remote.origin.url", cwd=ws.flagtree, env=world.env) == \
        "https://github.com/flagos-ai/FlagTree.git"
    assert "compatibility checks" in result.stderr and "created" in result.stderr
    assert not list(ws.flagtree.parent.glob(".*partial*"))


def test_lock_records_every_commit(ws: Workspace) -> None:
    synced(ws)
    lock = yaml.safe_load(ws.lock_file.read_text())
    world = ws.world
    assert lock["recipe"] == "flagtree-cpu-arm64" and len(lock["recipe_digest"]) == 64
    assert lock["sources"]["flagtree"]["commit"] == world["flagtree"].commits["cpu-backend"]
    assert lock["sources"]["flagtree"]["resolved_from"] == "recipe"
    cpu = lock["sources"]["flagtree-cpu"]
    assert (cpu["ref"], cpu["commit"], cpu["resolved_from"]) == ("main", world["flagtree-cpu"].commits["v33"], "ref")
    assert cpu["submodules"] == [{"path": "third_party/sleef", "url": "https://github.com/shibatch/sleef",
                                  "commit": world["sleef"].commits["first"]}]


def test_resync_is_a_no_op_without_network(ws: Workspace) -> None:
    synced(ws)
    before = ws.lock_file.stat().st_mtime_ns
    ws.world.stop()  # any fetch, clone or ls-remote would now fail
    result = ws.run("sync")  # how fast: bench_sync (no-op sync)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count(" ok ") >= 2 and "created" not in result.stderr and "updated" not in result.stderr
    assert ws.lock_file.stat().st_mtime_ns == before  # nothing changed, nothing rewritten


def test_moving_the_pin_fetches_the_new_commit(ws: Workspace) -> None:
    synced(ws)
    new = ws.world.advance("flagtree", "triton_v3.3.x", "docs/new.md", "a fix upstream\n")
    result = ws.run("sync", sets=(f"sources.flagtree.commit={new}",))
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree) == new
    assert "moved" in result.stderr
    # the nested checkout and its submodule were left in place
    assert ws.head(ws.flagtree_cpu) == ws.world["flagtree-cpu"].commits["v33"]


def test_lock_is_reused_until_update(ws: Workspace) -> None:
    synced(ws)
    newer = ws.world.advance("flagtree-cpu", "main", "README.md", "main moved on\n")
    kept = ws.run("sync")
    assert kept.exit_code == 0, kept.stderr
    assert ws.head(ws.flagtree_cpu) == ws.world["flagtree-cpu"].commits["v33"]  # the lock wins
    updated = ws.run("sync", "--update")
    assert updated.exit_code == 0, updated.stderr
    assert ws.head(ws.flagtree_cpu) == newer
    assert yaml.safe_load(ws.lock_file.read_text())["sources"]["flagtree-cpu"]["commit"] == newer


def test_frozen_without_a_lock_fails_before_touching_anything(ws: Workspace) -> None:
    result = ws.run("sync", "--frozen")
    assert result.exit_code == 3
    assert "--frozen: the lock file does not match the recipe" in result.stderr
    assert "flagtree: the lock records nothing" in result.stderr
    assert "flagtree-cpu: follows 'main' and the lock has no entry" in result.stderr
    assert "flagtree-cpu lock" in without_context(result.stderr)
    assert not ws.flagtree.exists() and not ws.lock_file.exists()


def test_frozen_fails_when_the_recipe_pin_disagrees_with_the_lock(ws: Workspace) -> None:
    synced(ws)
    tip = ws.world["flagtree"].commits["tip"]
    result = ws.run("sync", "--frozen", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 3
    assert "flagtree: the lock records" in result.stderr and "the recipe pins" in result.stderr
    assert ws.head(ws.flagtree) == ws.world["flagtree"].commits["cpu-backend"]


def test_frozen_with_a_matching_lock_works_offline(ws: Workspace) -> None:
    synced(ws)
    ws.world.stop()
    result = ws.run("sync", "--frozen", "--offline")
    assert result.exit_code == 0, result.stderr


def test_lock_command_resolves_without_checking_out(ws: Workspace) -> None:
    result = ws.run("lock")
    assert result.exit_code == 0, result.stderr
    lock = yaml.safe_load(ws.lock_file.read_text())
    assert lock["sources"]["flagtree-cpu"]["commit"] == ws.world["flagtree-cpu"].commits["v33"]
    assert not ws.flagtree.exists()
    # the sync that follows uses the lock instead of resolving again
    ws.world.advance("flagtree-cpu", "main", "README.md", "moved\n")
    synced(ws)
    assert ws.head(ws.flagtree_cpu) == ws.world["flagtree-cpu"].commits["v33"]


def test_offline_sync_of_a_missing_checkout_is_refused(ws: Workspace) -> None:
    ws.run("lock")
    result = ws.run("sync", "--offline")
    assert result.exit_code == 3
    assert "--offline forbids cloning" in result.stderr


def test_submodule_moved_by_hand_is_put_back_to_its_gitlink(ws: Workspace) -> None:
    synced(ws)
    sleef = ws.flagtree_cpu / "third_party/sleef"
    git("checkout", "--quiet", ws.world["sleef"].commits["second"], cwd=sleef, env=ws.world.env)
    result = ws.run("sync")
    assert result.exit_code == 0, result.stderr
    assert ws.head(sleef) == ws.world["sleef"].commits["first"]
    assert "submodules moved" in result.stderr


def test_a_stale_partial_clone_of_ours_is_replaced(ws: Workspace) -> None:
    partial = ws.root / ".FlagTree.flagtree-cpu-partial"  # the name the previous release gave it
    partial.mkdir(parents=True)
    (partial / "half-written").write_text("from an interrupted run")
    synced(ws)
    assert not partial.exists()
    assert ws.head(ws.flagtree) == ws.world["flagtree"].commits["cpu-backend"]


def test_a_clone_a_killed_run_left_half_made_is_removed(ws: Workspace) -> None:
    left = killed_partial(ws.flagtree)  # with the owner record of a SIGKILLed run
    synced(ws)
    assert not left.exists()
    assert not list(ws.root.rglob(".*flagtree-cpu-*")), "a half-made folder is left"
    assert ws.head(ws.flagtree_cpu) == ws.world["flagtree-cpu"].commits["v33"]


def test_a_half_made_clone_of_a_live_run_is_left_alone(ws: Workspace, tmp_path: Path) -> None:
    live = PartialFolder.create(ws.flagtree)  # its maker (this process) is running: only it may remove it
    try:
        synced(ws)
        assert (live.path / "owner.json").is_file()
    finally:
        live.remove()


def test_sync_moves_each_source_to_the_commit_its_plan_decided(ws: Workspace, world: GitWorld) -> None:
    """The commit comes from the plan, decided once: a branch that moves between the plan and the run does not
    change what sync checks out and locks (before, the run resolved every pin again)."""
    overrides = tuple(a for a in ws.argv() if a.startswith("sources."))
    ctx = open_context(ContextRequest(recipe="flagtree-cpu-arm64", overrides=overrides, workdir=str(ws.root)), UI())
    options = RunOptions(python=Path(), for_run=True)
    plan = plan_stage(stage_named("sources"), ctx, options)
    planned = next(item for item in plan if item.subject == "flagtree-cpu")
    assert (planned.data["pin"], planned.data["pinned_by"]) == (world["flagtree-cpu"].commits["v33"], "ref")
    later = world.advance("flagtree-cpu", "main", "README.md", "moved after the plan\n")
    result = run_sync(ctx, options, plan)
    assert ws.head(ws.flagtree_cpu) == planned.data["pin"] != later
    action = next(a for a in result.actions if a.subject == "flagtree-cpu")
    assert action.data["commit"] == planned.data["pin"] and action.data["resolved_from"] == "ref"
    lock = read_lock(ws.lock_file)
    assert lock is not None and lock.sources["flagtree-cpu"].commit == planned.data["pin"]


def test_shallow_first_clone_fetches_only_the_pinned_commit(ws: Workspace) -> None:
    result = ws.run("sync", sets=("sources.flagtree.shallow=true",))
    assert result.exit_code == 0, result.stderr
    assert git("rev-parse", "--is-shallow-repository", cwd=ws.flagtree, env=ws.world.env) == "true"
    assert git("rev-list", "--count", "HEAD", cwd=ws.flagtree, env=ws.world.env) == "1"
    tip = ws.world["flagtree"].commits["tip"]  # moving later fetches the new pin directly
    moved = ws.run("sync", sets=("sources.flagtree.shallow=true", f"sources.flagtree.commit={tip}"))
    assert moved.exit_code == 0, moved.stderr  # the old shallow pin is not "unreachable work"
    assert ws.head(ws.flagtree) == tip


def test_blobless_first_clone(ws: Workspace) -> None:
    result = ws.run("sync", sets=("sources.flagtree.filter=blob:none",))
    assert result.exit_code == 0, result.stderr
    assert git("config", "remote.origin.partialclonefilter", cwd=ws.flagtree, env=ws.world.env) == "blob:none"
    assert (ws.flagtree / "cmake/llvm-hash.txt").read_text().startswith("a66376b0")


# --- git configuration, errors ------------------------------------------------------------------------


def test_insteadof_prefix_rule_with_the_recipes_real_urls(ws: Workspace) -> None:
    config = Path(os.environ["GIT_CONFIG_GLOBAL"]).read_text()
    assert "insteadOf = https://github.com/" in config  # one user-style prefix rule, nothing else
    synced(ws)
    assert ws.head(ws.flagtree_cpu / "third_party/sleef") == ws.world["sleef"].commits["first"]


def test_unreachable_host_is_exit_3_naming_the_url(ws: Workspace) -> None:
    result = ws.run("sync", sets=("sources.flagtree.url=http://127.0.0.1:9/FlagTree.git",))
    assert result.exit_code == 3
    assert "cannot reach http://127.0.0.1:9/FlagTree.git" in result.stderr
    assert "proxy" in result.stderr and "Traceback" not in result.stderr


def test_missing_repository_is_exit_3(ws: Workspace, http_server) -> None:
    url = http_server.url("/nope/FlagTree.git")
    result = ws.run("sync", sets=(f"sources.flagtree.url={url}",))
    assert result.exit_code == 3
    assert f"no git repository at {url}" in result.stderr


@pytest.mark.timeout(120)  # a password prompt would wait forever: only a hang reaches this
def test_authentication_failure_never_prompts(ws: Workspace, http_server) -> None:
    http_server.serve("/private/FlagTree.git/info/refs", b"", Faults(status=401),
                      **{"WWW-Authenticate": 'Basic realm="x"'})
    url = http_server.url("/private/FlagTree.git")
    result = ws.run("sync", sets=(f"sources.flagtree.url={url}",))  # GIT_TERMINAL_PROMPT=0: no prompt
    assert result.exit_code == 3
    assert "asked for credentials" in result.stderr and "credential helper" in result.stderr


def test_unknown_ref_is_exit_3(ws: Workspace) -> None:
    result = ws.run("sync", sets=("sources.flagtree-cpu.ref=no-such-branch",))
    assert result.exit_code == 3
    assert "has no branch or tag 'no-such-branch'" in result.stderr


# --- the user's work is never lost ----------------------------------------------------------------------


def test_dirty_checkout_is_not_moved(ws: Workspace) -> None:
    synced(ws)
    readme = ws.flagtree / "README.md"
    readme.write_text("my local notes\n")
    tip = ws.world["flagtree"].commits["tip"]
    result = ws.run("sync", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 3
    assert "has changes to 1 tracked file" in result.stderr and "README.md" in result.stderr
    assert "--allow-dirty" in result.stderr and "stash" in result.stderr
    assert readme.read_text() == "my local notes\n"
    assert ws.head(ws.flagtree) == ws.world["flagtree"].commits["cpu-backend"]


def test_allow_dirty_moves_and_keeps_non_conflicting_changes(ws: Workspace) -> None:
    synced(ws)
    llvm_hash = ws.flagtree / "cmake/llvm-hash.txt"
    llvm_hash.write_text(llvm_hash.read_text() + "# my note\n")
    tip = ws.world["flagtree"].commits["tip"]
    result = ws.run("sync", "--allow-dirty", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 0, result.stderr
    assert ws.head(ws.flagtree) == tip
    assert llvm_hash.read_text().endswith("# my note\n")


def test_allow_dirty_still_refuses_conflicting_changes(ws: Workspace) -> None:
    synced(ws)
    readme = ws.flagtree / "README.md"  # the tip commit changes README.md too
    readme.write_text("conflicting local edit\n")
    tip = ws.world["flagtree"].commits["tip"]
    result = ws.run("sync", "--allow-dirty", sets=(f"sources.flagtree.commit={tip}",))
    assert result.exit_code == 3
    assert "git refused to move" in result.stderr and "nothing was discarded" in result.stderr
    assert readme.read_text() == "conflicting local edit\n"


def test_commits_that_would_become_unreachable_are_protected(ws: Workspace) -> None:
    synced(ws)
    env = ws.world.env
    (ws.flagtree / "mine.txt").write_text("work in progress\n")
    git("add", "mine.txt", cwd=ws.flagtree, env=env)
    git("commit", "--quiet", "-m", "my experiment", cwd=ws.flagtree, env=env)
    mine = ws.head(ws.flagtree)
    tip = ws.world["flagtree"].commits["tip"]
    refused = ws.run("sync", sets=(f"sources.flagtree.commit={tip}",))
    assert refused.exit_code == 3
    assert "1 commit that no branch, tag or remote keeps" in refused.stderr
    assert "my experiment" in refused.stderr and "--force" in refused.stderr
    assert ws.head(ws.flagtree) == mine
    forced = ws.run("sync", "--force", sets=(f"sources.flagtree.commit={tip}",))
    assert forced.exit_code == 0, forced.stderr
    assert ws.head(ws.flagtree) == tip
    git("cat-file", "-e", mine, cwd=ws.flagtree, env=env)  # still recoverable


def test_a_checkout_of_another_repository_is_refused(ws: Workspace) -> None:
    ws.world.clone("flagtree-cpu", ws.flagtree)  # the wrong repository at FlagTree's path
    result = ws.run("sync")
    assert result.exit_code == 3
    assert "is a clone of" in result.stderr and "not of https://github.com/flagos-ai/FlagTree.git" in result.stderr
    assert (ws.flagtree / "third_party/cpu/triton_cpu.cc").is_file()  # untouched


def test_a_folder_that_is_not_a_checkout_is_refused(ws: Workspace) -> None:
    ws.flagtree.mkdir(parents=True)
    (ws.flagtree / "notes.txt").write_text("mine\n")
    result = ws.run("sync")
    assert result.exit_code == 3
    assert "exists but is not a git checkout" in result.stderr
    assert (ws.flagtree / "notes.txt").read_text() == "mine\n"


def test_source_path_reuses_an_existing_clone_through_a_relative_link(ws: Workspace, tmp_path: Path) -> None:
    mine = ws.world.clone("flagtree-cpu", tmp_path / "my-flagtree-cpu", recursive=True)
    result = ws.run("sync", "--source-path", f"flagtree-cpu={mine}")
    assert result.exit_code == 0, result.stderr
    link = ws.flagtree_cpu
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    assert link.resolve() == mine.resolve()
    assert "linked to" in result.stderr
    again = ws.run("sync")  # later runs keep using it without the option
    assert again.exit_code == 0, again.stderr
    assert link.is_symlink()


def test_a_source_path_link_to_a_vanished_clone_is_not_cloned_through(ws: Workspace, tmp_path: Path) -> None:
    mine = ws.world.clone("flagtree-cpu", tmp_path / "gone", recursive=True)
    assert ws.run("sync", "--source-path", f"flagtree-cpu={mine}").exit_code == 0
    shutil.rmtree(mine)
    result = ws.run("sync")
    assert result.exit_code == 3
    assert "which no longer exists" in result.stderr
    assert not mine.exists()  # nothing was cloned outside the workspace


def test_source_path_never_replaces_a_real_clone(ws: Workspace, tmp_path: Path) -> None:
    synced(ws)
    other = ws.world.clone("flagtree-cpu", tmp_path / "other")
    marker = ws.flagtree_cpu / "my-file.txt"
    marker.write_text("keep me\n")
    result = ws.run("sync", "--source-path", f"flagtree-cpu={other}")
    assert result.exit_code == 3
    assert "never deletes it" in result.stderr
    assert marker.read_text() == "keep me\n" and not ws.flagtree_cpu.is_symlink()


# --- probes and the LLVM hash ---------------------------------------------------------------------------


def test_incompatible_flagtree_cpu_fails_the_probes(ws: Workspace) -> None:
    result = ws.run("sync", sets=("sources.flagtree-cpu.ref=triton-3.7",))
    assert result.exit_code == 3
    assert "compatibility checks failed; stopping before any download or build" in result.stderr
    assert "does not contain 'add_neon_sdot_to_llvmir'" in result.stderr
    assert ".gitmodules is missing" in result.stderr


def test_flagtree_before_the_cpu_backend_fails_its_probe(world: GitWorld, tmp_path: Path) -> None:
    ws = new_workspace(world, tmp_path / "ws", "pre-cpu")
    result = ws.run("sync")
    assert result.exit_code == 3
    assert "third_party/cpu/backend/compiler.py is missing" in result.stderr


def test_llvm_hash_mismatch_names_both_versions(ws: Workspace) -> None:
    url = "https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-deadbeef-ubuntu-arm64.tar.gz"
    result = ws.run("sync", sets=(f"artifacts.llvm.url={url}",))
    assert result.exit_code == 3
    assert "cmake/llvm-hash.txt asks for 'a66376b0'" in result.stderr and "llvm-deadbeef" in result.stderr
