"""A TCP server on 127.0.0.1 (port 0) that misbehaves in one chosen way, for the compile cache's probe.

| behaviour | what a client sees |
|---|---|
| `silent` | the connection is accepted, what it sends is read, nothing ever comes back (until `close()`) |
| `close` | the connection is accepted and closed at once |
| `reply` | whatever it sends is answered with `reply` after `delay_s`, then the connection stays open |

`accepted` counts connections: a build that took the server for dead must not have connected again after
the tool's own probe.
"""

from __future__ import annotations

import socket
import threading


class HostileServer:
    def __init__(self, behaviour: str, reply: bytes = b"", delay_s: float = 0.0):
        assert behaviour in ("silent", "close", "reply"), behaviour
        self.behaviour, self.reply, self.delay_s = behaviour, reply, delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self.accepted = 0
        self.received: list[bytes] = []
        self._open: list[socket.socket] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=f"hostile-{behaviour}", daemon=True)
        self._thread.start()

    def url(self, scheme: str, path: str = "") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.accepted += 1
            if self.behaviour == "close":
                conn.close()
                continue
            with self._lock:
                self._open.append(conn)
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        first = b""
        while not self._stop.is_set() and not first:
            try:
                first = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not first:
                return
        with self._lock:
            self.received.append(first)
        if self.behaviour == "reply" and not self._stop.wait(self.delay_s):
            try:
                conn.sendall(self.reply)
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for conn in self._open:
                conn.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

