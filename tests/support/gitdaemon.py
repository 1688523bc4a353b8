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
import socket
import subprocess
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GitDaemon:
    def __init__(self, base_path: Path, env: dict[str, str] | None = None):
        self.base_path = base_path
        self.port = _free_port()
        self._process = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1",
             f"--port={self.port}", f"--base-path={base_path}", "--informative-errors", str(base_path)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"git daemon exited: {self._process.stderr.read().decode()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError("git daemon did not start listening")

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
        if self._process.stderr:
            self._process.stderr.close()
