"""Acceptance 1 of the air-gapped bundles: a bundle made in the loopback world sets up a fresh machine on which
every route is closed — and the network switch that closes the tool's own routes.

The connected side runs an online `setup --skip-build` (the reference state) and the real `bundle create`,
with the build prerequisite only a loopback PEP 503 index has. The board is a fresh HOME and workspace with
``FLAGTREE_CPU_NO_NETWORK=1`` (every HTTP connection of the tool refused, loopback included), git's
``protocol.allow=never`` (only ``file`` allowed, for the bundle and the local mirrors), no redirect to the
git world (which is stopped too), and pip's index on a dead port.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import Result

from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import error_of
from tests.support.facts import FACTS_LINKS
from tests.support.fetching import PATH_SET
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import TOOLS, build_venv, simple_index, tiny_wheel

PREREQUISITE = ("fixture-build-tool", "1.0")  # only the loopback index has it
LLVM_PATH = f"/public/llvm-builds/{TOP}.tar.gz"


def close_every_route(monkeypatch: pytest.MonkeyPatch, world: GitWorld, home: Path) -> None:
    """A fresh home on a machine without network, as far as the tool, git and pip can tell."""
    home.mkdir()
    (home / ".gitconfig").write_text("")  # no insteadOf redirect to the world
    for name, value in (("HOME", home), ("XDG_CACHE_HOME", home / ".cache"), ("XDG_CONFIG_HOME", home / ".config"),
                        ("GIT_CONFIG_GLOBAL", home / ".gitconfig"), ("FLAGTREE_CPU_NO_NETWORK", "1"),
                        ("PIP_INDEX_URL", "http://127.0.0.1:9/simple/"), ("GIT_CONFIG_COUNT", "2"),
                        ("GIT_CONFIG_KEY_0", "protocol.allow"), ("GIT_CONFIG_VALUE_0", "never"),
                        ("GIT_CONFIG_KEY_1", "protocol.file.allow"), ("GIT_CONFIG_VALUE_1", "always")):
        monkeypatch.setenv(name, str(value))
    world.stop()


def state_of(ws: Workspace) -> dict[str, object]:
    """What a setup --skip-build leaves that a later build reads: commits, links, the published LLVM tree."""
    llvm = Path.home() / ".triton" / "llvm" / TOP
    tree = sorted(str(p.relative_to(llvm)) for p in llvm.rglob("*"))
    return {"flagtree": ws.head(ws.flagtree), "flagtree-cpu": ws.head(ws.flagtree_cpu),
            "sleef": ws.head(ws.flagtree_cpu / "third_party" / "sleef"),
            "links": {link: os.readlink(ws.flagtree / link) for link, _target in FACTS_LINKS},
            "llvm": tree, "version.txt": (llvm / "version.txt").read_text()}


def test_setup_from_a_bundle_with_every_route_closed_reaches_the_online_state_and_builds(
        world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    url = http_server.serve(LLVM_PATH, llvm_tarball().data)
    index = simple_index(http_server, "/pypi", tiny_wheel(tmp_path / "wheel", *PREREQUISITE))
    torch_index = simple_index(http_server, "/whl/cpu", tiny_wheel(tmp_path / "torch", "fixture-torch", "2.0"))
    monkeypatch.setenv("PIP_INDEX_URL", index)  # pip's default index; torch's is the recipe's own
    sets = (f"artifacts.llvm.url={url}", f"python.build=[{PREREQUISITE[0]}]", "checks=[]",
            f'python.runtime=[{{requirement: "fixture-torch==2.0", index_url: "{torch_index}"}}]')
    online = new_workspace(world, tmp_path / "online", always_set=sets)
    done = online.run("setup", "--skip-build", "--ignore-host")
    assert done.exit_code == 0, done.stderr
    reference = state_of(online)
    bundle = tmp_path / "usb" / "board.bundle"
    bundle.parent.mkdir()
    made = online.run("bundle", "create", "-o", str(bundle))
    assert made.exit_code == 0, made.stderr
    for page in (f"/pypi/{PREREQUISITE[0]}/", "/whl/cpu/fixture-torch/"):
        assert http_server.requests_for(page), f"{page}: the wheel did not come from its index"

    close_every_route(monkeypatch, world, tmp_path / "board-home")
    asked = len(http_server.requests)
    board = new_workspace(world, tmp_path / "board", always_set=sets)
    setup = board.run("setup", "--bundle", str(bundle), "--offline", "--skip-build", "--ignore-host")
    assert setup.exit_code == 0, setup.stderr
    assert state_of(board) == reference

    record = tmp_path / "build-record.jsonl"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    python = build_venv(tmp_path / "venv", TOOLS)  # pybind11 and ninja; the recipe's prerequisite is not there
    built = board.run("build", "--offline", "--ignore-host", "--python", str(python))
    assert built.exit_code == 0, built.stderr
    [pip_log] = (board.root / "logs").glob("prerequisites-*.log")
    assert f"--no-index --find-links {board.root / '.flagtree-cpu' / 'wheelhouse'}" in pip_log.read_text()
    assert subprocess.run([str(python), "-c", "import fixture_build_tool"], check=False).returncode == 0
    assert "editable_wheel" in record.read_text(), "the fixture build did not run"
    assert len(http_server.requests) == asked, "the board reached the loopback server"


def run_fetch(ws: Workspace) -> Result:
    return ws.run("--json", "fetch")


def test_the_network_switch_refuses_every_connection_at_once(world: GitWorld, tmp_path: Path,
                                                             http_server: LoopbackHTTPServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    url = http_server.serve(LLVM_PATH, llvm_tarball().data)
    ws = new_workspace(world, tmp_path / "ws", always_set=(f"artifacts.llvm.url={url}", PATH_SET))
    monkeypatch.setenv("FLAGTREE_CPU_NO_NETWORK", "1")
    result = run_fetch(ws)
    assert result.exit_code == 4, result.stderr
    error = error_of(result.stdout)
    assert "FLAGTREE_CPU_NO_NETWORK=1" in error["message"] and url in " ".join(error["details"]), error
    assert "bundle import" in error["fix"], error
    assert http_server.requests == []  # not even loopback
    assert "trying again" not in result.stderr  # refused at once, not retried with backoff
    plan = ws.run("setup", "--dry-run", "--skip-build")  # the size question asks no server either
    assert http_server.requests == [], plan.stderr
    monkeypatch.setenv("FLAGTREE_CPU_NO_NETWORK", "0")
    result = run_fetch(ws)
    assert result.exit_code == 0, result.stderr
    assert http_server.requests_for(LLVM_PATH)
