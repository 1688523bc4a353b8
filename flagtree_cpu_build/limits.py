"""Limits a user may tune through the environment, read in one place.

``FLAGTREE_CPU_STALL_TIMEOUT`` (seconds, default 60): a transfer — a git clone or fetch, an
HTTP download — that receives nothing for this long is stopped and reported as stalled,
instead of waiting on a frozen server forever.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .errors import UsageError

STALL_TIMEOUT_ENV = "FLAGTREE_CPU_STALL_TIMEOUT"
DEFAULT_STALL_TIMEOUT_S = 60.0


def stall_timeout_s(environ: Mapping[str, str] | None = None) -> float:
    """Seconds without any progress after which a transfer counts as stalled."""
    env = os.environ if environ is None else environ
    text = env.get(STALL_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_STALL_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise UsageError(f"{STALL_TIMEOUT_ENV}={text!r} is not a positive number of seconds",
                         fix=f"e.g. export {STALL_TIMEOUT_ENV}=120, or unset it for the default "
                         f"({DEFAULT_STALL_TIMEOUT_S:g} s)")
    return value
