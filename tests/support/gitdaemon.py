"""``git daemon`` on 127.0.0.1 serving a folder of bare repositories (git:// URLs).

File URLs skip git's network code paths (negotiation, packfile transfer); the daemon
exercises them without leaving the machine, and lets benchmarks compare the tool with
a plain ``git clone`` over a real protocol.

The daemon and the ``upload-pack`` it forks per connection share a process group of their
own, so a test can freeze the server (``freeze()``: SIGSTOP to the group — connections are
still accepted by the kernel, but no byte is ever sent) and let it go on (``thaw()``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.support.ports import start_on_free_port


class GitDaemon:
    def __init__(self, base_path: Path, env: dict[str, str] | None = None):
        self.base_path = base_path

        def start(port: int) -> subprocess.Popen[bytes]:
            # --verbose: the daemon says "Ready to rumble" once it listens (and logs each connection, which
            # ServerOutput reads away)
            return subprocess.Popen(
                ["git", "daemon", "--verbose", "--reuseaddr", "--export-all", "--listen=127.0.0.1", f"--port={port}",
                 f"--base-path={base_path}", "--informative-errors", str(base_path)],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True)

        self._process, self.port, self._output = start_on_free_port(start, b"Ready to rumble", what="git daemon")

    def url(self, repo: str) -> str:
        return f"git://127.0.0.1:{self.port}/{repo}"

    def freeze(self) -> None:
        """Stop the daemon and every connection it serves, mid-transfer or before the first byte."""
        self._signal_group(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal_group(signal.SIGCONT)

    def _signal_group(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self._process.pid, sig)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        self.thaw()  # a stopped process cannot act on SIGTERM
        self._signal_group(signal.SIGTERM)
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self._signal_group(signal.SIGKILL)
            self._process.wait(timeout=5)
        self._signal_group(signal.SIGKILL)  # upload-packs still serving a connection
