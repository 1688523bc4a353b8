"""A real Redis server on loopback (Debian's redis-server), for ccache's remote storage."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from tests.support.ports import start_on_free_port


def missing_parts() -> str | None:
    """Why the shared-cache tests cannot run here, or None."""
    absent = [tool for tool in ("redis-server", "ccache", "g++") if shutil.which(tool) is None]
    if absent:
        return f"{', '.join(absent)} not installed (apt-get install redis-server ccache g++; .ci/run does)"
    return None


class RedisServer:
    """`redis-server` in the foreground on 127.0.0.1:<free port>, nothing saved to disk; stop() ends it.
    ``password``: the server asks for it (`requirepass`); freeze()/thaw() stop and continue the process (a
    server that keeps its connections open and answers nothing)."""

    def __init__(self, workdir: Path, password: str | None = None):
        workdir.mkdir(parents=True, exist_ok=True)

        def start(port: int) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--daemonize", "no", "--dir", str(workdir), *(("--requirepass", password) if password else ())],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

        process, self.port, self._output = start_on_free_port(start, b"Ready to accept connections",
                                                              what="redis-server")
        self._process: subprocess.Popen[bytes] | None = process
        self.url = f"redis://127.0.0.1:{self.port}"

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def keys(self) -> int:
        """How many entries the server holds (redis-cli when installed, else -1)."""
        if shutil.which("redis-cli") is None:
            return -1
        out = subprocess.run(["redis-cli", "-p", str(self.port), "dbsize"], capture_output=True, text=True)
        return int(out.stdout.strip() or -1)

    def freeze(self) -> None:
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self._process is None:
            return
        self.thaw()  # a stopped process would not act on SIGTERM
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
