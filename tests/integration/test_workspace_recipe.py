"""A workspace knows its recipe (issue 28, section 1): the first command that makes a workspace records the
recipe (name, file sha256, bundled name or file), the variant and the lock location in
`.flagtree-cpu/workspace.json`; every later command on it, by -w or from inside it, uses that record unless the
command line says otherwise; a different recipe or variant is refused (exit 2) naming both ways forward, and
nothing is rewritten. Each recipe gets its own default folder; the commands printed carry the context."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.conftest import REPO_ROOT
from tests.support.cli import Workspace, synced_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld

RECORD = Path(".flagtree-cpu") / "workspace.json"
HANG = 60  # seconds: only a run blocked on a FIFO or reading /dev/zero gets here


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def words(text: str) -> str:
    return " ".join(text.split())


def fix_commands(fix: str) -> list[list[str]]:
    """The flagtree-cpu commands a fix holds, as argv without the program name."""
    found = []
    for line in fix.splitlines():
        argv = shlex.split(line.partition(": ")[2])
        assert argv[0] == "flagtree-cpu", line
        found.append(argv[1:])
    return found


@pytest.fixture
def synced(world: GitWorld, tmp_path: Path) -> Workspace:
    return synced_workspace(world, tmp_path / "ws")


def test_another_recipe_on_a_flagtree_workspace_is_refused_and_its_lock_kept(synced: Workspace) -> None:
    locked = synced.run("lock")
    assert locked.exit_code == 0, locked.stderr
    before = synced.lock_file.read_bytes()
    result = cli("-w", str(synced.root), "--recipe", "triton-cpu", "lock", "--json")
    assert result.exit_code == 2, result.stderr
    error = error_of(result.stdout)
    assert error["code"] == "other-recipe"
    said = words(error["message"])
    assert "set up for recipe flagtree-cpu-arm64" in said and "names recipe triton-cpu" in said
    assert synced.lock_file.read_bytes() == before  # the pin survives
    assert json.loads((synced.root / RECORD).read_text())["recipe"]["name"] == "flagtree-cpu-arm64"
    own, fresh = fix_commands(error["fix"])
    assert own == ["-w", str(synced.root), "lock"]
    assert fresh == ["-w", str(synced.root.parent / "triton-cpu-workspace"), "--recipe", "triton-cpu", "lock"]
    # both ways forward work as printed
    kept = cli(*own, "--set", f"sources.flagtree.commit={synced.flagtree_commit}", "--json")
    assert kept.exit_code == 0, kept.stderr
    assert result_of(kept.stdout)["actions"][0]["status"] == "ok"
    other = cli(*fresh)
    assert other.exit_code == 0, other.stderr
    assert "triton-cpu" in (synced.root.parent / "triton-cpu-workspace" / ".flagtree-cpu" / "lock.yaml").read_text()
    assert synced.lock_file.read_bytes() == before


def test_the_record_names_the_recipe_and_later_commands_use_it_by_w_and_from_inside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "tc"
    made = cli("-w", str(ws), "--recipe", "triton-cpu", "lock")
    assert made.exit_code == 0, made.stderr
    record = json.loads((ws / RECORD).read_text())
    bundled = REPO_ROOT / "recipes" / "triton-cpu.yaml"
    assert record["recipe"] == {"name": "triton-cpu", "origin": "bundled", "path": str(bundled),
                                "sha256": __import__("hashlib").sha256(bundled.read_bytes()).hexdigest()}
    assert record["variant"] is None and record["lock_file"] is None
    by_w = cli("-w", str(ws), "env")  # no --recipe: the workspace's
    assert by_w.exit_code == 0, by_w.stderr
    assert "export TRITON_CPU_BACKEND=1" in by_w.stdout
    inside = ws / "deeper"
    inside.mkdir()
    monkeypatch.chdir(inside)
    shown = cli("recipe", "show", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert result_of(shown.stdout)["recipe"]["name"] == "triton-cpu"
    status = cli("status", "--json")
    assert status.exit_code == 0, status.stderr
    assert result_of(status.stdout)["recipe"] == "triton-cpu"
    assert not (inside / ".flagtree-cpu").exists() and not (inside / "flagtree-workspace").exists()


def test_each_recipe_gets_its_own_default_workspace_folder(world: GitWorld, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    commit = f"sources.flagtree.commit={world['flagtree'].commits['cpu-backend']}"
    first = cli("--recipe", "triton-cpu", "lock")
    assert first.exit_code == 0, first.stderr
    assert (tmp_path / "triton-cpu-workspace" / ".flagtree-cpu" / "lock.yaml").is_file()
    assert not (tmp_path / "flagtree-workspace").exists()
    second = cli("--set", commit, "lock")  # the default recipe keeps ./flagtree-workspace
    assert second.exit_code == 0, second.stderr
    assert json.loads((tmp_path / "flagtree-workspace" / RECORD).read_text())["recipe"]["name"] == \
        "flagtree-cpu-arm64"
    again = cli("--recipe", "triton-cpu", "lock", "--json")  # finds its own folder again, nothing to do
    assert again.exit_code == 0, again.stderr
    assert result_of(again.stdout)["actions"][0]["status"] == "ok"


def test_a_stack_defaults_to_its_bases_folder_and_another_variant_to_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside every workspace: FlagGems goes on the FlagTree set up from the same folder (not on a second clone
    in ./flaggems-arm-workspace); a variant other than the recipe's default gets a folder of its own, so the
    next variant is not refused on the first one's workspace."""
    monkeypatch.chdir(tmp_path)
    stack = cli("--recipe", "flaggems-arm", "status", "--json")
    assert result_of(stack.stdout)["workspace"] == str(tmp_path / "flagtree-workspace")
    metax = cli("--recipe", "torch-fl", "--variant", "metax", "lock")
    assert metax.exit_code == 0, metax.stderr
    assert (tmp_path / "torch-fl-metax-workspace" / RECORD).is_file()
    cuda = cli("--recipe", "torch-fl", "lock")  # the recipe's default variant: the recipe's own folder
    assert cuda.exit_code == 0, cuda.stderr
    assert json.loads((tmp_path / "torch-fl-workspace" / RECORD).read_text())["variant"] == "cuda"


