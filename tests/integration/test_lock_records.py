"""`lock` writes a lock that `--frozen` accepts (a tree already published and verified has its digest there), and
the lock's served_from survives later runs that download nothing (issue 28, section 3)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.cli import Workspace, new_workspace
from tests.support.fetching import PATH_SET, URL_PATH
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import llvm_tarball


def locked_llvm(lock_file: Path) -> dict:
    return yaml.safe_load(lock_file.read_text())["artifacts"]["llvm"]


def fetched(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer) -> tuple[Workspace, str]:
    """A workspace whose LLVM was fetched from the loopback server, and the URL it came from."""
    url = http_server.serve(URL_PATH, llvm_tarball().data)
    ws = new_workspace(world, tmp_path / "ws", always_set=(f"artifacts.llvm.url={url}", PATH_SET))
    assert ws.run("fetch").exit_code == 0
    return ws, url


def test_lock_records_a_published_tree_so_frozen_accepts_it(github_redirect: GitWorld, tmp_path: Path,
                                                            http_server: LoopbackHTTPServer) -> None:
    ws, _url = fetched(github_redirect, tmp_path, http_server)
    sha = locked_llvm(ws.lock_file)["sha256"]
    ws.lock_file.unlink()  # a lock written afresh, with the tree still published
    result = ws.run("lock")
    assert result.exit_code == 0, result.stderr
    assert locked_llvm(ws.lock_file)["sha256"] == sha
    frozen = ws.run("fetch", "--frozen")
    assert frozen.exit_code == 0, frozen.stderr
    assert [r.method for r in http_server.requests_for(URL_PATH)] == ["GET"]  # nothing downloaded again


def test_served_from_survives_runs_that_download_nothing(github_redirect: GitWorld, tmp_path: Path,
                                                          http_server: LoopbackHTTPServer) -> None:
    ws, url = fetched(github_redirect, tmp_path, http_server)
    assert locked_llvm(ws.lock_file)["served_from"] == url
    for command in (("fetch",), ("lock",), ("fetch",)):
        result = ws.run(*command)
        assert result.exit_code == 0, (command, result.stderr)
        assert locked_llvm(ws.lock_file)["served_from"] == url, command
