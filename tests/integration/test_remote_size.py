"""download.remote_size: how large a file is, asked of the server without downloading it."""

from __future__ import annotations

from flagtree_cpu_build.download import remote_size
from tests.support.httpserver import Faults, LoopbackHTTPServer

DATA = b"x" * 12345


def test_the_size_comes_from_a_head_request(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/llvm.tar.xz", DATA)
    assert remote_size(url) == len(DATA)
    [request] = http_server.requests
    assert request.method == "HEAD" and request.headers.get("Accept-Encoding") == "identity"


def test_without_a_length_one_byte_is_asked_for(http_server: LoopbackHTTPServer) -> None:
    url = http_server.serve("/llvm.tar.xz", DATA, Faults(head_without_length=True))
    assert remote_size(url) == len(DATA)
    assert [(r.method, r.range) for r in http_server.requests] == [("HEAD", None), ("GET", "bytes=0-0")]


def test_a_server_that_does_not_say_gives_none(http_server: LoopbackHTTPServer) -> None:
    assert remote_size(http_server.url("/missing")) is None
    url = http_server.serve("/whole", DATA, Faults(head_without_length=True, ignore_range=True))
    assert remote_size(url) is None  # 200 to the range request: no Content-Range to read


def test_an_unreachable_server_or_a_local_path_gives_none(refused_port: int) -> None:
    assert remote_size(f"http://127.0.0.1:{refused_port}/llvm.tar.xz") is None
    assert remote_size("/tmp/llvm.tar.xz") is None and remote_size("file:///tmp/llvm.tar.xz") is None
