"""The compile cache's probe (`compile_cache.answers`): the server's own protocol under a short deadline.

Real servers on 127.0.0.1 (port 0): redis-server, an HTTP storage ccache can use, and sockets that accept and
then misbehave. `answers` gives None when ccache could use the server, else why not; `build` and `doctor` say
that why. The host-name cases run the CLI as a real process in its own network namespace, where the resolver
asks a name server on 127.0.0.1 that the test controls.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.compile_cache import answers, parse_url
from tests.support.envelope import result_of
from tests.support.hostileserver import HostileServer
from tests.support.httpstorage import HTTPStorage
from tests.support.redisserver import RedisServer, missing_parts

PASSWORD = "s3cret-Pw"


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    why = missing_parts()
    if why:
        pytest.skip(why)
    server = RedisServer(tmp_path / "redis", password=PASSWORD)
    yield server
    server.stop()


def _why(url: str) -> str | None:
    return answers(parse_url(url))


# --- servers that are not there or not what the URL says ---------------------------------------------------


@pytest.mark.parametrize(("scheme", "request_starts"), [("redis", b"*1\r\n$4\r\nPING\r\n"), ("http", b"HEAD /c/ ")])
def test_a_server_that_accepts_and_never_answers_is_caught_with_the_real_protocol(
        scheme: str, request_starts: bytes) -> None:
    with HostileServer("silent") as server:
        why = _why(server.url(scheme, "/c" if scheme == "http" else ""))
        assert server.received and server.received[0].startswith(request_starts)
    assert why is not None and why.startswith("accepts connections but did not answer") and "within 2 s" in why


@pytest.mark.parametrize("scheme", ["redis", "http"])
def test_a_server_that_closes_at_once_does_not_answer(scheme: str) -> None:
    with HostileServer("close") as server:
        assert _why(server.url(scheme, "/c" if scheme == "http" else "")) == (
            "closed the connection without answering")


def test_nothing_listening_is_a_refused_connection(refused_port: int) -> None:
    why = _why(f"redis://127.0.0.1:{refused_port}")
    assert why is not None and why.startswith("refuses connections")


@pytest.mark.parametrize(("scheme", "reply", "says"), [
    ("redis", b"SSH-2.0-OpenSSH_9.2\r\n", "answered PING with 'SSH-2.0-OpenSSH_9.2', not as a Redis server"),
    ("redis", b"HTTP/1.1 400 Bad Request\r\n\r\n", "not as a Redis server"),
    ("http", b"+PONG\r\n", "answered HEAD with '+PONG', not as an HTTP server"),
    ("redis", b"+" + b"A" * 200_000, "not as a Redis server"),  # no line end in sight: read no further than 4 KiB
    ("redis", b"-ERR \x1b[31mred\x1b[0m\x07 text\r\n", "answers with an error"),
])
def test_a_server_that_answers_garbage_is_not_taken_for_the_cache(scheme: str, reply: bytes, says: str) -> None:
    with HostileServer("reply", reply=reply) as server:
        why = _why(server.url(scheme, "/c" if scheme == "http" else ""))
    assert why is not None and says in why
    assert "\x1b" not in why and "\x07" not in why and len(why) < 300  # the server's words, made harmless


def test_a_redis_that_answers_ping_slowly_is_not_used() -> None:
    with HostileServer("reply", reply=b"+PONG\r\n", delay_s=1.2) as server:
        why = _why(server.url("redis"))
    assert why is not None and why.startswith("answered PING only after") and "ccache waits at most 1 s" in why


# --- a real Redis ---------------------------------------------------------------------------------------------


def test_a_real_redis_answers(redis: RedisServer) -> None:
    assert _why(f"redis://{PASSWORD}@127.0.0.1:{redis.port}") is None
    assert _why(f"redis://default:{PASSWORD}@127.0.0.1:{redis.port}/3") is None


def test_a_redis_that_wants_a_password_says_so_and_how_to_give_it(redis: RedisServer) -> None:
    why = _why(redis.url)
    assert why is not None and why.startswith("asks for a password (NOAUTH)")
    assert f"redis://PASSWORD@127.0.0.1:{redis.port}" in why


def test_a_wrong_redis_password_is_refused_and_not_repeated(redis: RedisServer) -> None:
    why = _why(f"redis://not-the-{PASSWORD}@127.0.0.1:{redis.port}")
    assert why is not None and why.startswith("refuses the URL's credentials") and "WRONGPASS" in why
    assert PASSWORD not in why


def test_a_redis_database_the_server_does_not_have_is_named(redis: RedisServer) -> None:
    why = _why(f"redis://{PASSWORD}@127.0.0.1:{redis.port}/99")
    assert why is not None and "database 99" in why and "out of range" in why


# --- a real HTTP storage ------------------------------------------------------------------------------------------


def test_an_http_storage_answers_whatever_the_status_of_its_folder() -> None:
    storage = HTTPStorage()
    try:
        assert _why(storage.url("/ccache")) is None  # 404 for the folder itself: a server that answers
        assert storage.requests == [("HEAD", "/ccache/", "")]
    finally:
        storage.close()


def test_an_http_storage_that_refuses_the_credentials_or_fails_is_not_used() -> None:
    storage = HTTPStorage(credentials=("builder", PASSWORD))
    broken = HTTPStorage(status=503)
    try:
        assert _why(storage.url("/c", f"builder:{PASSWORD}")) is None
        why = _why(storage.url("/c", "builder:wrong"))
        assert why is not None and why.startswith("refuses the URL's credentials (HTTP 401")
        why = _why(storage.url("/c"))
        assert why is not None and why.startswith("asks for credentials (HTTP 401")
        why = _why(broken.url("/c"))
        assert why is not None and "HTTP 503" in why
    finally:
        storage.close()
        broken.close()


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed (a certificate for the https:// server)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=cache",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def test_an_https_storage_is_asked_over_tls_and_its_certificate_checked(
        certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    storage = HTTPStorage(tls=certificate)
    try:
        why = _why(storage.url("/c").replace("http://", "https://"))
        assert why is not None and why.startswith("its TLS certificate is not trusted here")
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))  # now this machine trusts it
        assert _why(storage.url("/c").replace("http://", "https://")) is None
        assert storage.requests[-1][:2] == ("HEAD", "/c/")
    finally:
        storage.close()


def test_a_tls_url_on_a_server_that_never_answers_the_handshake_is_caught() -> None:
    with HostileServer("silent") as server:
        why = _why(server.url("rediss"))
    assert why is not None and why.startswith("accepts connections but did not answer")


# --- doctor -----------------------------------------------------------------------------------------------------


def _doctor(tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "--json", "doctor", "--check",
                                      "toolchain.compile-cache"], env=env)
    [found] = [c for c in result_of(result.stdout)["checks"] if c["id"] == "toolchain.compile-cache"]
    return found


def test_doctor_reports_what_the_probe_found(redis: RedisServer, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_CACHE", redis.url)
    found = _doctor(tmp_path)
    assert found["status"] == "warn" and "asks for a password (NOAUTH)" in found["detail"]
    with HostileServer("silent") as server:
        monkeypatch.setenv("FLAGTREE_CPU_COMPILE_CACHE", server.url("http", "/c"))
        found = _doctor(tmp_path)
    assert found["status"] == "warn" and "accepts connections but did not answer" in found["detail"]
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_CACHE", f"redis://{PASSWORD}@127.0.0.1:{redis.port}")
    found = _doctor(tmp_path)
    assert found["status"] == "ok" and f"redis://***@127.0.0.1:{redis.port}" in found["detail"]
    assert PASSWORD not in json.dumps(found)


def test_doctor_says_which_ccache_a_tls_url_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("ccache") is None:
        pytest.skip("ccache not installed")
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_CACHE", "https://cache.lan/ccache")
    found = _doctor(tmp_path)
    assert found["status"] == "warn" and "needs ccache 4.13 or newer" in found["detail"]


# --- host names, in a network namespace whose name server the test runs --------------------------------------

_NAME_SERVER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
print("ready", flush=True)
deadline = time.monotonic() + 120
while time.monotonic() < deadline:  # read every question, answer none (a name server that has gone quiet)
    s.settimeout(1)
    try:
        s.recvfrom(4096)
    except OSError:
        pass
"""


