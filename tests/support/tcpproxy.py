"""A TCP relay on 127.0.0.1 in front of a loopback server, for transfer faults in the middle.

The server's bytes reach the client at most ``rate`` bytes per second, so a transfer of a few
MB is still under way when the test acts; ``freeze()`` stops relaying in both directions while
every connection stays open (a server or link gone silent mid-transfer: the client waits and
receives nothing); ``thaw()`` and ``rate = None`` let later connections run at full speed.
``bytes_to_client`` counts what was relayed, so a test can wait until a transfer is under way.
``hold_after=N`` is a gate instead of a throttle: the relay freezes by itself once N bytes reached the client
(``holding`` is then set), so a test acts on a transfer caught mid-way without waiting for slow bytes.

No socket is closed under a thread that may still use it: a descriptor closed while another thread is about to
accept() or recv() on it is handed to the next socket the process opens (another test's proxy, server or client),
and the old thread then takes that socket's connections. (It did: a closed proxy's accept thread took the next
test's clone and reset it, "Connection reset by peer", about one run in three.) So ``close()`` wakes the accept
thread with shutdown() and waits for it to close the listener itself; a relayed connection is shut down by the
first of its two relays to end and closed by the second.
"""

from __future__ import annotations

import socket
import threading
import time


class ThrottledProxy:
    CHUNK = 8192

    def __init__(self, upstream_port: int, rate: float | None = None, hold_after: int | None = None):
        self.upstream_port = upstream_port
        self.rate = rate
        self.hold_after = hold_after  # freeze once this many bytes reached the client (then None: once)
        self.holding = threading.Event()
        self.bytes_to_client = 0
        self._running = threading.Event()
        self._running.set()  # cleared while frozen
        self._closed = False
        self._lock = threading.Lock()
        self._open: dict[int, list] = {}  # relayed connections by id: [client, upstream, directions ended]
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

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
        _shut(self._listener)  # accept() returns at once (EINVAL); the accept thread closes the listener
        self._acceptor.join(timeout=10)
        with self._lock:
            connections = list(self._open.values())
        for client, upstream, _ in connections:
            _shut(client, upstream)  # wakes both relays, which then close the sockets

    def _accept(self) -> None:
        try:
            self._serve()
        finally:
            self._listener.close()

    def _serve(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closed:  # accepted just as the proxy closed
                client.close()
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:  # the server went away (a test stopped it): the client sees its connection close
                client.close()
                continue
            with self._lock:
                self._open[id(client)] = [client, upstream, 0]
            threading.Thread(target=self._relay, args=(client, upstream, id(client), False), daemon=True).start()
            threading.Thread(target=self._relay, args=(upstream, client, id(client), True), daemon=True).start()

    def _relay(self, source: socket.socket, dest: socket.socket, key: int, to_client: bool) -> None:
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
                    if self.hold_after is not None and self.bytes_to_client >= self.hold_after:
                        self.hold_after = None
                        self.freeze()
                        self.holding.set()
                    if self.rate:
                        time.sleep(len(data) / self.rate)
        except OSError:
            pass
        finally:
            self._ended(key)

    def _ended(self, key: int) -> None:
        """The first direction to end shuts the connection down (the other's recv returns at once); the second
        closes it."""
        with self._lock:
            connection = self._open[key]
            connection[2] += 1
            last = connection[2] == 2
            if last:
                del self._open[key]
        client, upstream, _ = connection
        if not last:
            _shut(client, upstream)
            return
        client.close()
        upstream.close()


def _shut(*sockets: socket.socket) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
