"""The installer (installer.py) with the real uv binary: the python stage installs through `uv pip install --python`
from a loopback PEP 503 index (reached through pip's own PIP_INDEX_URL, carried over to uv) and from an imported
wheelhouse with --offline; `--installer`, $FLAGTREE_CPU_INSTALLER and python.installer choose; doctor says which
and why. Hostile: a `uv` on PATH that prints garbage, is too old, hangs, or says it installed what it did not; a pip
setting uv would not read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build import installer
from flagtree_cpu_build.cli import app
from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import error_of, result_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.venvs import simple_index, tiny_wheel

OWN_UV = Path(sys.executable).parent / "uv"
pytestmark = pytest.mark.skipif(not OWN_UV.exists(), reason="the test venv has no uv (the test extra installs it)")


@pytest.fixture
def ws(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("PIP_INDEX_URL", simple_index(http_server, "/pypi", tiny_wheel(tmp_path / "a",
                                                                                       "fixture-build-tool", "1.0")))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    return new_workspace(world, tmp_path / "ws", always_set=("python.build=[fixture-build-tool]",))


def prerequisites(result: Result) -> dict:
    assert result.exit_code == 0, result.stderr
    return next(a for a in result_of(result.stdout)["actions"] if a["subject"] == "prerequisites")


def has(python: Path, module: str) -> bool:
    return subprocess.run([str(python), "-c", f"import {module}"], check=False).returncode == 0


def fake_uv(folder: Path, body: str) -> Path:
    """A `uv` executable (a shell script) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    uv = folder / "uv"
    uv.write_text("#!/bin/sh\n" + body + "\n")
    uv.chmod(0o755)
    return uv


