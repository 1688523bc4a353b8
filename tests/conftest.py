"""Shared fixtures: a hermetic environment for every test, the git world, the HTTP server.

Every test runs with HOME, caches and git config in its own temporary folder, the
tool's own environment variables cleared, proxies pointed at a dead loopback port
(so a subprocess that tries the internet fails fast instead of hanging), and
connections beyond loopback refused inside the test process.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
import typer.testing

from tests.support.gitworld import GitWorld, build_world, private_copy
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.ports import refusing_port
from tests.support.xdistgroups import pytest_collection_modifyitems  # noqa: F401 (a hook: one worker per shared world)

# The environment before any test changed it: for the few tests that must reach the
# package index (installing the wheel into a fresh venv).
ORIGINAL_ENV = dict(os.environ)
REPO_ROOT = Path(__file__).resolve().parent.parent
# The fixture projects carry tests of their own (what the recipes' checks run in a workspace), not ours.
# tests/arm64 is the emulated Armv9 tier: it needs a rootfs that `make test-arm64` builds and mounts, so the
# main suite never collects it (its time is measured and reported on its own). tests/installed is the
# installed-wheel tier: it drives a console script that `make test-installed` installed from the built wheel or
# sdist into a fresh venv (FLAGTREE_CPU_INSTALLED names it).
collect_ignore_glob = ["fixtures/*"] + ([] if os.environ.get("FLAGTREE_CPU_ARM64_TIER") else ["arm64/*"]) \
    + ([] if os.environ.get("FLAGTREE_CPU_INSTALLED") else ["installed/*"])


# typer's CliRunner builds the click command from the app's functions again on every invoke (about 50 ms of CPU:
# it evaluates every annotation of every command). The command is the same each time -- click commands are made
# to be invoked many times -- so each test process builds it once; thousands of in-process runs add up to
# minutes of CPU otherwise.
if hasattr(typer.testing, "_get_command"):
    typer.testing._get_command = functools.cache(typer.main.get_command)


def _ignore(signum: int, frame: object) -> None:
    """What SIG_IGN did for this process; unlike SIG_IGN, not inherited by the processes it starts."""


def pytest_configure(config: pytest.Config) -> None:
    """Tests send SIGINT and SIGHUP to the tool and expect it to act on them. A suite started in the background
    from a script (`make test &`: the shell ignores SIGINT) or under nohup (SIGHUP) would hand that SIG_IGN
    down to every process it starts, and a Python started with SIGINT ignored never raises KeyboardInterrupt:
    every such test would then wait out its timeout. So an inherited SIG_IGN becomes a handler that does
    nothing: this process still ignores the signal, and what it starts gets the default again (exec resets a
    handled signal, never an ignored one)."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, _ignore)


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    make_hermetic(monkeypatch, home)
    return home


@pytest.fixture(scope="session")
def git_world(tmp_path_factory: pytest.TempPathFactory) -> GitWorld:
    """Bare FlagTree / flagtree-cpu / sleef repositories, built once per session."""
    return build_world(tmp_path_factory.mktemp("git-world"))


@pytest.fixture
def github_redirect(git_world: GitWorld, monkeypatch: pytest.MonkeyPatch) -> GitWorld:
    """git's own insteadOf rules send the real GitHub URLs to the git world."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
    return git_world


@pytest.fixture
def world(git_world: GitWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitWorld:
    """A private copy of the git world this test may change (``advance``) or take offline
    (``stop``); git's own insteadOf rule sends every https://github.com/ URL to it."""
    private = private_copy(git_world, tmp_path / "world")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(private.gitconfig))
    return private


@pytest.fixture
def http_server() -> Iterator[LoopbackHTTPServer]:
    server = LoopbackHTTPServer()
    yield server
    server.close()


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port where every connection is refused, held (bound, never listening) until the test ends, so no
    other process can start answering on it meanwhile."""
    with refusing_port() as port:
        yield port
