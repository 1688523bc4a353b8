"""The venv flagtree-cpu itself runs from is never the build's target unless `--python` names it.

Activating the checkout's `.venv` is how a newcomer reaches the `flagtree-cpu` command; the tool must not then
plan `pip install torch...` into its own environment. Each test runs the tool as a real process with a real venv's
python (the test venv, which imports this checkout) and VIRTUAL_ENV set as `activate` sets it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.envelope import result_of

CHECKOUT = Path(__file__).resolve().parents[2]


def _status(workdir: Path, virtual_env: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIRTUAL_ENV": str(virtual_env)}
    return subprocess.run([sys.executable, "-m", "flagtree_cpu_build", "-w", str(workdir), *extra],
                          cwd=CHECKOUT, env=env, capture_output=True, text=True, check=False, timeout=600)


def _python_item(result: dict) -> dict:
    return next(item for item in result["items"] if item["area"] == "python")


def test_the_tools_own_active_venv_is_passed_over_for_the_workspace_venv(tmp_path):
    done = _status(tmp_path / "ws", Path(sys.prefix), "status", "--json")
    assert done.returncode == 0, done.stderr
    result = result_of(done.stdout)
    workspace_python = str(tmp_path / "ws" / ".venv" / "bin" / "python")
    assert result["python"] == workspace_python
    item = _python_item(result)
    assert item["subject"] == workspace_python
    assert sys.prefix not in item["subject"]
    # the plan says why the active venv was not used, and how to use it anyway
    detail = " ".join(item["detail"].split())
    assert f"the active venv {sys.prefix} is flagtree-cpu's own" in detail
    assert f"--python {Path(sys.prefix) / 'bin' / 'python'}" in detail


def test_python_naming_the_tools_own_venv_makes_it_the_target(tmp_path):
    own = str(Path(sys.prefix) / "bin" / "python")
    done = _status(tmp_path / "ws", Path(sys.prefix), "status", "--python", own, "--json")
    assert done.returncode == 0, done.stderr
    assert result_of(done.stdout)["python"] == own


def test_another_active_venv_is_still_the_target(tmp_path):
    other = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True, timeout=600)
    done = _status(tmp_path / "ws", other, "status", "--json")
    assert done.returncode == 0, done.stderr
    result = result_of(done.stdout)
    assert result["python"] == str(other / "bin" / "python")
    assert "flagtree-cpu's own" not in _python_item(result)["detail"]