def _doctor_in_namespace(tmp_path: Path, url: str, quiet_name_server: bool) -> dict:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs root, unshare and ip (a network namespace with its own resolv.conf)")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:5 attempts:2\n")
    (tmp_path / "ns.py").write_text(_NAME_SERVER)
    cli = [sys.executable, "-m", "flagtree_cpu_build", "-w", str(tmp_path / "ws"), "--json", "doctor", "--check",
           "toolchain.compile-cache"]
    server = f"{sys.executable} {tmp_path / 'ns.py'} >/dev/null 2>&1 & " if quiet_name_server else "true & "
    script = (f"ip link set lo up && mount --bind {resolv} /etc/resolv.conf && {server}"
              f"sleep 0.5; {' '.join(cli)}; code=$?; kill $! 2>/dev/null; exit $code")
    env = {**os.environ, "FLAGTREE_CPU_COMPILE_CACHE": url}
    done = subprocess.run(["unshare", "--mount", "--net", "sh", "-c", script], capture_output=True, text=True,
                          env=env, timeout=120, start_new_session=True)
    [found] = [c for c in json.loads(done.stdout)["result"]["checks"] if c["id"] == "toolchain.compile-cache"]
    return found


def test_a_host_name_the_name_server_never_answers_for_does_not_hold_the_probe(tmp_path: Path) -> None:
    found = _doctor_in_namespace(tmp_path, "redis://cache.lan:6379", quiet_name_server=True)
    assert found["status"] == "warn"
    assert "host name cache.lan did not resolve within 2 s" in found["detail"]


def test_a_host_name_that_does_not_resolve_is_said_so(tmp_path: Path) -> None:
    found = _doctor_in_namespace(tmp_path, "http://cache.lan/ccache", quiet_name_server=False)
    assert found["status"] == "warn" and "host name cache.lan does not resolve" in found["detail"]
