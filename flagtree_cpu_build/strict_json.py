"""JSON that two readers cannot read differently, for documents that cross a machine boundary (a bundle's
manifest, a wheelhouse's manifest).

Python's ``json`` keeps the last of two equal keys (another reader may keep the first), reads ``NaN`` and
``Infinity`` (no JSON), and turns ``1e999`` into infinity; a writer who wants one reader to see something else
than another uses exactly these. Each is refused here, as ``NotStrictJSON`` (a ``ValueError``, like any other
syntax error ``json`` raises).
"""

from __future__ import annotations

import json
import math
from typing import Any


class NotStrictJSON(ValueError):
    """Valid for Python's ``json`` (which is lenient), but not one meaning for every reader."""


def loads(text: str | bytes) -> Any:
    """``text`` parsed, strictly: ``NotStrictJSON`` for a key twice in one object, NaN/Infinity or a number too big
    for a float; ``ValueError`` (``json.JSONDecodeError``) for what is no JSON at all; ``RecursionError`` for nesting
    deeper than the interpreter's recursion limit."""
    return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise NotStrictJSON(f"duplicate key {key!r}: readers could take either value")
        found[key] = value
    return found


def _no_constant(name: str) -> float:
    raise NotStrictJSON(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotStrictJSON(f"{text[:40]} is too large for a number")
    return value
