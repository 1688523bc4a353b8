"""doctor's network.hosts judges whether anything still needs the network: on a board whose sources are at their
pins, artifacts published and verified and prerequisites installed, it is skipped with the reason, not failed
(issue 28, section 3)."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import ready_to_build
from tests.support.envelope import result_of
from tests.support.fetching import URL_PATH
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import llvm_tarball
from tests.support.venvs import TOOLS, build_venv


def network_hosts(ws, *args: str) -> tuple[int, dict]:
    result = ws.run("doctor", "--check", "network.hosts", "--json", *args)
    [finding] = result_of(result.stdout)["checks"]
    return result.exit_code, finding


def test_a_set_up_board_without_network_passes_doctor(github_redirect: GitWorld, tmp_path: Path,
                                                      http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve(URL_PATH, llvm_tarball().data)
    python = build_venv(tmp_path / "venv", TOOLS)
    ws = ready_to_build(github_redirect, tmp_path / "ws", url, "python.runtime=[]")
    http_server.close()  # the server of the download is gone, as on an air-gapped board
    code, finding = network_hosts(ws, "--python", str(python))
    assert code == 0, finding
    assert finding["status"] == "skip" and "nothing here needs the network" in finding["detail"]


def test_a_board_that_still_needs_a_download_probes_its_host(github_redirect: GitWorld, tmp_path: Path,
                                                             refused_port: int) -> None:
    from tests.support.cli import new_workspace

    url = f"http://127.0.0.1:{refused_port}{URL_PATH}"
    ws = new_workspace(github_redirect, tmp_path / "ws", always_set=(f"artifacts.llvm.url={url}",))
    assert ws.run("sync").exit_code == 0
    code, finding = network_hosts(ws)
    assert code == 7 and finding["status"] == "fail", finding
    assert f"artifacts.llvm (127.0.0.1:{refused_port}" in finding["detail"]
    assert "sources." not in finding["detail"]  # at their pins: not asked for
