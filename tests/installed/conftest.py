"""Fixtures of the installed-wheel tier (run by `make test-installed`, i.e. `tests/installed/tier.sh`).

The tier builds the wheel and the sdist, installs each (non-editable, with its dependencies from the package
index under constraints.txt) into a fresh venv outside the checkout, and runs these tests once per install with
``FLAGTREE_CPU_INSTALLED`` naming that venv's `flagtree-cpu`. The tests run in the dev venv (they need the
harness: the git world, the loopback HTTP server, the fixture build); every command under test is the installed
console script in a real process, started from a folder outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

INSTALLED = os.environ.get("FLAGTREE_CPU_INSTALLED", "")  # read before the hermetic environment clears it


@pytest.fixture(scope="session")
def installed_cli() -> Path:
    cli = Path(INSTALLED)
    if not INSTALLED or not cli.is_file():
        pytest.fail(f"FLAGTREE_CPU_INSTALLED={INSTALLED!r} names no installed flagtree-cpu: run `make test-installed`")
    assert REPO_ROOT not in cli.resolve().parents, f"{cli} is inside the checkout: the tier tests an install"
    return cli


@pytest.fixture(scope="session")
def no_network() -> tuple[str, ...]:
    """The argv prefix that runs a command in a new network namespace: no interface is up, not even loopback,
    so nothing the command does can reach the git daemon, the HTTP server or the package index."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is missing: the board must run without a network")
    for prefix in ((unshare, "--net"), (unshare, "--map-root-user", "--net")):
        probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, check=False)
        if probe.returncode == 0:
            return prefix
    pytest.fail(f"this machine cannot make a network namespace ({probe.stderr.strip()}): run the tier as root")
