"""Repeated runs do not grow the workspace's logs/ without end: each kind keeps its newest
``logfiles.KEEP_PER_KIND`` files (issue 28 §5: a new logs/setup-*.json on every no-op run)."""

from __future__ import annotations

from pathlib import Path

from flagtree_cpu_build.logfiles import KEEP_PER_KIND
from tests.support.cli import new_workspace
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball


def test_repeated_no_op_setups_leave_the_newest_reports_only(world: GitWorld, tmp_path: Path,
                                                              http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    ws = new_workspace(world, tmp_path / "ws", always_set=(f"artifacts.llvm.url={url}",))
    (ws.root / "logs").mkdir(parents=True)
    mine = ws.root / "logs" / "my-notes.json"  # a user's own file there is not the tool's to remove
    mine.write_text("{}\n")
    for _ in range(KEEP_PER_KIND + 3):
        result = ws.run("setup", "--skip-build", "--ignore-host")
        assert result.exit_code == 0, result.stderr
    reports = sorted((ws.root / "logs").glob("setup-*.json"))
    assert len(reports) == KEEP_PER_KIND, [p.name for p in reports]
    assert mine.is_file()
    last = (ws.root / ".flagtree-cpu").rglob("last-setup.json")
    assert any(p.read_text() == max(reports, key=lambda p: p.stat().st_mtime_ns).read_text() for p in last)