def test_an_edited_recipe_file_of_the_same_name_is_used_and_recorded(tmp_path: Path) -> None:
    ws = tmp_path / "tc"
    assert cli("-w", str(ws), "--recipe", "triton-cpu", "lock").exit_code == 0
    mine = tmp_path / "mine.yaml"
    mine.write_text((REPO_ROOT / "recipes" / "triton-cpu.yaml").read_text() + "# my edit\n")
    edited = cli("-w", str(ws), "--recipe", str(mine), "lock")
    assert edited.exit_code == 0, edited.stderr
    record = json.loads((ws / RECORD).read_text())["recipe"]
    assert record["origin"] == "file" and record["path"] == str(mine) and record["name"] == "triton-cpu"
    mine.write_text(mine.read_text() + "# and another\n")
    bare = cli("-w", str(ws), "lock")  # the recorded file, as it is now
    assert bare.exit_code == 0, bare.stderr
    assert json.loads((ws / RECORD).read_text())["recipe"]["sha256"] == \
        __import__("hashlib").sha256(mine.read_bytes()).hexdigest()


def test_a_different_name_in_a_recipe_file_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "tc"
    assert cli("-w", str(ws), "--recipe", "triton-cpu", "lock").exit_code == 0
    before = (ws / RECORD).read_bytes()
    demo = tmp_path / "sleefdemo.yaml"
    demo.write_text((REPO_ROOT / "recipes" / "triton-cpu.yaml").read_text().replace(
        "name: triton-cpu", "name: sleefdemo", 1))
    refused = cli("-w", str(ws), "--recipe", str(demo), "env")
    assert refused.exit_code == 2
    assert "set up for recipe triton-cpu, and this command names recipe sleefdemo" in words(refused.stderr)
    assert (ws / RECORD).read_bytes() == before


def test_a_different_variant_is_refused_and_the_recorded_one_is_used(tmp_path: Path) -> None:
    ws = tmp_path / "tfl"
    made = cli("-w", str(ws), "--recipe", "torch-fl", "--variant", "metax", "lock")
    assert made.exit_code == 0, made.stderr
    assert json.loads((ws / RECORD).read_text())["variant"] == "metax"
    shown = cli("-w", str(ws), "recipe", "show", "--json")  # no --variant: the workspace's, not the default
    assert result_of(shown.stdout)["variant"] == "metax"
    named = cli("-w", str(ws), "--recipe", "torch-fl", "recipe", "show", "--json")  # the recipe named: the same
    assert result_of(named.stdout)["variant"] == "metax"
    before = (ws / ".flagtree-cpu" / "lock.yaml").read_bytes()
    refused = cli("-w", str(ws), "--variant", "cuda", "lock", "--json")
    assert refused.exit_code == 2
    error = error_of(refused.stdout)
    assert "set up for recipe torch-fl variant metax" in words(error["message"])
    own, fresh = fix_commands(error["fix"])
    assert own == ["-w", str(ws), "--recipe", "torch-fl", "--variant", "metax", "lock"]
    assert fresh[:2] == ["-w", str(tmp_path / "torch-fl-cuda-workspace")] and "cuda" in fresh
    assert (ws / ".flagtree-cpu" / "lock.yaml").read_bytes() == before


def test_a_lock_file_given_once_is_recorded_and_used_after(tmp_path: Path) -> None:
    ws, lock = tmp_path / "tc", tmp_path / "ci" / "tc.lock.yaml"
    assert cli("-w", str(ws), "--recipe", "triton-cpu", "lock").exit_code == 0
    moved = cli("-w", str(ws), "--lock-file", str(lock), "lock")
    assert moved.exit_code == 0, moved.stderr
    assert json.loads((ws / RECORD).read_text())["lock_file"] == str(lock)
    (ws / ".flagtree-cpu" / "lock.yaml").unlink()
    again = cli("-w", str(ws), "lock", "--json")  # no --lock-file: the recorded one
    assert again.exit_code == 0, again.stderr
    assert result_of(again.stdout)["actions"][0]["status"] == "ok"
    assert not (ws / ".flagtree-cpu" / "lock.yaml").exists()
    fix = cli("-w", str(ws), "doctor", "--check", "workspace.runtime-env", "--json")
    assert f"--lock-file {lock} env" in result_of(fix.stdout)["checks"][0]["fix"]


