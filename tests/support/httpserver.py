"""A real HTTP server on 127.0.0.1 with Range support and injectable faults.

Downloads are tested against this, not against a mock of ``requests``: the tool's
own HTTP code talks to a real socket. Faults are per path and count down, so "fail
twice with 503, then serve" or "drop the connection after 1 MiB once" are one line:

    server.serve("/llvm.tar.gz", data, Faults(status=503, status_times=2))
"""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Faults:
    status: int | None = None  # answer with this status ...
    status_times: int | None = None  # ... this many times, then serve normally (None: always)
    drop_after: int | None = None  # send only this many body bytes, then cut the connection ...
    drop_times: int | None = None  # ... this many times (None: always)
    rate: int | None = None  # bytes per second (throttled body)
    ignore_range: bool = False  # answer Range requests with 200 and the whole body
    wrong_content_range: bool = False  # answer 206 with a Content-Range for other bytes
    # wrong content, consistent headers (Content-Length, Range math): as if the file *were* these bytes
    truncate_to: int | None = None  # only the first N bytes of the file ...
    replace_with: bytes | None = None  # ... or other bytes altogether ...
    bad_times: int | None = None  # ... this many times (counted per GET), then the real file (None: always)
    no_length: bool = False  # no Content-Length: the body ends when the connection closes
    head_without_length: bool = False  # HEAD answers 200 without a Content-Length
    head_status: int | None = None  # HEAD answers this status (405: HEAD not allowed) while GET serves
    stall_after: int | None = None  # send this many body bytes, then go silent with the connection open ...
    stall_times: int | None = None  # ... this many times (None: always); a stalled answer ends when the server closes
    # a gate: send this many body bytes, then hold the rest until the test sets ``released`` (or the server closes);
    # ``holding`` is set once an answer waits there, so a test waits for that event instead of for slow bytes
    hold_after: int | None = None
    hold_times: int | None = 1  # ... this many times (None: always); later answers go straight through
    holding: threading.Event = field(default_factory=threading.Event, repr=False)
    released: threading.Event = field(default_factory=threading.Event, repr=False)

    def release(self, rate: int | None = None) -> None:
        """Open the gate; with ``rate``, to a trickle of that many bytes per second (a client that acts on its next
        progress update gets one soon, and still cannot finish before it acts)."""
        self.rate = rate
        self.released.set()


@dataclass
class Served:
    data: bytes
    faults: Faults = field(default_factory=Faults)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    headers: dict[str, str]
    status: int

    @property
    def range(self) -> str | None:
        return self.headers.get("Range")


