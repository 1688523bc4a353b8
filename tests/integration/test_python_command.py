"""`flagtree-cpu python`: setup's python stage on its own — the workspace venv, then the recipe's build and (unless
--skip-runtime) run-time prerequisites from their indexes, on a loopback PEP 503 index; nothing when all is there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flagtree_cpu_build.locking import exclusive
from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.venvs import simple_index, tiny_wheel


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("PIP_INDEX_URL", simple_index(http_server, "/pypi", tiny_wheel(tmp_path / "a",
                                                                                       "fixture-build-tool", "1.0")))
    torch_index = simple_index(http_server, "/whl/cpu", tiny_wheel(tmp_path / "b", "fixture-torch", "2.0"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)  # the workspace venv, not the test runner's
    return new_workspace(world, tmp_path / "ws", always_set=(
        "python.build=[fixture-build-tool]",
        f'python.runtime=[{{requirement: "fixture-torch==2.0", index_url: "{torch_index}"}}]'))


def actions(result_stdout: str) -> dict[str, str]:
    return {a["subject"]: a["status"] for a in result_of(result_stdout)["actions"]}


def imports(python: Path, modules: str) -> bool:
    return subprocess.run([str(python), "-c", f"import {modules}"], check=False).returncode == 0


def test_python_makes_the_venv_and_installs_what_is_missing_then_nothing(ws: Workspace,
                                                                         http_server: LoopbackHTTPServer) -> None:
    venv_python = ws.root / ".venv" / "bin" / "python"
    first = ws.run("python", "--skip-runtime", "--json")
    assert first.exit_code == 0, first.stderr
    assert result_of(first.stdout)["stage"] == "python"
    assert result_of(first.stdout)["seconds"] > 0  # the venv and the install are timed ("created in 0.00s" was)
    assert actions(first.stdout) == {"venv": "created", "prerequisites": "created", "run-time prerequisites": "skipped"}
    assert imports(venv_python, "fixture_build_tool") and not imports(venv_python, "fixture_torch")
    assert not http_server.requests_for("/whl/cpu/fixture-torch/")  # --skip-runtime: torch's index not asked

    second = ws.run("python", "--json")
    assert second.exit_code == 0, second.stderr
    assert actions(second.stdout) == {"prerequisites": "created"} and imports(venv_python, "fixture_torch")

    asked = len(http_server.requests)
    again = ws.run("python")
    assert again.exit_code == 0, again.stderr
    assert "python: ok" in again.stderr and len(http_server.requests) == asked  # no pip, no index


def test_offline_lists_what_is_missing_and_how_to_get_it(ws: Workspace, http_server: LoopbackHTTPServer) -> None:
    result = ws.run("python", "--offline", "--json")
    assert result.exit_code == 5
    error = error_of(result.stdout)
    assert error["code"] == "build" and "--offline forbids pip" in error["message"]
    assert "pip" in error["fix"] and any("fixture-build-tool" in line for line in error["details"])
    assert not http_server.requests


def test_python_holds_the_workspace(ws: Workspace) -> None:
    lock = ws.root / ".flagtree-cpu" / "workspace.lock"
    with exclusive(lock, note="build"):
        result = ws.run("python", "--json")
    assert result.exit_code == 8
    assert error_of(result.stdout)["code"] == "busy" and not (ws.root / ".venv").exists()