@pytest.mark.timeout(HANG * 6)
@pytest.mark.parametrize("kind", ["not-json", "wrong-types", "relative-path", "too-big", "fifo", "dev-zero",
                                  "folder", "duplicate-key"])
def test_a_damaged_record_is_exit_2_with_the_way_out(tmp_path: Path, kind: str) -> None:
    ws = tmp_path / "tc"
    assert cli("-w", str(ws), "--recipe", "triton-cpu", "lock").exit_code == 0
    path = ws / RECORD
    good = json.loads(path.read_text())
    path.unlink()
    if kind == "not-json":
        path.write_text("{half")
    elif kind == "wrong-types":
        path.write_text(json.dumps({**good, "recipe": {**good["recipe"], "name": ["x"]}}))
    elif kind == "relative-path":
        path.write_text(json.dumps({**good, "recipe": {**good["recipe"], "origin": "file", "path": "../x.yaml"}}))
    elif kind == "too-big":
        path.write_text(json.dumps({**good, "pad": "x" * (1 << 20)}))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_text(json.dumps(good)[:-1] + ', "variant": "x"}')
    for argv in (["env"], ["lock"], ["--recipe", "triton-cpu", "status"]):
        done = subprocess.run([sys.executable, "-m", "flagtree_cpu_build", "-w", str(ws), *argv],
                              capture_output=True, text=True, timeout=HANG, stdin=subprocess.DEVNULL, check=False)
        assert done.returncode == 2, (argv, done.stderr)
        said = words(done.stderr)
        assert f"the workspace record {path} is damaged" in said, said
        assert f"fix: mv {path} {path}.damaged" in said and "Traceback" not in done.stderr


def test_a_run_that_stops_before_changing_anything_leaves_no_record(tmp_path: Path) -> None:
    ws = tmp_path / "never"
    failed = cli("-w", str(ws), "--recipe", "triton-cpu", "lock", "--frozen")  # no lock to be frozen to
    assert failed.exit_code != 0
    assert not ws.exists()
    again = cli("-w", str(ws), "--recipe", "torch-fl", "lock")  # nothing recorded: any recipe may start it
    assert again.exit_code == 0, again.stderr


def test_doctor_fix_and_env_carry_the_workspace_recipe_from_any_folder(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "tc"
    assert cli("-w", str(ws), "--recipe", "triton-cpu", "lock").exit_code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    found = cli("-w", str(ws), "doctor", "--check", "workspace.runtime-env", "--json")
    fix = next(c for c in result_of(found.stdout)["checks"] if c["id"] == "workspace.runtime-env")["fix"]
    assert fix == f'eval "$(flagtree-cpu -w {ws} --recipe triton-cpu env)"'
    human = cli("-w", str(ws), "doctor", "--check", "workspace.runtime-env")
    assert f'eval "$(flagtree-cpu -w {ws} --recipe triton-cpu env)"' in words(human.stderr)
    env = cli(*shlex.split(fix[len('eval "$('):-len(')"')])[1:])
    assert env.exit_code == 0, env.stderr
    assert "export TRITON_CPU_BACKEND=1" in env.stdout and "FLAGTREE_BACKEND" not in env.stdout


def test_an_error_fix_carries_the_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "tc"
    assert cli("-w", str(ws), "--recipe", "triton-cpu", "lock").exit_code == 0
    (ws / ".flagtree-cpu" / "lock.yaml").write_text("lock_version: [\n")  # a damaged lock: its fix names `lock`
    monkeypatch.chdir(tmp_path)
    result = cli("-w", str(ws), "sync", "--json")
    assert result.exit_code == 2, result.stderr
    assert f"`flagtree-cpu -w {ws} --recipe triton-cpu lock`" in error_of(result.stdout)["fix"]


def test_a_recipe_of_the_stack_shares_its_workspace_and_another_is_still_refused(synced: Workspace) -> None:
    """FlagGems stacks on FlagTree in one workspace (one interpreter, a lock each): on a FlagTree workspace it is
    not 'another recipe'; triton-cpu is."""
    assert synced.run("lock").exit_code == 0
    on_top = cli("-w", str(synced.root), "--recipe", "flaggems-arm", "status", "--json")
    assert on_top.exit_code in (0, 9), on_top.stderr  # 9: not set up yet; never 2
    assert '"other-recipe"' not in on_top.stdout
    other = cli("-w", str(synced.root), "--recipe", "triton-cpu", "status", "--json")
    assert other.exit_code == 2 and error_of(other.stdout)["code"] == "other-recipe"
    assert json.loads((synced.root / RECORD).read_text())["recipe"]["name"] == "flagtree-cpu-arm64"
