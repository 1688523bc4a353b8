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
    assert real.exit_code == 4, real.stderr
    assert planned.exit_code == 4
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
    assert "sync would stop" in error["message"] and "flagtree-cpu" in error["message"], error
    assert "--offline" in error["message"], error
    assert not ws.flagtree.exists() and not ws.lock_file.exists()
