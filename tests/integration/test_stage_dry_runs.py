"""`sync --dry-run` and `fetch --dry-run`: the stage's plan, nothing changed, and the exit code of the real run."""

from __future__ import annotations

from tests.support.cli import new_workspace
from tests.support.envelope import error_of, result_of


def test_sync_dry_run_names_the_clones_and_changes_nothing(github_redirect, tmp_path):
    ws = new_workspace(github_redirect, tmp_path / "ws")
    result = ws.run("sync", "--dry-run")
    assert result.exit_code == 0, result.stderr
    said = " ".join((result.stdout + result.stderr).split())
    assert "clone flagtree" in said and "nothing was changed (--dry-run)" in said
    assert not ws.flagtree.exists() and not ws.lock_file.exists()
    plan = result_of(ws.run("sync", "--dry-run", "--json").stdout)
    assert plan["changes_nothing"] is True and plan["would_stop"] is None
    assert {i["subject"] for i in plan["items"]} == {"flagtree", "flagtree-cpu"}
    assert not ws.flagtree.exists()


def test_sync_dry_run_exits_as_sync_would_when_something_is_in_the_way(github_redirect, tmp_path):
    ws = new_workspace(github_redirect, tmp_path / "ws")
    ws.flagtree.mkdir(parents=True)
    (ws.flagtree / "notes.txt").write_text("mine\n")
    planned = ws.run("sync", "--dry-run")
    real = ws.run("sync")
    assert real.exit_code == 3, real.stderr
    assert planned.exit_code == real.exit_code, planned.stderr
    assert "would stop" in planned.stderr and str(ws.flagtree) in " ".join(planned.stderr.split())
    assert (ws.flagtree / "notes.txt").read_text() == "mine\n"


def test_fetch_dry_run_offline_without_the_download_exits_as_fetch_would(github_redirect, tmp_path):
    ws = new_workspace(github_redirect, tmp_path / "ws")
    planned = ws.run("fetch", "--dry-run", "--offline", "--json")
    real = ws.run("fetch", "--offline")
    # the LLVM's name is read from FlagTree's cmake/llvm-hash.txt, which no sync has checked out yet: a source
    # problem (exit 3) before any question of downloading
    assert real.exit_code == 3, real.stderr
    assert planned.exit_code == real.exit_code
    error = error_of(planned.stdout)
    assert "fetch would stop" in error["message"] and "--dry-run" in error["message"]
    assert not (tmp_path / "ws").exists()  # no workspace, no state, no lock


def test_sync_dry_run_offline_on_an_unpinned_source_without_lock_exits_as_sync_would(github_redirect, tmp_path):
    # flagtree-cpu follows a branch: without a lock, its commit can only come from the server, which --offline forbids
    ws = new_workspace(github_redirect, tmp_path / "ws")
    planned = ws.run("sync", "--dry-run", "--offline", "--json")
    real = ws.run("sync", "--offline")
    assert real.exit_code == 3, real.stderr
    assert planned.exit_code == real.exit_code, planned.stdout
    error = error_of(planned.stdout)
    assert "sync would stop" in error["message"] and "--offline" in error["message"], error
    # the plan names flagtree-cpu's stop (flagtree, pinned but never cloned and without a git cache, stops too)
    shown = ws.run("sync", "--dry-run", "--offline")
    said = " ".join((shown.stdout + shown.stderr).split())
    assert "stop: flagtree-cpu follows 'main', which needs the network to resolve" in said, said
    assert not ws.flagtree.exists() and not ws.lock_file.exists()


def test_sync_dry_run_offline_with_a_lock_but_no_checkout_and_no_git_cache_exits_as_sync_would(
        github_redirect, tmp_path):
    # the lock pins every source (made online), but nothing is cloned and no git cache holds them: an offline
    # sync cannot clone, so the plan must not say "clone"
    ws = new_workspace(github_redirect, tmp_path / "ws")
    assert ws.run("lock").exit_code == 0
    planned = ws.run("sync", "--dry-run", "--offline", "--json")
    real = ws.run("sync", "--offline")
    assert real.exit_code == 3, real.stderr
    assert planned.exit_code == real.exit_code, planned.stdout
    message = " ".join(error_of(planned.stdout)["message"].split())
    assert "sync would stop" in message and "--offline forbids cloning it" in message, message
    assert "no git cache" in message, message
    assert not ws.flagtree.exists()


def test_sync_dry_run_offline_from_a_filled_git_cache_still_clones(github_redirect, tmp_path):
    # the same, with a git cache filled online: the offline sync clones from it, and the plan says so
    cache = tmp_path / "git-cache"
    filler = new_workspace(github_redirect, tmp_path / "filler")
    assert filler.run("sync", "--git-cache", str(cache)).exit_code == 0
    ws = new_workspace(github_redirect, tmp_path / "ws")
    assert ws.run("lock").exit_code == 0
    planned = ws.run("sync", "--dry-run", "--offline", "--git-cache", str(cache), "--json")
    assert planned.exit_code == 0, planned.stdout
    real = ws.run("sync", "--offline", "--git-cache", str(cache))
    assert real.exit_code == 0, real.stderr
