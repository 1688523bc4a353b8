"""Shared fixtures: a hermetic environment for every test, the git world, the HTTP server.

Every test runs with HOME, caches and git config in its own temporary folder, the
tool's own environment variables cleared, proxies pointed at a dead loopback port
(so a subprocess that tries the internet fails fast instead of hanging), and
connections beyond loopback refused inside the test process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import netguard
from tests.support.gitworld import GitWorld, build_world, private_copy
from tests.support.httpserver import LoopbackHTTPServer

# The environment before any test changed it: for the few tests that must reach the
# package index (installing the wheel into a fresh venv).
ORIGINAL_ENV = dict(os.environ)
REPO_ROOT = Path(__file__).resolve().parent.parent

_CLEARED_PREFIXES = ("FLAGTREE_", "TRITON_", "LLVM_", "GIT_", "FIXTURE_BUILD_")
_DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith(_CLEARED_PREFIXES) or name in ("VIRTUAL_ENV", "NO_COLOR", "FORCE_COLOR"):
            monkeypatch.delenv(name, raising=False)
    gitconfig = home / ".gitconfig-isolated"
    gitconfig.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Test User")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.invalid")
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(proxy, _DEAD_PROXY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("COLUMNS", "120")
    # a pip that tries the network anyway fails at once instead of retrying for minutes
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "3")
    netguard.forbid_network(monkeypatch, allow_loopback=True)
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
