"""Tables on a terminal never break a path mid-segment (issue 28 §5).

A user copies a path, a URL or a command out of `status`, setup's summary or `doctor`. On a narrow terminal the
prose columns wrap at spaces, a path stays whole on one line, and when a row cannot fit at all the path is elided
in the middle (``/tmp/…/logs/build.log``), so where it starts and which file it names stay readable. Piped
output stays one row per line, never wrapped.

Each command runs as a real process on a real pseudo-terminal of 60 or 80 columns, in a workspace whose path is
longer than the terminal is wide; its piped output (unwrapped) gives the paths the terminal must show whole.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator

import pytest

from tests.support.cli import Workspace, new_workspace
from tests.support.gitworld import GitWorld, private_copy
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball

pytestmark = pytest.mark.xdist_group("tests/integration/test_table_paths.py")

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# a path-like token of the unwrapped output: it has a folder separator or names a URL
PATH_LIKE = re.compile(r"/")


@pytest.fixture(scope="module")
def long_ws(tmp_path_factory: pytest.TempPathFactory, git_world: GitWorld) -> Iterator[Workspace]:
    """One `setup --skip-build` in a workspace whose path alone is wider than the terminal."""
    base = tmp_path_factory.mktemp("tables")
    world = private_copy(git_world, base / "world")
    server = LoopbackHTTPServer()
    url = server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
    root = base / "a-workspace-folder-whose-name-is-long" / "another-rather-long-folder-name" / "ws"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GIT_CONFIG_GLOBAL", str(world.gitconfig))
        ws = new_workspace(world, root, always_set=(f"artifacts.llvm.url={url}",))
        result = ws.run("setup", "--skip-build", "--ignore-host")
        assert result.exit_code == 0, result.stderr
        yield ws
    server.close()


def _environment(columns: int | None) -> dict[str, str]:
    env = dict(os.environ, TERM="xterm-256color")
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return env


def on_terminal(ws: Workspace, *args: str, columns: int) -> str:
    """The command's stdout and stderr as a terminal of ``columns`` shows them (a real pty: rich and the tool see a
    terminal), without colour codes."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen([sys.executable, "-m", "flagtree_cpu_build", *ws.argv(*args)], stdin=subprocess.DEVNULL,
                               stdout=secondary, stderr=secondary, env=_environment(columns), close_fds=True)
    os.close(secondary)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([primary], [], [], 300)
            assert ready, f"{args}: no output for 300 s"
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(primary)
        process.wait(timeout=300)
    text = b"".join(chunks).decode("utf-8", "replace")
    return ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def piped(ws: Workspace, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "flagtree_cpu_build", *ws.argv(*args)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=_environment(None), check=False, timeout=300)
    return done.stdout + done.stderr


def path_tokens(text: str) -> set[str]:
    return {token for token in text.split() if PATH_LIKE.search(token)}


def shown_whole_or_elided(path: str, lines: list[str]) -> bool:
    for line in lines:
        for token in line.split():
            if token == path:
                return True
            head, mark, tail = token.partition("…")
            if mark and head and tail and path.startswith(head) and path.endswith(tail) \
                    and len(head) + len(tail) < len(path):
                return True
    return False


@pytest.mark.parametrize("columns", [60, 80])
@pytest.mark.parametrize("command", [("status",), ("setup", "--skip-build", "--ignore-host"), ("doctor",),
                                     ("validate", "--list")], ids=["status", "setup", "doctor", "validate-list"])
def test_a_terminal_table_never_splits_a_path(long_ws: Workspace, command: tuple[str, ...], columns: int) -> None:
    whole = piped(long_ws, *command)
    assert str(long_ws.root) in whole, whole
    shown = on_terminal(long_ws, *command, columns=columns)
    lines = shown.splitlines()
    broken = sorted(p for p in path_tokens(whole) if not shown_whole_or_elided(p, lines))
    assert not broken, f"split across lines on a {columns}-column terminal: {broken}\n{shown}"


def test_a_terminal_wide_enough_elides_nothing(long_ws: Workspace) -> None:
    shown = on_terminal(long_ws, "status", columns=300)
    lines = shown.splitlines()
    assert "…" not in shown, shown
    assert all(p in {t for line in lines for t in line.split()} for p in path_tokens(piped(long_ws, "status"))), shown


@pytest.mark.parametrize("command", [("status",), ("setup", "--skip-build", "--ignore-host")], ids=["status", "setup"])
def test_piped_tables_keep_each_row_on_one_line(long_ws: Workspace, command: tuple[str, ...]) -> None:
    """On a pipe (stdout for a listing, stderr for setup's summary) a row is one line: nothing wrapped or elided,
    whatever COLUMNS says."""
    done = subprocess.run([sys.executable, "-m", "flagtree_cpu_build", *long_ws.argv(*command)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=_environment(60), check=False,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    text = done.stdout + done.stderr
    assert "…" not in text, text
    links_row = [line for line in text.splitlines() if line.split()[:1] == ["links"]]
    assert len(links_row) == 1, text
    if command == ("status",):  # the detail names the folder the links are in, whole, on the row's own line
        assert f"all 12 in place in {long_ws.root / 'FlagTree'}" in links_row[0], text
    artifacts_row = [line for line in text.splitlines() if line.split()[:1] == ["artifacts"]]
    assert len(artifacts_row) == 1 and ".triton/llvm/llvm-" in artifacts_row[0], text
