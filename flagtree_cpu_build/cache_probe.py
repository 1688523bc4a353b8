"""Does the compile cache's server answer the way ccache needs? Asked in its own protocol, under one deadline.

A TCP connect proves little: a server that accepts and never answers costs every compilation ccache's
operation timeout (10 s by default; 82.6 s instead of 0.8 s for 8 units). So the probe asks what ccache will
ask: a Redis gets the AUTH and SELECT ccache sends (same credentials, decoded the same way), then PING; an
HTTP storage gets a HEAD of its folder with the URL's Basic credentials. The name lookup, the connect, a TLS
handshake (https://, rediss://), the request and the first lines of the answer all fit in one deadline, and
the lookup runs in a thread so that a name server that never answers holds nothing up.

Raw sockets, not download.py's requests, on purpose: ccache's clients use no proxy, follow no redirect and
need one line of the answer; a probe through requests would ask something else than ccache will.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass

from .cache_url import OPERATION_TIMEOUT_MS, CacheUrl
from .interrupts import start_thread

DEADLINE_S = 2.0
# An answer slower than this: every compilation asks a few times and ccache gives each request OPERATION_TIMEOUT_MS.
SLOW_S = OPERATION_TIMEOUT_MS / 1000 / 2
MAX_ANSWER = 4096  # a hostile server's endless line is cut here
_HTTP_STATUS = re.compile(rb"HTTP/\d(?:\.\d)? (\d{3})(?: ([^\r\n]*))?")


@dataclass
class _Clock:
    deadline: float

    def left(self) -> float:
        return max(0.001, self.deadline - time.monotonic())

    def over(self) -> bool:
        return time.monotonic() >= self.deadline


def answers(url: CacheUrl, deadline_s: float = DEADLINE_S) -> str | None:
    """None when the server answered as ccache needs within ``deadline_s``; else why not, in words that follow
    "compile cache URL: " (never the URL's password)."""
    clock = _Clock(time.monotonic() + deadline_s)
    within = f"{deadline_s:g} s"
    addresses = _resolve(url.host, url.port, clock, within)
    if isinstance(addresses, str):
        return addresses
    sock = _connect(addresses, clock, within)
    if isinstance(sock, str):
        return sock
    request, asked, replies = _redis_request(url) if url.redis else _http_request(url)
    conn: socket.socket = sock
    try:
        if url.tls:
            conn = _tls(sock, url.host, clock)
        started = time.monotonic()
        conn.settimeout(clock.left())
        conn.sendall(request)
        answer = _read_lines(conn, replies, clock)
        took = time.monotonic() - started
    except ssl.SSLCertVerificationError as err:
        return f"its TLS certificate is not trusted here ({err.verify_message})"
    except ssl.SSLError as err:
        return f"the TLS handshake failed ({err.reason or err})"
    except TimeoutError:
        return f"accepts connections but did not answer {asked} within {within}"
    except (ConnectionResetError, BrokenPipeError):
        return "closed the connection without answering"
    except OSError as err:
        return f"the connection failed ({err.strerror or err})"
    finally:
        conn.close()
    if not answer:
        return "closed the connection without answering"
    why = _judge_redis(answer, url) if url.redis else _judge_http(answer, url)
    if why is None and took > SLOW_S:
        why = (f"answered {asked} only after {took:.1f} s (ccache waits at most {OPERATION_TIMEOUT_MS / 1000:g} s "
               "for each of its requests, several per compilation)")
    return why


def _resolve(host: str, port: int, clock: _Clock, within: str) -> list[tuple] | str:
    try:
        ip = ipaddress.ip_address(host)
        return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, (host, port))]
    except ValueError:
        pass
    box: dict[str, object] = {}

    def lookup() -> None:  # getaddrinfo has no timeout of its own: a quiet name server holds it for ~10 s
        try:
            box["found"] = [(family, address) for family, _, _, _, address in
                            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
        except OSError as err:
            box["failed"] = err
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread below
            box["raised"] = err

    thread = threading.Thread(target=lookup, name="compile-cache-lookup", daemon=True)
    start_thread(thread)
    thread.join(clock.left())
    if thread.is_alive():
        return f"its host name {host} did not resolve within {within}"
    if "raised" in box:
        raise box["raised"]  # type: ignore[misc]
    if "failed" in box:
        err = box["failed"]
        return f"its host name {host} does not resolve ({getattr(err, 'strerror', None) or err})"
    return box["found"]  # type: ignore[return-value]


def _connect(addresses: list[tuple], clock: _Clock, within: str) -> socket.socket | str:
    why = "no address"
    for family, address in addresses:
        if clock.over():
            break
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(clock.left())
        try:
            sock.connect(address)
            return sock
        except TimeoutError:
            sock.close()
            return f"did not accept a connection within {within}"
        except ConnectionRefusedError as err:
            why = f"refuses connections ({err.strerror})"
        except OSError as err:
            why = f"cannot be reached ({err.strerror or err})"
        sock.close()
    return why


def _tls(sock: socket.socket, host: str, clock: _Clock) -> ssl.SSLSocket:
    wrapped = ssl.create_default_context().wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    try:
        wrapped.settimeout(clock.left())
        wrapped.do_handshake()
    except BaseException:
        wrapped.close()
        raise
    return wrapped


def _read_lines(sock: socket.socket, lines: int, clock: _Clock) -> bytes:
    """What the server sent until ``lines`` lines, the end of the stream or MAX_ANSWER bytes; TimeoutError when
    the deadline comes first with less than one whole line."""
    answer = b""
    while answer.count(b"\r\n") < lines and len(answer) < MAX_ANSWER:
        sock.settimeout(clock.left())
        try:
            chunk = sock.recv(MAX_ANSWER - len(answer))
        except TimeoutError:
            if b"\r\n" in answer:
                return answer
            raise
        if not chunk:
            break
        answer += chunk
        if clock.over() and b"\r\n" not in answer:
            raise TimeoutError
    return answer


def _resp(*words: str) -> bytes:
    parts = [f"*{len(words)}\r\n".encode()]
    for word in words:
        data = word.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _redis_request(url: CacheUrl) -> tuple[bytes, str, int]:
    """What ccache sends when it connects (AUTH, SELECT), then PING; how many replies to wait for."""
    commands = []
    if url.password is not None:
        commands.append(("AUTH", url.user, url.password) if url.user is not None else ("AUTH", url.password))
    if url.db:
        commands.append(("SELECT", str(url.db)))
    commands.append(("PING",))
    return b"".join(_resp(*c) for c in commands), "PING", len(commands)


def _http_request(url: CacheUrl) -> tuple[bytes, str, int]:
    folder = url.path if url.path.endswith("/") else url.path + "/"  # ccache's requests go below the folder
    host = f"[{url.host}]" if ":" in url.host else url.host
    lines = [f"HEAD {folder} HTTP/1.1", f"Host: {host}:{url.port}", "User-Agent: flagtree-cpu (compile cache probe)",
             "Connection: close"]
    if url.user is not None:
        token = base64.b64encode(f"{url.user}:{url.password}".encode()).decode()
        lines.append(f"Authorization: Basic {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), "HEAD", 1


def _said(data: bytes, url: CacheUrl) -> str:
    """The server's words, made harmless to print: one line, printable, short, never the URL's password."""
    text = "".join(c for c in data.decode("utf-8", "replace") if c.isprintable())
    if url.password:
        text = text.replace(url.password, "***")
    return text if len(text) <= 80 else text[:77] + "..."


def _judge_redis(answer: bytes, url: CacheUrl) -> str | None:
    sent = (["AUTH"] if url.password is not None else []) + (["SELECT"] if url.db else []) + ["PING"]
    lines = (answer.split(b"\r\n") + [b""] * len(sent))[:len(sent)]  # a reply missing is an empty one
    for command, line in zip(sent, lines, strict=True):
        said = _said(line[1:], url)
        if line.startswith(b"-"):
            if said.startswith("NOAUTH"):
                return (f"asks for a password (NOAUTH) and the URL gives none, so ccache could store nothing: give it "
                        f"as {url.scheme}://PASSWORD@{url.address}")
            if command == "AUTH":
                return f"refuses the URL's credentials ({said})"
            if command == "SELECT":
                return f"refuses database {url.db} ({said})"
            return f"answers with an error ({said})"
        if line[:1] not in (b"+", b":", b"$", b"*") or (command == "PING" and line.upper() != b"+PONG"):
            return f"answered {command} with {_said(line, url)!r}, not as a Redis server"
    return None


def _judge_http(answer: bytes, url: CacheUrl) -> str | None:
    first = answer.split(b"\r\n", 1)[0]
    status = _HTTP_STATUS.fullmatch(first)
    if status is None:
        return f"answered HEAD with {_said(first, url)!r}, not as an HTTP server"
    code, reason = int(status.group(1)), _said(status.group(2) or b"", url)
    if code == 401:
        if url.user is not None:
            return f"refuses the URL's credentials (HTTP 401 {reason})"
        return (f"asks for credentials (HTTP 401 {reason}): give them as "
                f"{url.scheme}://USER:PASSWORD@{url.address}{url.path}")
    if code >= 500:
        return f"answers HTTP {code} {reason}: the server fails"
    return None  # 2xx, 3xx, 403, 404 ...: an HTTP server is there (a folder need not be readable itself)
