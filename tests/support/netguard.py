"""Guards that make tests fail loudly instead of quietly touching the world.

``forbid_network(allow_loopback=True)`` (every test): a connection to anything but
127.0.0.1/::1/a Unix socket raises. ``forbid_network(allow_loopback=False)`` plus
``forbid_subprocesses`` (unit tests): no sockets and no child processes at all, so
a "unit" test cannot depend on git, pip or a server without being moved to
integration.
"""

from __future__ import annotations

import ipaddress
import socket
import subprocess

import pytest


class NetworkAccessInTest(AssertionError):
    pass


def _is_loopback(address: object) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(str(host)).is_loopback
    except ValueError:
        return False


def forbid_network(monkeypatch: pytest.MonkeyPatch, *, allow_loopback: bool) -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def allowed(sock: socket.socket, address: object) -> bool:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return True
        return allow_loopback and _is_loopback(address)

    def connect(self: socket.socket, address: object) -> None:
        if not allowed(self, address):
            raise NetworkAccessInTest(f"test tried to connect to {address!r}")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: object) -> int:
        if not allowed(self, address):
            raise NetworkAccessInTest(f"test tried to connect to {address!r}")
        return real_connect_ex(self, address)

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if host is not None and not (allow_loopback and _is_loopback(host)):
            raise NetworkAccessInTest(f"test tried to resolve {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def forbid_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"unit test started a process: {args[:1]!r}; move it to tests/integration")

    class RefusingPopen(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args: object, **kwargs: object) -> None:
            refuse(*args)

    monkeypatch.setattr(subprocess, "Popen", RefusingPopen)
    monkeypatch.setattr("os.system", refuse)
