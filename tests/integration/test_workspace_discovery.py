"""Workspace discovery like git's: without --workdir (or FLAGTREE_CPU_WORKDIR), a command started anywhere inside a
workspace works on that workspace, found by walking up to the folder holding .flagtree-cpu/; outside every
workspace it is ./flagtree-workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.errors import UsageError
from flagtree_cpu_build.workspace import DEFAULT_WORKDIR, open_workspace
from tests.support.cli import Workspace, synced_workspace
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld


@pytest.fixture
def synced(world: GitWorld, tmp_path: Path) -> Workspace:
    return synced_workspace(world, tmp_path / "ws")


def run_in(folder: Path, ws: Workspace, *args: str, monkeypatch: pytest.MonkeyPatch) -> Result:
    """The command as typed in ``folder``, with no -w."""
    monkeypatch.chdir(folder)
    return CliRunner().invoke(app, ["--set", f"sources.flagtree.commit={ws.flagtree_commit}", *args])


def test_status_from_the_root_and_from_a_deep_sub_folder_reports_the_same_workspace(
        synced: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = synced.flagtree / "third_party"
    assert deep.is_dir()
    roots = []
    for folder in (synced.root, deep, synced.flagtree_cpu / "third_party" / "sleef"):
        result = run_in(folder, synced, "status", "--json", monkeypatch=monkeypatch)
        assert result.exit_code == 0, result.stderr
        roots.append(result_of(result.stdout)["workspace"])
    assert roots == [str(synced.root)] * 3
    shown = run_in(deep, synced, "recipe", "show", "--json", monkeypatch=monkeypatch)
    assert f"resolved for workdir {synced.root} " in result_of(shown.stdout)["context"]


def test_sync_from_inside_does_not_clone_a_second_copy(synced: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    inside = synced.flagtree / "python"
    result = run_in(inside, synced, "sync", "--json", monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert {a["status"] for a in result_of(result.stdout)["actions"] if not a.get("check")} == {"ok"}
    assert not list(synced.root.rglob(DEFAULT_WORKDIR))  # no second workspace anywhere below the first
    assert not (inside / ".flagtree-cpu").exists()


def test_workdir_option_and_environment_still_win(synced: Workspace, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    named = run_in(synced.flagtree, synced, "-w", str(other), "recipe", "show", "--json", monkeypatch=monkeypatch)
    assert f"resolved for workdir {other} " in result_of(named.stdout)["context"]
    monkeypatch.setenv("FLAGTREE_CPU_WORKDIR", str(other))
    from_env = run_in(synced.flagtree, synced, "recipe", "show", "--json", monkeypatch=monkeypatch)
    assert f"resolved for workdir {other} " in result_of(from_env.stdout)["context"]
    assert not other.exists()  # recipe show only reads


def test_open_workspace_walks_up_to_the_nearest_state_folder(tmp_path: Path) -> None:
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "a" / "inner"
    (outer / ".flagtree-cpu").mkdir(parents=True)
    (inner / ".flagtree-cpu").mkdir(parents=True)
    (inner / "b" / "c").mkdir(parents=True)
    assert open_workspace(None, cwd=inner / "b" / "c").root == inner  # the nearest one, as git's nested repos
    assert open_workspace(None, cwd=outer / "a").root == outer
    assert open_workspace(None, cwd=tmp_path).root == tmp_path / DEFAULT_WORKDIR  # outside every workspace
    assert open_workspace(str(tmp_path / "x"), cwd=inner).root == tmp_path / "x"
    (tmp_path / "file").write_text("mine\n")
    with pytest.raises(UsageError, match="is a file"):
        open_workspace(str(tmp_path / "file"))
