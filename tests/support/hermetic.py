"""The hermetic environment every test runs in (conftest's autouse fixture; module-scoped
fixtures that build something once apply it themselves, through a MonkeyPatch context)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import netguard

# PIP_: the machine's own pip settings (this one exports PIP_FIND_LINKS=/opt/wheels) take no part in a test
_CLEARED_PREFIXES = ("FLAGTREE_", "TRITON_", "LLVM_", "GIT_", "PIP_", "FIXTURE_BUILD_", "FIXTURE_TRITON_")
_DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens there


def make_hermetic(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """HOME, caches and git config under ``home``; the tool's variables cleared; proxies dead; only
    loopback connections allowed in this process."""
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
    # no pip configuration of this machine (its find-links, extra indexes, constraints) takes part in a test
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    # a pip that tries the network anyway fails at once instead of retrying for minutes
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "3")
    netguard.forbid_network(monkeypatch, allow_loopback=True)
