"""A TCP relay on 127.0.0.1 in front of a loopback server, for transfer faults in the middle.

The server's bytes reach the client at most ``rate`` bytes per second, so a transfer of a few
MB is still under way when the test acts; ``freeze()`` stops relaying in both directions while
every connection stays open (a server or link gone silent mid-transfer: the client waits and
receives nothing); ``thaw()`` and ``rate = None`` let later connections run at full speed.
``bytes_to_client`` counts what was relayed, so a test can wait until a transfer is under way.
"""

from __future__ import annotations

import socket
import threading
import time


class ThrottledProxy:
    CHUNK = 8192

    def __init__(self, upstream_port: int, rate: float | None = None):
        self.upstream_port = upstream_port
        self.rate = rate
        self.bytes_to_client = 0
        self._running = threading.Event()
        self._running.set()  # cleared while frozen
        self._closed = False
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        return f"git://127.0.0.1:{self.port}/{path}"

    def freeze(self) -> None:
        self._running.clear()

    def thaw(self) -> None:
        self._running.set()

    def wait_for_bytes(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.bytes_to_client < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.bytes_to_client} bytes relayed after {timeout} s")
            time.sleep(0.02)

    def close(self) -> None:
        self._closed = True
        self._running.set()
        for sock in [self._listener, *self._sockets]:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:  # the server went away (a test stopped it): the client sees its connection close
                client.close()
                continue
            self._sockets += [client, upstream]
            threading.Thread(target=self._relay, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._relay, args=(upstream, client, True), daemon=True).start()

    def _relay(self, source: socket.socket, dest: socket.socket, to_client: bool) -> None:
        try:
            while True:
                self._running.wait()
                data = source.recv(self.CHUNK)
                if not data:
                    break
                self._running.wait()  # frozen while this chunk was in flight: hold it
                if self._closed:
                    break
                dest.sendall(data)
                if to_client:
                    self.bytes_to_client += len(data)
                    if self.rate:
                        time.sleep(len(data) / self.rate)
        except OSError:
            pass
        finally:
            for sock in (source, dest):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
