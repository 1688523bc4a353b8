"""One meaning per flag name: --check is the CI gate (status, link: exit non-zero unless current); the item
selector of doctor and validate is --only. doctor/validate --check still select, hidden, with a warning."""

from __future__ import annotations

from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.envelope import result_of


def _run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_doctor_only_runs_the_named_checks(tmp_path):
    result = _run("-w", str(tmp_path / "ws"), "--json", "doctor", "--only", "toolchain.git", "--only", "host.os")
    assert result.exit_code == 0, result.stderr
    assert sorted(f["id"] for f in result_of(result.stdout)["checks"]) == ["host.os", "toolchain.git"]
    assert "deprecated" not in result.stderr


def test_doctor_check_still_selects_but_says_to_use_only(tmp_path):
    result = _run("-w", str(tmp_path / "ws"), "--json", "doctor", "--check", "toolchain.git")
    assert result.exit_code == 0, result.stderr
    assert [f["id"] for f in result_of(result.stdout)["checks"]] == ["toolchain.git"]
    assert "`doctor --check` is deprecated" in result.stderr and "doctor --only toolchain.git" in result.stderr


def test_validate_check_warns_and_names_the_only_spelling(tmp_path):
    # no build in this workspace: validate stops, but the option was read and the warning printed first
    result = _run("-w", str(tmp_path / "ws"), "validate", "--check", "vector-add")
    assert "`validate --check` is deprecated" in result.stderr and "validate --only vector-add" in result.stderr


def test_help_shows_only_as_the_selector_and_check_as_the_gate():
    for command in ("doctor", "validate"):
        shown = " ".join(_run(command, "--help").stdout.split())
        assert "--only" in shown and "--check" not in shown, command
    for command in ("status", "link"):
        assert "--check" in _run(command, "--help").stdout, command
