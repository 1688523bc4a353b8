"""The names of the values an artifact reads from a source's file: ``{match}`` and ``{match.NAME}``.

Kept apart from ``reads`` (which rewrites the templates) so the field checks and the pin model can know the names
without importing the model that calls them.
"""

from __future__ import annotations

import re

MATCH = "match"
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
_PLACEHOLDER = re.compile(rf"match(?:\.({NAME_PATTERN}))?")  # a placeholder's name: match, match.NAME
DIGEST_PLACEHOLDER = rf"\{{match(\.{NAME_PATTERN})?\}}"  # a digest value that is read: exactly one placeholder


def name_of(placeholder: str) -> str | None:
    """``match`` -> "", ``match.hash`` -> "hash", anything else -> None."""
    found = _PLACEHOLDER.fullmatch(placeholder)
    return None if found is None else found.group(1) or ""
