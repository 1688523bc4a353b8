"""`build --compile-cache`: ccache's remote storage in a real Redis server shared by two workspaces.

Each workspace has its own CCACHE_DIR, so whatever the second build does not compile came from Redis. The
fixture FlagTree compiles FIXTURE_BUILD_COMPILE generated C++ units with `ccache g++` (as FlagTree's CMake
does when the recipe's if_command turned TRITON_BUILD_WITH_CCACHE on)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import Result

from flagtree_cpu_build.compile_cache import parse_stats
from tests.support.cli import Workspace, ready_to_build
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.redisserver import RedisServer, missing_parts
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import TOOLS, build_venv

UNITS = 3  # real g++ compilations: few enough to be cheap, more than one to count
DEAD = "refuses connections (Connection refused); building with the local ccache only"


@dataclass
class CacheWorkspace:
    ws: Workspace
    python: Path
    ccache_dir: Path

    def build(self, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
        monkeypatch.setenv("CCACHE_DIR", str(self.ccache_dir))
        monkeypatch.setenv("FIXTURE_BUILD_COMPILE", str(UNITS))
        return self.ws.run("--json", "build", "--ignore-host", "--python", str(self.python), *args)

    def compiled(self) -> dict:
        return json.loads((self.ws.flagtree / "python" / "build" / "fixture-compile.json").read_text())

    def ccache_stats(self) -> dict[str, int]:
        out = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True, check=True,
                             env={**os.environ, "CCACHE_DIR": str(self.ccache_dir)})
        return parse_stats(out.stdout)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    why = missing_parts()
    if why:
        pytest.skip(why)
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture
def make_ws(world: GitWorld, tmp_path: Path, http_server: LoopbackHTTPServer):
    why = missing_parts()
    if why:
        pytest.skip(why)
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)

    def make(name: str) -> CacheWorkspace:
        return CacheWorkspace(ready_to_build(world, tmp_path / name, url), build_venv(tmp_path / f"{name}-venv", TOOLS),
                              tmp_path / f"{name}-ccache")

    return make


def _cache_data(result: Result) -> dict:
    assert result.exit_code == 0, result.stdout + result.stderr
    [action] = result_of(result.stdout)["actions"]
    return action["compile_cache"]


def test_second_workspace_compiles_nothing_the_first_one_put_in_redis(
        redis: RedisServer, make_ws, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = make_ws("a"), make_ws("b")
    started = time.monotonic()
    cold = first.build(monkeypatch, "--compile-cache", redis.url)
    cold_s = time.monotonic() - started
    data = _cache_data(cold)
    assert first.compiled() == {"compiled": UNITS, "compiler": ["ccache", "g++"]}
    assert data["active"] and data["namespace"] == "flagtree-cpu-arm64" and data["from"] == "--compile-cache"
    assert data["stats"]["cache_miss"] == UNITS and data["stats"]["remote_storage_hit"] == 0
    started = time.monotonic()
    warm = second.build(monkeypatch, "--compile-cache", redis.url)
    warm_s = time.monotonic() - started
    data = _cache_data(warm)
    assert data["stats"]["remote_storage_hit"] == UNITS and data["stats"]["cache_miss"] == 0
    stats = second.ccache_stats()  # ccache's own word, in the second workspace's (otherwise empty) cache
    assert stats["remote_storage_hit"] == UNITS and stats["cache_miss"] == 0 and stats["local_storage_hit"] == 0
    assert f"compile cache {redis.url}: {UNITS} of {UNITS} compilations from the shared cache (100 %)" in (
        result_of(warm.stdout)["actions"][0]["detail"])
    assert "warning" not in warm.stderr
    print(f"cold {cold_s:.1f}s, from the shared cache {warm_s:.1f}s")  # the ratio is bench_compile_cache's


def test_a_dead_server_before_the_build_is_one_warning_and_a_local_build(
        make_ws, monkeypatch: pytest.MonkeyPatch, refused_port: int) -> None:
    url = f"redis://127.0.0.1:{refused_port}"
    result = make_ws("a").build(monkeypatch, "--compile-cache", url)
    data = _cache_data(result)
    assert result.stderr.count("warning") == 1 and f"compile cache {url}: {DEAD}" in result.stderr
    assert not data["active"] and data["stats"]["cache_miss"] == UNITS


def test_redis_stopped_mid_build_the_build_succeeds_with_one_warning(
        redis: RedisServer, make_ws, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_ws("a")
    record = ws.ws.root / "build-record.jsonl"  # setup.py's first line: the tool has checked the server by then
    gate = ws.ws.root / "redis-stopped"
    monkeypatch.setenv("FIXTURE_BUILD_RECORD", str(record))
    monkeypatch.setenv("FIXTURE_BUILD_GATE", str(gate))  # the compilations wait until Redis is gone

    def stop_when_the_build_starts() -> None:
        deadline = time.monotonic() + 120
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        redis.stop()
        gate.touch()

    stopper = threading.Thread(target=stop_when_the_build_starts)
    stopper.start()
    result = ws.build(monkeypatch, "--compile-cache", redis.url)
    stopper.join()
    data = _cache_data(result)
    assert data["active"] and data["stats"]["cache_miss"] == UNITS
    assert data["stats"]["remote_storage_error"] + data["stats"]["remote_storage_timeout"] > 0
    assert result.stderr.count("warning") == 1 and "failed during the build" in result.stderr


def test_without_ccache_on_path_one_warning_and_the_build_goes_on(
        redis: RedisServer, make_ws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ws = make_ws("a")
    bare = tmp_path / "bin-without-ccache"  # PATH with every tool the build needs, ccache hidden
    bare.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        for tool in Path(folder).glob("*") if Path(folder).is_dir() else ():
            if tool.name != "ccache" and not (bare / tool.name).exists():
                (bare / tool.name).symlink_to(tool)
    monkeypatch.setenv("PATH", str(bare))
    result = ws.build(monkeypatch, "--compile-cache", redis.url)
    data = _cache_data(result)
    assert result.stderr.count("warning") == 1
    assert "ccache is not on the build's PATH; building without the shared cache" in result.stderr
    assert not data["active"] and ws.compiled()["compiler"] == ["g++"]


def test_the_cache_url_is_not_a_build_input(redis: RedisServer, make_ws, monkeypatch: pytest.MonkeyPatch,
                                             refused_port: int) -> None:
    ws = make_ws("a")
    assert ws.build(monkeypatch, "--compile-cache", redis.url).exit_code == 0
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_CACHE", f"redis://127.0.0.1:{refused_port}")
    again = ws.build(monkeypatch)
    assert again.exit_code == 0, again.stderr
    [action] = result_of(again.stdout)["actions"]
    assert action["detail"] == "up to date" and "warning" not in again.stderr


def test_doctor_checks_the_configured_cache(redis: RedisServer, make_ws, monkeypatch: pytest.MonkeyPatch,
                                            refused_port: int) -> None:
    ws = make_ws("a")

    def check() -> dict:
        result = ws.ws.run("--json", "doctor", "--check", "toolchain.compile-cache")
        [found] = [c for c in result_of(result.stdout)["checks"] if c["id"] == "toolchain.compile-cache"]
        return found

    assert check()["status"] == "skip"
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_CACHE", redis.url)
    live = check()
    assert live["status"] == "ok" and redis.url in live["detail"] and "ccache 4." in live["detail"]
    monkeypatch.setenv("FLAGTREE_CPU_COMPILE_CACHE", f"redis://127.0.0.1:{refused_port}")
    dead = check()
    assert dead["status"] == "warn" and "refuses connections" in dead["detail"]


def test_a_url_ccache_would_not_take_is_exit_2_before_anything_runs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flagtree_cpu_build.cli import app

    for command in ("build", "setup"):
        result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), command, "--compile-cache", "ftp://cache.lan"])
        assert result.exit_code == 2, result.output
        assert "ccache stores only in" in result.stdout + result.stderr
    assert not (tmp_path / "ws").exists()


def _too_old_for_tls() -> bool:
    from flagtree_cpu_build.compile_cache import ccache_version

    _, version = ccache_version(os.environ)
    return version is not None and version < (4, 13)


@pytest.mark.parametrize(("url", "says"), [
    ("https://cache.lan/ccache", "https:// needs ccache 4.13 or newer with its storage helper ccache-storage-https"),
    ("rediss://cache.lan:6380", "rediss:// needs ccache 4.13 or newer"),
    ("redis://cache lan:6379", "it contains a space"),
    ("http://cache.lan/ccache%zz", "'%zz' is not a percent escape"),
    ("redis://:hunter2@cache.lan", "ccache sends no password"),
    ("http://token@cache.lan/ccache", "needs USER:PASSWORD@"),
])
@pytest.mark.parametrize("given", ["option", "environment", "recipe"])
@pytest.mark.parametrize("command", ["build", "setup"])
def test_a_url_this_ccache_would_fail_every_compile_on_is_exit_2_when_it_is_read(
        url: str, says: str, given: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from flagtree_cpu_build.cli import app

    if url.startswith(("https", "rediss")) and not _too_old_for_tls():
        pytest.skip("the installed ccache is not older than 4.13 (or not there)")
    argv = ["-w", str(tmp_path / "ws"), command]
    if given == "option":
        argv.append(f"--compile-cache={url}")
    elif given == "environment":
        monkeypatch.setenv("FLAGTREE_CPU_COMPILE_CACHE", url)
    else:
        argv[2:2] = ["--set", f"build.compile_cache={url}"]
    result = CliRunner().invoke(app, argv)
    output = result.stdout + result.stderr
    assert result.exit_code == 2, output
    assert says in " ".join(output.replace("\u2502", " ").split())  # the option's message is wrapped in a box
    if given == "environment":
        assert "(from FLAGTREE_CPU_COMPILE_CACHE)" in output
    assert "hunter2" not in output
    assert not (tmp_path / "ws").exists()  # nothing ran
