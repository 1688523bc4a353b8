"""Real small file systems for tests: a tmpfs of a given size, mounted for one test and taken away after it
(mounting needs root; without it the test is skipped, saying why)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(mount: Path, size: str, why_needed: str = "") -> Iterator[Path]:
    """A tmpfs of ``size`` (``4m``, ``256m``) at ``mount`` for the ``with`` block."""
    mount.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a {size} tmpfs is not permitted here ({done.stderr.strip()})"
                    + (f"; {why_needed}" if why_needed else ""))
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
