"""What a new user meets before any work starts: usage errors (JSON too), help, completion, --quiet,
options that would do nothing, plain progress lines in logs."""

from __future__ import annotations

import io
import re

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app, reflow
from flagtree_cpu_build.progress import ProgressTask
from flagtree_cpu_build.ui import UI
from tests.support.envelope import error_of

COMMANDS = [["recipe", "list"], ["recipe", "show"], ["recipe", "validate"], ["recipe", "schema"], ["setup"],
            ["status"], ["sync"], ["link"], ["fetch"], ["python"], ["build"], ["env"], ["validate"], ["doctor"],
            ["lock"], ["clean"], ["schema"]]


@pytest.mark.parametrize("argv, message", [
    (["status", "--bogus", "--json"], "No such option: --bogus"),
    (["build", "--jobs", "0", "--json"], "0 is not in the range"),
    (["nosuch", "--json"], "No such command 'nosuch'"),
    (["--json", "recipe", "frobnicate"], "No such command 'frobnicate'"),
])
def test_usage_errors_are_json_documents_under_json(argv: list[str], message: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    error = error_of(result.stdout)  # stdout is exactly one JSON document: the envelope
    assert error["code"] == "usage" and error["exit_code"] == 2 and message in error["message"]
    assert "--help" in error["fix"]
    assert message.split(":")[0] in result.stderr  # people still get the usual message


def test_usage_errors_without_json_leave_stdout_empty() -> None:
    result = CliRunner().invoke(app, ["status", "--bogus"])
    assert result.exit_code == 2 and result.stdout == ""


@pytest.mark.parametrize("argv, message, fix", [
    (["status", "--bogus"], "error: No such option: --bogus", "fix: flagtree-cpu status --help"),
    (["recipe", "frobnicate"], "error: No such command 'frobnicate'", "fix: flagtree-cpu recipe --help"),
    (["build", "--jobs", "0"], "error: Invalid value for '--jobs'", "fix: flagtree-cpu build --help"),
])
def test_usage_errors_print_error_and_fix_lines_like_every_other_error(argv: list[str], message: str,
                                                                       fix: str) -> None:
    """Not click's box: the `error:` line and a `fix:` command to copy, exit 2."""
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert any(line.startswith(message) for line in lines), result.stderr
    assert fix in lines, result.stderr
    assert "╭" not in result.stderr and "Usage:" not in result.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_subcommand_help_lists_the_global_options_that_work_after_it(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Global options (before or after the command)" in result.stdout
    for option in ("--workdir", "--json", "--set", "--recipe", "--lock-file", "--quiet"):
        assert option in result.stdout, (command, option)
    assert "Examples" in result.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_at_80_columns_cuts_no_option_name(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from typer import rich_utils

    monkeypatch.setattr(rich_utils, "MAX_WIDTH", 80)
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    cut = [line for line in result.stdout.splitlines() if re.search(r"--[a-z-]*…", line)]
    assert not cut, cut
    assert "--dry-run" in CliRunner().invoke(app, ["setup", "--help"]).stdout


def test_help_paragraphs_are_reflowed_not_broken_where_the_source_wrapped() -> None:
    assert reflow("One line\nwrapped here.\n\nSecond\nparagraph.") == "One line wrapped here.\n\nSecond paragraph."
    result = CliRunner().invoke(app, ["setup", "--help"], env={"COLUMNS": "200"})
    assert "so setup resumes after Ctrl-C or a failure" in " ".join(result.stdout.split())


def test_defaults_in_help_texts_are_shown_not_eaten_as_markup() -> None:
    result = CliRunner().invoke(app, ["status", "--help"], env={"COLUMNS": "200"})
    assert "else ./flagtree-workspace]" in result.stdout
    assert "[default: the active venv" in result.stdout


def test_env_offline_without_build_is_refused() -> None:
    result = CliRunner().invoke(app, ["env", "--offline"])
    assert result.exit_code == 2
    assert "--offline changes only the build environment" in result.stderr and "--build" in result.stderr


def test_shell_completion_script_and_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    script = CliRunner().invoke(app, ["--show-completion", "bash"])
    assert script.exit_code == 0 and "_FLAGTREE_CPU_COMPLETE=complete_bash" in script.stdout

    def complete(words: str, cword: int) -> list[str]:
        env = {"_FLAGTREE_CPU_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        result = CliRunner().invoke(app, [], env=env, prog_name="flagtree-cpu")
        return result.stdout.split()

    assert "setup" in complete("flagtree-cpu se", 1)
    assert {"--skip-build", "--skip-validate"} <= set(complete("flagtree-cpu setup --skip", 2))
    assert complete("flagtree-cpu --recipe flagtree-cpu-a", 2) == ["flagtree-cpu-arm64"]
    assert complete("flagtree-cpu validate --kernel tle", 3) == ["tle-rms-norm"]


def test_install_completion_writes_the_script_under_home(hermetic_env: object) -> None:
    from pathlib import Path

    result = CliRunner().invoke(app, ["--install-completion", "bash"])
    assert result.exit_code == 0, result.output
    home = Path.home()
    assert (home / ".bash_completions" / "flagtree-cpu.sh").is_file()
    assert ".bash_completions/flagtree-cpu.sh" in (home / ".bashrc").read_text()


def test_quiet_shows_no_result_table_but_keeps_warnings() -> None:
    out = io.StringIO()
    ui = UI(quiet=True, stderr=out)
    ui.table(["a", "b"], [["1", "2"]])
    ui.info("a summary")
    ui.warn("something to know")
    assert out.getvalue() == "warning: something to know\n"


def test_quiet_doctor_lists_only_the_problems() -> None:
    from flagtree_cpu_build.doctor import Finding

    out = io.StringIO()
    findings = [Finding("host.arch", "host", "arch", "fail", "x86_64, the recipe wants aarch64", "use an Arm box"),
                Finding("toolchain.git", "toolchain", "git", "ok", "git 2.39", None),
                Finding("toolchain.ccache", "toolchain", "ccache", "warn", "no ccache", "apt-get install ccache")]
    UI(quiet=True, stderr=out).findings(findings, ["host", "toolchain"])
    lines = out.getvalue().splitlines()
    assert lines == ["✗ host.arch: x86_64, the recipe wants aarch64 — fix: use an Arm box",
                     "! toolchain.ccache: no ccache — fix: apt-get install ccache"]


def test_plain_progress_in_a_log_shows_bytes_rate_and_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a terminal (CI): a line per phase and per interval saying how far it is — never an empty
    'unpacking llvm:' line."""
    monkeypatch.setattr(ProgressTask, "LOG_EVERY_S", 0.0)
    out = io.StringIO()
    ui = UI(stderr=out)
    with ui.progress("downloading llvm", total=812_000_000, unit="bytes") as task:
        task.update(0)
        task.update(365_000_000)
    with ui.progress("unpacking llvm", unit="bytes") as task:
        task.update(4_000_000)
    with ui.progress("building", total=268, unit="steps") as task:
        task.update(120, 268)
    lines = out.getvalue().splitlines()
    assert lines[0] == "downloading llvm: started, 812 MB in all"
    assert re.fullmatch(r"downloading llvm: 45%, 365 MB of 812 MB, [\d.]+ [KMG]?B/s", lines[1]), lines[1]
    assert lines[2] == "downloading llvm: done (365 MB)"
    assert lines[3] == "unpacking llvm: started, 4 MB"
    assert "building: started, 45%, 120 of 268" in lines
    assert not [line for line in lines if line.rstrip().endswith(":")]


@pytest.mark.parametrize("warnings, said", [(1, "1 warning,"), (2, "2 warnings,"), (0, "0 warnings,")])
def test_doctor_summary_agrees_in_number(warnings: int, said: str) -> None:
    import io

    from flagtree_cpu_build.cli import render
    from flagtree_cpu_build.doctor.run import DoctorReport, Finding
    from flagtree_cpu_build.ui import UI

    findings = [Finding("host.os", "host", "os", "ok", "ubuntu", None)] + [
        Finding(f"cpu.w{i}", "cpu", "w", "warn", "odd", "do this") for i in range(warnings)]
    stderr, stdout = io.StringIO(), io.StringIO()
    render.doctor(UI(stderr=stderr, stdout=stdout), DoctorReport(tuple(findings), 0.1, "r", "/"), ["host", "cpu"],
                  None)
    summary = next(line for line in stderr.getvalue().splitlines() if line.startswith("doctor: "))
    assert summary.startswith(f"doctor: 1 ok, {said}"), summary
