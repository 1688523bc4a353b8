"""Listings are products: `recipe list`, `status`, `doctor`, `lock`, `validate --list` print their tables on stdout,
as `pip list` does, so `| grep` and `| less` work; progress, warnings, logs and fixes stay on stderr."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.cli import new_workspace

CHECKOUT = Path(__file__).resolve().parents[2]


def _run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_recipe_list_prints_its_table_on_stdout():
    result = _run("recipe", "list")
    assert result.exit_code == 0, result.stderr
    assert "triton-cpu" in result.stdout and "bundled" in result.stdout
    assert "triton-cpu" not in result.stderr


def test_recipe_list_piped_to_grep_gives_whole_rows(tmp_path):
    """A real pipe: each recipe is one line with its origin and description, never wrapped over two."""
    long_folder = tmp_path / ("a-rather-long-folder-name-" * 4) / "recipes"
    long_folder.mkdir(parents=True)
    listing = subprocess.run(
        [sys.executable, "-m", "flagtree_cpu_build", "--recipes-dir", str(long_folder), "recipe", "list"],
        cwd=CHECKOUT, capture_output=True, text=True, check=False, timeout=600)
    assert listing.returncode == 0, listing.stderr
    rows = [line for line in listing.stdout.splitlines() if line.split() and line.split()[0] == "triton-cpu"]
    assert len(rows) == 1, listing.stdout
    assert "bundled" in rows[0]


def test_status_prints_its_table_on_stdout_and_its_advice_on_stderr(tmp_path):
    result = _run("-w", str(tmp_path / "ws"), "status")
    assert result.exit_code == 0, result.stderr
    assert "sources" in result.stdout and "not checked out" in result.stdout
    assert "not checked out" not in result.stderr
    assert "flagtree-cpu setup" in result.stderr  # the advice line is for people


def test_doctor_prints_its_findings_on_stdout_and_its_summary_on_stderr(tmp_path):
    result = _run("-w", str(tmp_path / "ws"), "doctor", "--check", "host.os", "--check", "toolchain.git")
    assert result.exit_code in (0, 7), result.stderr
    assert "host.os" in result.stdout and "toolchain.git" in result.stdout and "doctor:" not in result.stdout
    assert "doctor:" in result.stderr


def test_doctor_list_prints_the_checks_on_stdout():
    result = _run("doctor", "--list")
    assert result.exit_code == 0, result.stderr
    assert "what it looks at" in result.stdout and "what it looks at" not in result.stderr


def test_validate_list_prints_checks_and_presets_on_stdout(tmp_path):
    result = _run("-w", str(tmp_path / "ws"), "validate", "--list")
    assert result.exit_code == 0, result.stderr
    assert "vector-add" in result.stdout and "proves" in result.stdout
    assert "vector-add" not in result.stderr
    assert "preset scripts:" in result.stderr


def test_lock_prints_the_locked_sources_on_stdout(github_redirect, tmp_path):
    ws = new_workspace(github_redirect, tmp_path / "ws")
    result = ws.run("lock")
    assert result.exit_code == 0, result.stderr
    assert "flagtree-cpu" in result.stdout and "source" in result.stdout
    assert "lock file:" in result.stderr and "lock file:" not in result.stdout
