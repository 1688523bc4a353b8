"""Loopback ports for the servers tests start, and for URLs nothing must answer: never a guess that is trusted.

A port learnt by binding to port 0 and closing is only a guess: between the close and the server's own bind,
anything on the machine (another test, another worker, another build) may take it, and the test then talks to a
stranger or its server fails to start. So:

- ``start_on_free_port`` starts a server that cannot be handed a bound socket (git daemon, redis-server) on such
  a port, and trusts it only once the server itself says it is listening (its own log line); a server that lost
  the race exits, and is started again on another port.
- ``refusing_port`` holds a port bound without listening for as long as a test needs it: the kernel refuses
  every connection to it (what "nothing listens there" means) and gives it to no other process meanwhile.
"""

from __future__ import annotations

import collections
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, AnyStr


def _bound_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port where every connection is refused, reserved until the block ends."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))  # bound, never listening: connections get a reset, nobody else gets the port
        yield held.getsockname()[1]


class ServerOutput:
    """A started process's output (a server's log, or a CLI's stderr), read to its end by a thread (a full pipe would
    stop the process), so a test waits for a line it prints instead of for a while; the last ``keep`` lines are
    kept (bytes, or text for a stream opened with ``text=True``)."""

    def __init__(self, process: subprocess.Popen, stream: IO | None = None, keep: int | None = 50) -> None:
        stream = process.stdout if stream is None else stream
        assert stream is not None
        self.lines: collections.deque = collections.deque(maxlen=keep)
        self._seen = threading.Condition()
        self._done = False
        self._empty = stream.read(0)  # b"" or "": what readline gives at the end
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in iter(stream.readline, self._empty):
            with self._seen:
                self.lines.append(line)
                self._seen.notify_all()
        with self._seen:
            self._done = True
            self._seen.notify_all()
        stream.close()

    def wait_for(self, marker: AnyStr, timeout_s: float) -> bool:
        """True once a line holding ``marker`` was printed; False when the output ended or time ran out first."""
        deadline = time.monotonic() + timeout_s
        with self._seen:
            while not any(marker in line for line in self.lines):
                left = deadline - time.monotonic()
                if self._done or left <= 0:
                    return False
                self._seen.wait(left)
            return True

    def text(self, timeout_s: float = 0) -> str:
        """What was kept; after waiting up to ``timeout_s`` for the end of the output (the process has exited)."""
        self._thread.join(timeout_s)
        with self._seen:
            kept = self._empty.join(self.lines)
        return kept.decode("utf-8", "replace") if isinstance(kept, bytes) else kept


Started = tuple[subprocess.Popen[bytes], int, ServerOutput]  # the server, its port, its output


def start_on_free_port(start: Callable[[int], subprocess.Popen[bytes]], ready: bytes, *, what: str,
                       attempts: int = 20, timeout_s: float = 30.0, keep: int | None = 50) -> Started:
    """``start(port)`` (a process whose stdout carries its log, stderr merged) on a port the kernel just handed out,
    until the server prints ``ready``; a server that exits first (it lost the port) is started again elsewhere.
    ``keep``: the lines of its output kept (None: all, for a test that counts what the server did)."""
    last = ""
    for _ in range(attempts):
        port = _bound_port()
        process = start(port)
        output = ServerOutput(process, keep=keep)
        if output.wait_for(ready, timeout_s):
            return process, port, output
        if process.poll() is None:  # neither ready nor gone: stuck, not a lost race
            process.kill()
            process.wait()
            raise RuntimeError(f"{what} on port {port} did not say it was ready in {timeout_s:g} s:\n{output.text()}")
        process.wait()
        last = output.text()
    raise RuntimeError(f"{what} could not listen on any of {attempts} ports the kernel handed out:\n{last}")
