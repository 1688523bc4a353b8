"""`build --compile-cache` against servers that do not behave: the build is never slower than without the cache.

One workspace is made ready once for the module; each test builds it again (`--force`) with its own empty
CCACHE_DIR, so every compilation is a local miss and whatever ccache does with the server shows in its
statistics. ccache's own log (CCACHE_LOGFILE) says which timeouts it used. No test measures time:
`bench/bench_compile_cache.py` does (a server that accepts and never answers, before and after).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import Result

from tests.support.cli import Workspace, ready_to_build
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.hermetic import make_hermetic
from tests.support.hostileserver import HostileServer
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.httpstorage import HTTPStorage
from tests.support.redisserver import RedisServer, missing_parts
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import TOOLS, build_venv

UNITS = 3  # real g++ compilations: few enough to be cheap, more than one to count
SECRET = "s3cret-Pw"


@dataclass
class Ready:
    home: Path
    gitconfig: Path
    ws: Workspace
    python: Path


@pytest.fixture(scope="module")
def ready(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ready]:
    why = missing_parts()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("compile-cache-servers")
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    with pytest.MonkeyPatch.context() as mp:
        make_hermetic(mp, root / "home")
        mp.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
        try:
            ws = ready_to_build(git_world, root / "ws", server.serve(f"/public/llvm-builds/{TOP}.tar.gz",
                                                                       llvm_tarball().data))
        finally:
            server.close()
    yield Ready(root / "home", git_world.gitconfig, ws, build_venv(root / "venv", TOOLS))


@dataclass
class Board:
    ws: Workspace
    python: Path
    ccache_log: Path

    def build(self, *args: str) -> Result:
        return self.ws.run("--json", "build", "--force", "--ignore-host", "--python", str(self.python), *args)

    def built(self, result: Result) -> dict:
        assert result.exit_code == 0, result.stdout + result.stderr
        [action] = result_of(result.stdout)["actions"]
        assert json.loads((self.ws.flagtree / "python" / "build" / "fixture-compile.json").read_text()) == {
            "compiled": UNITS, "compiler": ["ccache", "g++"]}
        return action


@pytest.fixture
def board(ready: Ready, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Board:
    """The module's workspace, its HOME (where its LLVM tree is), an empty local ccache and ccache's log."""
    make_hermetic(monkeypatch, ready.home)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(ready.gitconfig))
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    monkeypatch.setenv("CCACHE_LOGFILE", str(tmp_path / "ccache.log"))
    monkeypatch.setenv("FIXTURE_BUILD_COMPILE", str(UNITS))
    return Board(ready.ws, ready.python, tmp_path / "ccache.log")


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


def _assert_no_compile_asked_the_server(action: dict) -> None:
    data = action["compile_cache"]
    assert not data["active"] and data["problem"]
    stats = data["stats"]
    assert stats["cache_miss"] == UNITS
    assert stats["remote_storage_timeout"] == stats["remote_storage_error"] == stats["remote_storage_miss"] == 0


@pytest.mark.parametrize(("scheme", "path"), [("redis", ""), ("http", "/ccache")])
def test_a_server_that_accepts_and_never_answers_is_one_warning_and_no_compile_waits_on_it(
        board: Board, scheme: str, path: str) -> None:
    with HostileServer("silent") as server:
        url = server.url(scheme, path)
        result = board.build("--compile-cache", url)
        action = board.built(result)
        assert server.accepted == 1  # the tool's probe; not one compilation connected
    assert result.stderr.count("warning") == 1, result.stderr
    assert f"compile cache {url}: accepts connections but did not answer" in result.stderr
    assert "building with the local ccache only" in result.stderr
    _assert_no_compile_asked_the_server(action)


def test_a_server_that_closes_every_connection_at_once_is_one_warning_and_a_local_build(board: Board) -> None:
    with HostileServer("close") as server:
        url = server.url("redis")
        result = board.build("--compile-cache", url)
        action = board.built(result)
        assert server.accepted == 1
    assert result.stderr.count("warning") == 1 and f"compile cache {url}: closed the connection" in result.stderr
    _assert_no_compile_asked_the_server(action)


def test_a_redis_that_wants_a_password_the_url_lacks_is_one_warning_that_says_so(board: Board, tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis-auth", password=SECRET)
    try:
        result = board.build("--compile-cache", server.url)
    finally:
        server.stop()
    action = board.built(result)
    assert result.stderr.count("warning") == 1, result.stderr
    assert f"compile cache {server.url}: asks for a password (NOAUTH)" in result.stderr
    assert "redis://PASSWORD@127.0.0.1" in result.stderr
    _assert_no_compile_asked_the_server(action)


def test_the_password_in_the_url_reaches_ccache_and_is_shown_nowhere(board: Board, tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis-auth", password=SECRET)
    url = f"redis://{SECRET}@127.0.0.1:{server.port}"
    try:
        result = board.build("--compile-cache", url)
    finally:
        server.stop()
    action = board.built(result)
    data = action["compile_cache"]
    assert data["active"] and data["url"] == f"redis://***@127.0.0.1:{server.port}"
    assert data["stats"]["cache_miss"] == UNITS and data["stats"]["remote_storage_error"] == 0  # ccache got in
    assert data["stats"]["remote_storage_miss"] == UNITS
    log = Path(action["log"]).read_text()
    assert "CCACHE_REMOTE_STORAGE=redis://***@127.0.0.1" in log
    for text in (result.stdout, result.stderr, log):
        assert SECRET not in text


def test_an_http_storage_with_credentials_serves_another_cache_what_the_first_build_put(
        board: Board, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    storage = HTTPStorage(credentials=("builder", SECRET))
    try:
        url = storage.url("/ccache", f"builder:{SECRET}")
        first = board.built(board.build("--compile-cache", url))
        monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "another-ccache"))  # another machine's empty cache
        second_run = board.build("--compile-cache", url)
        second = board.built(second_run)
    finally:
        storage.close()
    assert first["compile_cache"]["stats"]["remote_storage_miss"] == UNITS
    stats = second["compile_cache"]["stats"]
    assert stats["remote_storage_hit"] == UNITS and stats["cache_miss"] == 0
    assert any(method == "PUT" for method, _, _ in storage.requests)
    assert "warning" not in second_run.stderr
    assert second["compile_cache"]["url"] == f"http://***@127.0.0.1:{storage.port}/ccache"
    assert SECRET not in second_run.stdout + second_run.stderr + Path(second["log"]).read_text()


def test_a_redis_that_stalls_mid_build_costs_each_compile_one_short_timeout(
        board: Board, redis: RedisServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    record = tmp_path / "build-record.jsonl"  # the fixture build's first line: the tool has probed the server by then
    gate = tmp_path / "redis-frozen"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    monkeypatch.setenv("FIXTURE_BUILD_GATE", str(gate))  # the compilations wait until Redis is frozen

    def freeze_when_the_build_starts() -> None:
        deadline = time.monotonic() + 120
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        redis.freeze()  # connections still open, nothing answered: a server hung mid-build
        gate.touch()

    freezer = threading.Thread(target=freeze_when_the_build_starts)
    freezer.start()
    try:
        result = board.build("--compile-cache", redis.url)
    finally:
        freezer.join()
        redis.thaw()
    action = board.built(result)
    stats = action["compile_cache"]["stats"]
    # one failed request per compilation, which then compiles locally (hiredis reports a read that timed out as
    # an I/O error, so ccache counts it under remote_storage_error)
    assert stats["cache_miss"] == UNITS and stats["remote_storage_timeout"] + stats["remote_storage_error"] == UNITS
    log = board.ccache_log.read_text()
    assert "Redis operation timeout set to 1000 ms" in log and "timeout set to 10000 ms" not in log
    assert result.stderr.count("warning") == 1 and "failed during the build" in result.stderr
