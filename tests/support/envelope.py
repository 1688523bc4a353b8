"""Reading a command's `--json` output: exactly one document on stdout, the envelope, holding the result."""

from __future__ import annotations

import json
from typing import Any

ENVELOPE_KEYS = {"schema", "version", "command", "ok", "result", "error"}
ERROR_KEYS = {"code", "exit_code", "message", "fix", "details", "log", "diagnosis"}


def envelope_of(stdout: str) -> dict[str, Any]:
    """The envelope, its shape checked (parsing fails on a second document after the first)."""
    document = json.loads(stdout)
    assert isinstance(document, dict) and set(document) == ENVELOPE_KEYS, document
    assert document["schema"] == "flagtree-cpu/envelope/v1"
    assert (document["error"] is None) == document["ok"], document
    if document["error"] is not None:
        assert ERROR_KEYS <= set(document["error"]) and document["error"]["exit_code"] > 0, document["error"]
    return document


def result_of(stdout: str) -> Any:
    """The command's result (a verdict such as doctor's exit 7 or status --check's 9 has one too)."""
    document = envelope_of(stdout)
    assert document["result"] is not None, document["error"]
    return document["result"]


def error_of(stdout: str) -> dict[str, Any]:
    """The error of a run that failed."""
    document = envelope_of(stdout)
    assert document["ok"] is False, document
    return document["error"]
