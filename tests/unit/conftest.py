"""Unit tests are pure: no sockets at all (not even loopback) and no child processes."""

from __future__ import annotations

import pytest

from tests.support import netguard


@pytest.fixture(autouse=True)
def pure_unit_test(monkeypatch: pytest.MonkeyPatch, hermetic_env: object) -> None:
    netguard.forbid_network(monkeypatch, allow_loopback=False)
    netguard.forbid_subprocesses(monkeypatch)
