"""setup's preflight is doctor's blocking host rules (one list: each check says which stages it blocks): what doctor
fails, `setup` and `setup --dry-run` stop on, with exit 7 and doctor's own words and fix (issue 28, section 3)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import error_of, result_of

# an OpenMP runtime no compiler here provides: doctor's toolchain.libraries fails (the build needs it)
NO_OPENMP = ("platform.host.requires.libraries=[{name: OpenMP runtime, any_of: [libnosuchomp.so], "
             "fix: apt-get install -y libomp-dev}]")


def run(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--recipe", "triton-cpu", "-w", str(tmp_path / "ws"), "--set", NO_OPENMP,
                                    *args])


def doctor_finding(tmp_path: Path, check: str) -> dict:
    result = run(tmp_path, "doctor", "--check", check, "--json")
    assert result.exit_code == 7, result.stdout
    [finding] = result_of(result.stdout)["checks"]
    return finding


def test_setup_stops_on_a_library_doctor_finds_missing_with_doctors_words_and_fix(tmp_path: Path) -> None:
    finding = doctor_finding(tmp_path, "toolchain.libraries")
    result = run(tmp_path, "setup", "--json")
    assert result.exit_code == 7, result.stdout
    error = error_of(result.stdout)
    assert error["code"] == "doctor"
    assert f"toolchain.libraries: {finding['detail']}" in error["details"]
    assert f"   fix: {finding['fix']}" in error["details"]
    assert not (tmp_path / "ws").exists()  # stopped before anything was made


def test_setup_dry_run_exits_7_where_doctor_does(tmp_path: Path) -> None:
    result = run(tmp_path, "setup", "--dry-run", "--json")
    assert result.exit_code == 7, result.stdout
    error = error_of(result.stdout)
    assert error["code"] == "doctor" and "setup would stop at preflight" in error["message"]
    assert "toolchain.libraries: no OpenMP runtime (libnosuchomp.so)" in error["message"]


def test_skip_build_does_not_stop_on_what_only_the_build_needs(tmp_path: Path) -> None:
    result = run(tmp_path, "setup", "--dry-run", "--skip-build", "--json")
    assert result.exit_code != 7, result.stdout
    checks = {c["id"] for c in result_of(result.stdout)["preflight"]["checks"]}
    assert "toolchain.git" in checks and "toolchain.libraries" not in checks


def test_ignore_host_still_skips_the_host_rules(tmp_path: Path) -> None:
    result = run(tmp_path, "setup", "--dry-run", "--ignore-host", "--json")
    assert result.exit_code != 7, result.stdout
    [libraries] = [c for c in result_of(result.stdout)["preflight"]["checks"] if c["id"] == "toolchain.libraries"]
    assert libraries["status"] == "fail"  # shown, not stopping