def put_first_on_path(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def hide_own_uv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The tool as if its venv had no uv: it runs from a folder holding only a link to its interpreter."""
    bare = tmp_path / "tool-bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(bare / "python"))


def doctor_installer(ws: Workspace, *args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "doctor", "--json", "--only", "python.installer", "-w", str(ws.root)])
    return next(f for f in result_of(result.stdout)["checks"] if f["id"] == "python.installer")


def test_auto_installs_with_uv_from_pips_index_setting_then_does_nothing(ws: Workspace,
                                                                          http_server: LoopbackHTTPServer) -> None:
    first = ws.run("python", "--skip-runtime", "--json")
    done = prerequisites(first)
    assert done["status"] == "created" and done["installer"] == "uv"
    assert f"+ {OWN_UV} pip install --python {ws.root / '.venv' / 'bin' / 'python'} fixture-build-tool" in " ".join(
        first.stderr.split())
    assert has(ws.root / ".venv" / "bin" / "python", "fixture_build_tool")
    assert http_server.requests_for("/pypi/fixture-build-tool/")  # PIP_INDEX_URL reached uv as UV_INDEX_URL
    asked = len(http_server.requests)
    again = ws.run("python", "--skip-runtime", "--json")
    assert prerequisites(again)["status"] == "ok" and len(http_server.requests) == asked


def test_installer_pip_and_the_environment_and_the_recipe_choose_pip(ws: Workspace,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    chose = ws.run("--installer", "pip", "python", "--skip-runtime", "--json")
    assert prerequisites(chose)["installer"] == "pip"
    assert f"{ws.root / '.venv' / 'bin' / 'python'} -m pip install fixture-build-tool" in " ".join(
        chose.stderr.split())
    assert doctor_installer(ws, "--installer", "pip")["detail"] == "pip (--installer)"
    monkeypatch.setenv("FLAGTREE_CPU_INSTALLER", "pip")
    assert doctor_installer(ws)["detail"] == "pip ($FLAGTREE_CPU_INSTALLER)"
    monkeypatch.delenv("FLAGTREE_CPU_INSTALLER")
    said = doctor_installer(ws, "--set", "python.installer=pip")["detail"]
    assert said.startswith("pip (python.installer of ")
    assert doctor_installer(ws)["detail"] == f"uv {installer.probe(OWN_UV, os.environ)[0]} at {OWN_UV} (auto: found)"


def test_offline_uv_installs_from_the_imported_wheelhouse_and_asks_no_index(ws: Workspace, tmp_path: Path,
                                                                              http_server: LoopbackHTTPServer) -> None:
    wheelhouse = ws.root / ".flagtree-cpu" / "wheelhouse"
    wheelhouse.mkdir(parents=True)
    wheel = tiny_wheel(tmp_path / "w", "fixture-build-tool", "1.0")
    (wheelhouse / wheel.name).write_bytes(wheel.read_bytes())
    done = prerequisites(ws.run("python", "--offline", "--skip-runtime", "--json"))
    assert done["installer"] == "uv" and done["wheelhouse"] == str(wheelhouse)
    assert has(ws.root / ".venv" / "bin" / "python", "fixture_build_tool")
    assert not http_server.requests  # --no-index: the loopback index set in PIP_INDEX_URL was never asked


@pytest.mark.parametrize(("body", "why"), [
    ('echo "Welcome to uv-as-a-service!"', "did not say a uv version (exit 0: 'Welcome to uv-as-a-service!')"),
    ('echo "uv 0.1.44"', "uv 0.1.44 is older than 0.5.0"),
    ("exit 3", "did not say a uv version (exit 3"),
])
def test_an_unusable_uv_on_path_is_passed_over_and_said(ws: Workspace, tmp_path: Path, body: str, why: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    bad = fake_uv(tmp_path / "bin", body)
    put_first_on_path(monkeypatch, bad.parent)
    finding = doctor_installer(ws)
    assert finding["status"] == "ok" and f"at {OWN_UV} (auto: found)" in finding["detail"]
    assert f"passed over: {bad}: " in finding["detail"] and why in finding["detail"]
    hide_own_uv(monkeypatch, tmp_path)
    refused = ws.run("--installer", "uv", "python", "--skip-runtime", "--json")
    assert refused.exit_code == 2
    error = error_of(refused.stdout)
    assert f"no usable uv (--installer): {bad}: " in error["message"] and why in error["message"]
    assert "pip install 'uv>=0.5.0'" in error["fix"]
    assert not has(ws.root / ".venv" / "bin" / "python", "fixture_build_tool")
    done = prerequisites(ws.run("python", "--skip-runtime", "--json"))
    assert done["installer"] == "pip"  # auto without a usable uv: pip, as before uv existed


@pytest.mark.timeout(120)
def test_a_hanging_uv_is_stopped_at_its_deadline_and_auto_goes_on_with_pip(ws: Workspace, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pid_file = tmp_path / "uv.pid"
    hung = fake_uv(tmp_path / "bin", f"echo $$ > {pid_file}\nexec sleep 600")
    put_first_on_path(monkeypatch, hung.parent)
    hide_own_uv(monkeypatch, tmp_path)
    monkeypatch.setattr(installer, "PROBE_TIMEOUT_S", 1.0)
    done = prerequisites(ws.run("python", "--skip-runtime", "--json"))
    assert done["installer"] == "pip"
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the hung `uv --version` outlived the probe"
    finding = doctor_installer(ws)
    assert f"{hung}: `uv --version` did not answer within 1 s" in finding["detail"]


def test_a_uv_that_says_it_installed_what_it_did_not_is_caught_by_the_recheck(ws: Workspace, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    liar = fake_uv(tmp_path / "bin", 'if [ "$1" = "--version" ]; then echo "uv 0.13.9"; exit 0; fi\n'
                   "echo 'Installed 1 package in 0.1ms'; echo '\\x00\\x1b[31mgarbage'; exit 0")
    put_first_on_path(monkeypatch, liar.parent)
    result = ws.run("--installer", "uv", "python", "--skip-runtime", "--json")
    assert result.exit_code == 5
    error = error_of(result.stdout)
    assert error["message"] == "Python prerequisites are still missing after uv ran"
    assert any("fixture-build-tool" in line for line in error["details"])


def test_a_pip_setting_uv_does_not_read_makes_auto_take_pip_and_explicit_uv_stop(
        ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = {os.environ['PIP_INDEX_URL']}\n")
    monkeypatch.delenv("PIP_INDEX_URL")  # the index comes from the file alone, which uv would not read
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    done = prerequisites(ws.run("python", "--skip-runtime", "--json"))
    assert done["installer"] == "pip" and has(ws.root / ".venv" / "bin" / "python", "fixture_build_tool")
    assert f"does not read pip configuration file {conf} ([global] index-url)" in doctor_installer(ws)["detail"]
    refused = ws.run("--installer", "uv", "python", "--skip-runtime", "--json")
    assert refused.exit_code == 0  # all is installed already: no installer is needed, so none is chosen
    finding = doctor_installer(ws, "--installer", "uv")
    assert finding["status"] == "fail"
    assert f"uv was chosen (--installer) but uv does not read pip configuration file {conf}" in finding["detail"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