_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def do_HEAD(self) -> None:  # noqa: N802 - http.server naming
        self._respond(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._respond(body=True)

    def _respond(self, body: bool) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        served = owner.files.get(path)
        with owner.lock:
            status = self._status_for(served)
            if not body and served is not None and served.faults.head_status is not None:
                status = served.faults.head_status
            drop = self._drop_for(served) if body and status in (200, 206) else None
            stall = self._stall_for(served) if body and status in (200, 206) else None
            hold = self._hold_for(served) if body and status in (200, 206) else None
            data = self._content_for(served, body) if status in (200, 206) else b""
        if status not in (200, 206):
            self._record(status)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            for name, value in (served.headers.items() if served is not None else ()):  # a redirect's Location
                self.send_header(name, value)
            self.end_headers()
            return
        assert served is not None
        start, end = 0, len(data) - 1
        match = _RANGE.match(self.headers.get("Range", ""))
        if match and not served.faults.ignore_range:
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else len(data) - 1
            if start >= len(data):
                self._record(416)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        chunk = data[start:end + 1]
        self._record(status)
        self.send_response(status)
        faults = served.faults
        if faults.no_length and body:
            self.close_connection = True  # HTTP/1.1 without a length: the end of the body is the close
            self.send_header("Connection", "close")
        elif not (faults.head_without_length and not body):
            self.send_header("Content-Length", str(len(chunk)))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            shown = (start + 1, end + 1) if served.faults.wrong_content_range else (start, end)
            self.send_header("Content-Range", f"bytes {shown[0]}-{min(shown[1], len(data) - 1)}/{len(data)}")
        for name, value in served.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self._send_body(path, chunk, served.faults, drop if stall is None else stall, stall is not None, hold)

    def _status_for(self, served: Served | None) -> int:
        if served is None:
            return 404
        faults = served.faults
        if faults.status is None or faults.status_times == 0:
            return 200
        if faults.status_times is not None:
            faults.status_times -= 1
        return faults.status

    def _content_for(self, served: Served | None, body: bool) -> bytes:
        assert served is not None
        faults = served.faults
        bad = faults.truncate_to is not None or faults.replace_with is not None
        if not bad or faults.bad_times == 0:
            return served.data
        if body and faults.bad_times is not None:
            faults.bad_times -= 1
        if faults.replace_with is not None:
            return faults.replace_with
        return served.data[:faults.truncate_to]

    def _drop_for(self, served: Served | None) -> int | None:
        faults = served.faults if served else None
        if faults is None or faults.drop_after is None or faults.drop_times == 0:
            return None
        if faults.drop_times is not None:
            faults.drop_times -= 1
        return faults.drop_after

    def _stall_for(self, served: Served | None) -> int | None:
        faults = served.faults if served else None
        if faults is None or faults.stall_after is None or faults.stall_times == 0:
            return None
        if faults.stall_times is not None:
            faults.stall_times -= 1
        return faults.stall_after

    def _hold_for(self, served: Served | None) -> int | None:
        faults = served.faults if served else None
        if faults is None or faults.hold_after is None or faults.hold_times == 0:
            return None
        if faults.hold_times is not None:
            faults.hold_times -= 1
        return faults.hold_after

    def _wait_at_gate(self, faults: Faults) -> bool:
        """Everything before the gate is on the wire; the rest waits for the test. False: the server closed first."""
        self.wfile.flush()
        faults.holding.set()
        while not faults.released.wait(0.02):
            if self.server.owner.closing.is_set():
                return False
        return True

    def _send_body(self, path: str, chunk: bytes, faults: Faults, drop: int | None, stall: bool = False,
                   hold: int | None = None) -> None:
        rate = faults.rate
        limit = len(chunk) if drop is None else min(drop, len(chunk))
        step = max(1, rate // 20) if rate else 64 * 1024
        sent = 0
        try:
            while sent < limit:
                if hold is not None and sent >= hold:
                    if not self._wait_at_gate(faults):
                        self.close_connection = True
                        return
                    hold, rate = None, faults.rate  # the rest at the rate the gate was opened to
                    step = max(1, rate // 20) if rate else 64 * 1024
                piece = chunk[sent:min(sent + step, limit, limit if hold is None else hold)]
                self.wfile.write(piece)
                sent += len(piece)
                with self.server.owner.lock:
                    self.server.owner.sent[path] = self.server.owner.sent.get(path, 0) + len(piece)
                if rate:
                    self.wfile.flush()
                    time.sleep(len(piece) / rate)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return
        if stall:  # silent, connection open, until the server closes: only the client's timeout ends it
            self.server.owner.closing.wait()
            self.close_connection = True
            return
        if drop is not None:
            # a dropped connection, as a flaky mirror or a proxy timeout produces
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _record(self, status: int) -> None:
        with self.server.owner.lock:
            self.server.owner.requests.append(
                RequestRecord(self.command, self.path, dict(self.headers.items()), status)
            )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LoopbackHTTPServer


class LoopbackHTTPServer:
    def __init__(self) -> None:
        self.files: dict[str, Served] = {}
        self.requests: list[RequestRecord] = []
        self.sent: dict[str, int] = {}  # body bytes written per path (what the client was sent, not what it read)
        self.closing = threading.Event()  # releases stalled answers
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)  # shutdown() waits one poll: 0.5 s by default, per test
        self._thread.start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def serve(self, path: str, data: bytes, faults: Faults | None = None, **headers: str) -> str:
        self.files[path] = Served(data, faults or Faults(), headers)
        return self.url(path)

    def requests_for(self, path: str) -> list[RequestRecord]:
        return [r for r in self.requests if r.path.split("?", 1)[0] == path]

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
