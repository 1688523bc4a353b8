"""The unit-test guards really stop network and process access."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tests.support.netguard import NetworkAccessInTest


def test_unit_tests_cannot_open_sockets_even_to_loopback() -> None:
    with pytest.raises(NetworkAccessInTest):
        socket.create_connection(("127.0.0.1", 9), timeout=0.1)


def test_unit_tests_cannot_resolve_names() -> None:
    with pytest.raises(NetworkAccessInTest):
        socket.getaddrinfo("github.com", 443)


def test_unit_tests_cannot_start_processes() -> None:
    with pytest.raises(AssertionError, match="move it to tests/integration"):
        subprocess.run(["git", "--version"], check=False)
