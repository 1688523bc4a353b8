"""A real HTTP server ccache's HTTP storage can use (GET, HEAD, PUT, DELETE of entries kept in memory), on
127.0.0.1 with a free port; optionally it asks for Basic credentials. `requests` records (method, path, the
Authorization header) for the tests to read. With ``tls`` (a certificate and its key) it speaks https."""

from __future__ import annotations

import base64
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class HTTPStorage:
    def __init__(self, credentials: tuple[str, str] | None = None, status: int | None = None,
                 tls: tuple[Path, Path] | None = None):
        self.entries: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.credentials = credentials
        self.status = status  # answer every request with this status (a broken server)
        storage = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _allowed(self) -> bool:
                storage.requests.append((self.command, self.path, self.headers.get("Authorization", "")))
                if storage.status is not None:
                    self._answer(storage.status)
                    return False
                if storage.credentials is None:
                    return True
                token = base64.b64encode(":".join(storage.credentials).encode()).decode()
                if self.headers.get("Authorization") == f"Basic {token}":
                    return True
                self._answer(401, extra={"WWW-Authenticate": 'Basic realm="ccache"'})
                return False

            def _answer(self, status: int, body: bytes = b"", extra: dict[str, str] | None = None,
                        send_body: bool = True) -> None:
                self.send_response(status)
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body and body:
                    self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's names
                if self._allowed():
                    data = storage.entries.get(self.path)
                    self._answer(404) if data is None else self._answer(200, data)

            def do_HEAD(self) -> None:  # noqa: N802
                if self._allowed():
                    data = storage.entries.get(self.path)
                    self._answer(404 if data is None else 200, data or b"", send_body=False)

            def do_PUT(self) -> None:  # noqa: N802
                data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self._allowed():
                    storage.entries[self.path] = data
                    self._answer(201)

            def do_DELETE(self) -> None:  # noqa: N802
                if self._allowed():
                    self._answer(200 if storage.entries.pop(self.path, None) is not None else 404)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:  # (certificate, key): an https:// server
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)  # shutdown() waits one poll: 0.5 s by default, per test
        self._thread.start()

    def url(self, path: str = "/ccache", userinfo: str = "") -> str:
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
