"""The CLI the way a new user and a fault campaign drive it: closed pipes, a workdir inside a workspace or
that is a file, commands that fail on a fresh folder, damaged state files, --lock-file, status --check,
JUnit files that always exist, a dry run that exits as the real run would."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.cli import Workspace, new_workspace, synced_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld
from tests.support.ports import ServerOutput

TOOL = [sys.executable, "-m", "flagtree_cpu_build"]


@pytest.fixture
def synced(world: GitWorld, tmp_path: Path) -> Workspace:
    return synced_workspace(world, tmp_path / "ws")


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


# --- closed pipes ---------------------------------------------------------------------------------------


def test_sync_finishes_its_clone_when_the_reader_of_its_output_goes_away(world: GitWorld, tmp_path: Path) -> None:
    """`flagtree-cpu sync 2>&1 | head -1`: the clone is not aborted and the exit code is the real one."""
    ws = new_workspace(world, tmp_path / "ws")
    process = subprocess.Popen([*TOOL, *ws.argv("sync")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    process.stdout.readline()
    process.stdout.close()  # what `head -1` does after its line
    assert process.wait(timeout=120) == 0
    assert ws.head(ws.flagtree) == ws.flagtree_commit
    assert (ws.flagtree_cpu / "third_party" / "sleef" / ".git").exists()


def test_doctor_piped_into_head_keeps_its_verdict(tmp_path: Path) -> None:
    """`flagtree-cpu doctor --json | head -1`: exit code as without the pipe (7 here: x86_64), no traceback."""
    argv = [*TOOL, "-w", str(tmp_path / "ws"), "doctor", "--offline", "--json"]
    full = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read()
    assert process.wait(timeout=120) == full.returncode != 1
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err


# --- where the workspace is ----------------------------------------------------------------------------


def test_a_command_inside_a_workspace_uses_it_instead_of_nesting_a_second_one(
        synced: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(synced.flagtree)  # deep inside the workspace, no -w: found like git finds its repository
    result = CliRunner().invoke(app, ["--set", f"sources.flagtree.commit={synced.flagtree_commit}", "sync"])
    assert result.exit_code == 0, result.stderr
    assert not (synced.flagtree / "flagtree-workspace").exists()
    explicit = CliRunner().invoke(app, ["-w", str(synced.root), "--set",
                                        f"sources.flagtree.commit={synced.flagtree_commit}", "status"])
    assert explicit.exit_code == 0, explicit.stderr


def test_a_workdir_that_is_a_file_is_a_usage_error(world: GitWorld, tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    for command in (["status"], ["sync"], ["link"], ["setup", "--dry-run"]):
        result = CliRunner().invoke(app, ["-w", str(file), *command])
        assert result.exit_code == 2, (command, result.output)
        assert f"the workdir {file} is a file" in result.stderr and "unexpected" not in result.stderr
    assert file.read_text() == "mine\n"


@pytest.mark.parametrize("command, code", [(["link"], 3), (["build", "--ignore-host"], 5),
                                           (["setup"], 7)], ids=["link", "build", "setup-preflight"])
def test_a_command_that_fails_on_a_fresh_folder_leaves_nothing_behind(world: GitWorld, tmp_path: Path,
                                                                      command: list[str], code: int) -> None:
    ws = new_workspace(world, tmp_path / "nowhere")
    result = ws.run(*command)
    assert result.exit_code == code, result.output
    assert not ws.root.exists(), tree(ws.root)
    existing = new_workspace(world, tmp_path / "empty-but-mine")
    existing.root.mkdir()
    (existing.root / "keep.txt").write_text("mine\n")
    assert existing.run(*command).exit_code == code
    assert tree(existing.root) == ["keep.txt"]


# --- damaged state -----------------------------------------------------------------------------------------


def damage(path: Path, how: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        path.rmdir()
    elif path.exists():
        path.unlink()
    if how == "folder":
        path.mkdir()
    elif how == "truncated":
        path.write_text('{"digest": "ab')
    elif how == "not-an-object":
        path.write_text("[1, 2, 3]\n")
    elif how == "binary":
        path.write_bytes(b"\xff\xfe\x00garbage")


@pytest.mark.parametrize("how", ["folder", "truncated", "not-an-object", "binary"])
@pytest.mark.parametrize("name", ["build-editable.json", "last-validation.json", "last-setup.json"])
def test_damaged_state_files_are_never_an_unexpected_error(synced: Workspace, name: str, how: str) -> None:
    state = synced.root / ".flagtree-cpu" / name
    damage(state, how)
    for command in (["status"], ["status", "--json"], ["setup", "--dry-run", "--ignore-host"], ["doctor", "--offline"]):
        result = synced.run(*command)
        assert result.exit_code in (0, 7, 9), (command, result.output)
        for bug in ("unexpected", "Traceback", "please report", "the check itself failed"):
            assert bug not in result.output, (command, result.output)


def test_a_damaged_build_stamp_is_moved_aside_and_the_build_runs_again(synced: Workspace, tmp_path: Path) -> None:
    state = synced.root / ".flagtree-cpu"
    damage(state / "build-editable.json", "truncated")
    result = synced.run("build", "--ignore-host", "--python", sys.executable)
    # the inputs are not all there (no LLVM): what matters is how the stamp was treated
    assert "unexpected" not in result.output
    assert "build-editable.json cannot be read" in result.stderr or result.exit_code == 5, result.output


@pytest.mark.parametrize("command", [["sync"], ["link"], ["setup", "--dry-run", "--ignore-host"], ["lock"]])
def test_a_workspace_lock_that_is_a_folder_is_named_with_its_repair(synced: Workspace, command: list[str]) -> None:
    lock = synced.root / ".flagtree-cpu" / "workspace.lock"
    damage(lock, "folder")
    (lock / "something").write_text("x")
    result = synced.run(*command)
    if command[0] == "setup":  # a dry run does not take the lock
        assert result.exit_code in (0, 7), result.output
        return
    assert result.exit_code == 2, result.output
    assert f"{lock} is a folder" in result.stderr and f"mv {lock} {lock}.damaged" in result.stderr
    assert (lock / "something").read_text() == "x"


# --- the lock file elsewhere ---------------------------------------------------------------------------------


def test_lock_file_option_keeps_the_lock_where_the_team_commits_it(synced: Workspace, tmp_path: Path) -> None:
    committed = tmp_path / "repo" / "ci" / "flagtree-cpu.lock.yaml"
    result = synced.run("--lock-file", str(committed), "lock")
    assert result.exit_code == 0, result.stderr
    assert committed.is_file() and "flagtree-cpu" in committed.read_text()
    mode = stat.S_IMODE(committed.stat().st_mode)
    assert mode & 0o044 == 0o044, oct(mode)  # readable by the team (umask 022), unlike mkstemp's 0600
    again = synced.run("--lock-file", str(committed), "sync", "--frozen", "--offline")
    assert again.exit_code == 0, again.stderr
    from_env = subprocess.run([*TOOL, *synced.argv("status", "--json")], capture_output=True, text=True,
                              env={**os.environ, "FLAGTREE_CPU_LOCK_FILE": str(committed)}, timeout=60)
    assert result_of(from_env.stdout)["recipe"] == "flagtree-cpu-arm64"


def test_lock_file_that_is_a_folder_is_a_usage_error(synced: Workspace, tmp_path: Path) -> None:
    result = synced.run("--lock-file", str(tmp_path), "lock")
    assert result.exit_code == 2 and "is a folder" in result.stderr


# --- status --check, dry runs, JUnit ----------------------------------------------------------------------------


def test_status_check_fails_ci_when_anything_is_not_current(synced: Workspace) -> None:
    result = synced.run("status", "--check")
    assert result.exit_code == 9
    assert "not current:" in result.stderr and "links" in result.stderr
    as_json = synced.run("status", "--check", "--json")
    assert as_json.exit_code == 9 and result_of(as_json.stdout)["current"] is False
    assert error_of(as_json.stdout)["code"] == "not-current" and error_of(as_json.stdout)["exit_code"] == 9
    assert synced.run("status").exit_code == 0  # without --check it only reports


def test_dry_run_exits_as_the_real_run_would(world: GitWorld, tmp_path: Path) -> None:
    ws = new_workspace(world, tmp_path / "ws")
    real = ws.run("setup")  # this x86_64 machine is not the recipe's aarch64: preflight stops
    dry = ws.run("setup", "--dry-run", "--json")
    assert real.exit_code == dry.exit_code == 7
    # the one useful command here, with the workspace it is for
    assert f"`flagtree-cpu -w {ws.root} setup --skip-build` is what works" in " ".join(real.stderr.split())
    plan = result_of(dry.stdout)
    assert error_of(dry.stdout)["code"] == "doctor" and error_of(dry.stdout)["exit_code"] == 7
    assert plan["would_stop"]["stage"] == "preflight" and plan["would_stop"]["exit_code"] == 7
    assert "host.arch" in plan["would_stop"]["reason"]
    ok = ws.run("setup", "--dry-run", "--skip-build")
    assert ok.exit_code == 0, ok.stderr


def test_dry_run_names_skip_build_as_the_reason_validation_is_skipped(world: GitWorld, tmp_path: Path) -> None:
    ws = new_workspace(world, tmp_path / "ws")
    plan = result_of(ws.run("setup", "--dry-run", "--skip-build", "--json").stdout)
    validation = next(i for i in plan["items"] if i["area"] == "validation")
    assert validation["state"] == "skipped" and validation["detail"] == "--skip-build"


def junit_cases(path: Path) -> list[tuple[str, str, str]]:
    """(testcase name, verdict element, its message) of a JUnit file."""
    root = ET.parse(path).getroot()
    cases = []
    for case in root.iter("testcase"):
        verdict = next(iter(case), None)
        cases.append((case.get("name"), verdict.tag if verdict is not None else "pass",
                      verdict.get("message") if verdict is not None else ""))
    return cases


def test_setup_skip_build_still_writes_the_junit_file_ci_uploads(world: GitWorld, tmp_path: Path) -> None:
    ws = new_workspace(world, tmp_path / "ws", always_set=("artifacts={}", "build=null"))
    report = tmp_path / "reports" / "validate.xml"
    result = ws.run("setup", "--skip-build", "--junit", str(report))
    assert result.exit_code == 0, result.stderr
    [(name, verdict, message)] = junit_cases(report)
    assert verdict == "skipped" and "--skip-build" in message


def test_setup_that_stops_before_validation_writes_an_error_case(world: GitWorld, tmp_path: Path) -> None:
    ws = new_workspace(world, tmp_path / "ws")
    report = tmp_path / "validate.xml"
    result = ws.run("setup", "--junit", str(report))  # stops at preflight on this x86_64 machine
    assert result.exit_code == 7
    [(name, verdict, message)] = junit_cases(report)
    assert verdict == "error" and "setup stopped at preflight" in message


def test_validate_writes_an_error_case_when_installing_prerequisites_fails(world: GitWorld, tmp_path: Path) -> None:
    from tests.support.venvs import make_venv

    ws = new_workspace(world, tmp_path / "ws",
                       always_set=('python.runtime=[{requirement: "no-such-package-xyz==1.0", '
                                   'index_url: "http://127.0.0.1:9/simple"}]',))
    python = make_venv(tmp_path / "venv")
    report = tmp_path / "validate.xml"
    result = ws.run("validate", "--install-prereqs", "--python", str(python), "--junit", str(report))
    assert result.exit_code not in (0, 1), result.output
    [(name, verdict, message)] = junit_cases(report)
    assert verdict == "error" and message


# --- messages -------------------------------------------------------------------------------------------------


def test_a_recipes_dir_option_naming_no_folder_is_refused(tmp_path: Path) -> None:
    """Typed just now: a usage error (exit 2) naming the folder, for every command, not a silently shorter list."""
    (tmp_path / "a-file").write_text("")
    for folder, why in ((tmp_path / "typo", "does not exist"), (tmp_path / "a-file", "is not a folder")):
        for args in (["recipe", "list"], ["status"]):
            result = CliRunner().invoke(app, [*args, "--recipes-dir", str(folder)])
            assert result.exit_code == 2, result.output
            assert f"error: --recipes-dir {folder} {why}" in result.stderr
            assert f"mkdir -p {folder}" in result.stderr and result.stdout == ""


def test_recipe_list_warns_about_a_recipes_folder_in_the_environment_that_is_not_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAGTREE_CPU_RECIPES", str(tmp_path / "typo"))
    result = CliRunner().invoke(app, ["recipe", "list"])
    assert result.exit_code == 0
    assert f"recipes folder {tmp_path / 'typo'} (does not exist) is skipped" in result.stderr


def test_recipe_validate_counts_in_the_singular_too() -> None:
    result = CliRunner().invoke(app, ["recipe", "validate"])
    assert "(2 sources, 1 artifact, 12 links, 5 checks)" in result.stderr, result.stderr


def test_make_setup_installs_the_lean_tool_and_passes_args(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]

    # not the make this suite may run under: its MAKEFLAGS carry command-line variables (PYTEST_ARGS=...)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ARGS")}

    def make_dry(*targets: str) -> list[str]:  # -W: as if pyproject.toml changed, so every step is shown
        dry = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(root), "-W", "pyproject.toml",
                              *targets], capture_output=True, text=True, timeout=60, env=env)
        assert dry.returncode == 0, dry.stderr
        return dry.stdout.splitlines()

    lines = make_dry("setup", "ARGS=--skip-build")
    assert any(line.endswith("pip install --quiet -c constraints.txt -e .") for line in lines), lines
    assert not any("[dev]" in line or "[test]" in line for line in lines), lines
    assert lines[-1].endswith("flagtree-cpu setup --skip-build")
    tests = make_dry("test")
    assert any("-c constraints.txt -e '.[dev]'" in line for line in tests), tests
    assert re.search(r"python -m pytest -q -n \d+ --dist \w+$", tests[-1]), tests  # parallel workers by default
    assert make_dry("test-serial")[-1].endswith("python -m pytest -q -n 0")


def test_setup_moves_a_damaged_report_aside_and_writes_a_new_one(world: GitWorld, tmp_path: Path) -> None:
    ws = new_workspace(world, tmp_path / "ws", always_set=("artifacts={}", "build=null"))
    state = ws.root / ".flagtree-cpu"
    damage(state / "last-setup.json", "folder")
    (state / "last-setup.json" / "inside").write_text("kept")
    result = ws.run("setup", "--skip-build")
    assert result.exit_code == 0, result.output
    assert json.loads((state / "last-setup.json").read_text())["ok"] is True
    assert (state / "last-setup.json.damaged" / "inside").read_text() == "kept"


def test_the_next_steps_name_the_workdir_so_they_work_from_any_folder(world: GitWorld, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws = new_workspace(world, tmp_path / "ws", always_set=("artifacts={}", "build=null"))
    argv = ws.argv("setup", "--skip-build")
    argv[argv.index("-w") + 1] = "ws"  # as typed: relative
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert f'eval "$(flagtree-cpu -w {tmp_path / "ws"} env)"' in result.stderr
    assert "flagtree-cpu -w ws " not in result.stderr


# --- signals to the tool alone ----------------------------------------------------------------------------


@pytest.mark.parametrize(("signum", "code", "name"), [(15, 143, "SIGTERM"), (1, 129, "SIGHUP")])
def test_sigterm_and_sighup_stop_a_run_like_ctrl_c(world: GitWorld, tmp_path: Path, signum: int, code: int,
                                                    name: str) -> None:
    """A CI runner's SIGTERM or a closed terminal's SIGHUP: the same cleanup as Ctrl-C, exit 128 + signal."""
    ws = new_workspace(world, tmp_path / "ws")
    (ws.root / ".flagtree-cpu").mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(ws.root / ".flagtree-cpu" / "workspace.lock")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    try:  # the run waits for the workspace (--wait): a quiet moment to deliver the signal in
        process = subprocess.Popen([*TOOL, *ws.argv("--wait", "sync")], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        said = ServerOutput(process, process.stderr, keep=None)
        assert said.wait_for("waiting for another flagtree-cpu process", 60), said.text()  # its handlers are set
        process.send_signal(signum)
        process.wait(timeout=30)
        err = said.text(timeout_s=10)
    finally:
        holder.kill()
    assert process.returncode == code, err
    assert f"stopped by {name} during the run" in err and "Traceback" not in err


def test_nohup_keeps_sighup_ignored(tmp_path: Path) -> None:
    """`nohup flagtree-cpu setup &` must survive the terminal closing: an ignored SIGHUP stays ignored."""
    code = ("import signal, os, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
            "from flagtree_cpu_build.cli.boundary import stop_on_sigterm; stop_on_sigterm(); "
            "os.kill(os.getpid(), signal.SIGHUP); "
            "print('still here')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "still here" in result.stdout, result.stderr
