"""`build --offline` lists every missing input at once: sources, downloads, the vendor's packages and the Python
prerequisites, not only the first vendor package it meets (issue 28, section 3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.envelope import error_of

VENDOR = "python.preinstalled=[vendor-torch>=2, vendor-npu]"


def test_an_offline_build_lists_vendor_packages_with_the_sources_downloads_and_prerequisites(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv/bin/python"
    result = CliRunner().invoke(app, ["--recipe", "triton-cpu", "-w", str(tmp_path / "ws"), "--set", VENDOR, "build",
                                      "--offline", "--python", str(python), "--json"])
    assert result.exit_code == 5, result.stdout
    error = error_of(result.stdout)
    assert "inputs of an offline build are missing; nothing was run" in error["message"]
    details = error["details"]
    assert any(d.startswith("source triton-cpu:") for d in details), details
    assert any(d.startswith("artifact llvm:") for d in details), details
    assert any(d.startswith(f"vendor-torch>=2 in {python}: missing") for d in details), details
    assert any(d.startswith(f"vendor-npu in {python}: missing") for d in details), details
    assert any(d.startswith("Python prerequisites missing in") for d in details), details
