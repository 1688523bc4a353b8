"""The one JSON document every command prints on stdout under ``--json``, and its JSON Schema.

    {"schema": "flagtree-cpu/envelope/v1", "version": "0.1.0", "command": "status",
     "ok": true, "result": {...}, "error": null}

``ok`` is true exactly when the exit code is 0, and ``error`` is null exactly then. ``result`` is the
command's own document (each keeps its own ``schema`` id where it has one, e.g. setup's
``flagtree-cpu/setup/v1``); it is null when the command stopped before it had one. ``error`` says
what stopped the run: ``code`` (a stable short id), ``exit_code``, ``message``, ``fix``, ``details``,
and for a failed build or kernel the ``log`` and its ``diagnosis``. The envelope's schema id is one
for every command — ``command`` says which one ran — so a result's own id is never reused for
another shape. `flagtree-cpu schema` prints ENVELOPE_SCHEMA.
"""

from __future__ import annotations

from .. import __version__

ENVELOPE_ID = "flagtree-cpu/envelope/v1"

# Every error code, with its exit code (the exit codes are errors.ExitCode's public table).
ERROR_CODES: dict[str, str] = {
    "unexpected": "1: a bug or an unforeseen failure (re-run with --verbose for the traceback)",
    "error": "1: another failure the tool reports on purpose",
    "usage": "2: a bad command line (unknown command or option, a bad value) or a bad option combination",
    "recipe": "2: the recipe is invalid or cannot be found",
    "other-recipe": "2: a recipe or variant other than the one the workspace was set up with (its record)",
    "source": "3: git: clone, fetch, pin, local changes, links, compatibility checks",
    "artifact": "4: download, checksum, extraction",
    "build": "5: the build, its prerequisites or the Python environment",
    "validation": "6: a required validation check failed",
    "doctor": "7: doctor (or setup's preflight) found a blocking problem",
    "busy": "8: another flagtree-cpu run holds the workspace",
    "not-current": "9: status --check: the workspace is not what the recipe says",
    "interrupted": "129, 130, 143: SIGHUP, Ctrl-C or SIGTERM stopped the run",
}


def envelope(command: str | None, result: object | None, error: dict[str, object] | None) -> dict[str, object]:
    return {"schema": ENVELOPE_ID, "version": __version__, "command": command, "ok": error is None,
            "result": result, "error": error}


def crash_json(exc: BaseException) -> dict[str, object]:
    return {"code": "unexpected", "exit_code": 1, "message": f"unexpected {type(exc).__name__}: {exc}",
            "fix": "re-run with --verbose for the traceback, and please report it", "details": [], "log": None,
            "diagnosis": None}


def exit_json(exit_code: int) -> dict[str, object]:
    """A run that ended with a non-zero exit code and no error object (should not happen: a fallback)."""
    return {"code": "error", "exit_code": exit_code, "message": f"exited with code {exit_code}", "fix": None,
            "details": [], "log": None, "diagnosis": None}


_TEXT_OR_NULL = {"type": ["string", "null"]}

ENVELOPE_SCHEMA: dict[str, object] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://flagtree-cpu.invalid/schema/envelope-v1.json",
    "title": "flagtree-cpu --json output (every command, version 1)",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "version", "command", "ok", "result", "error"],
    "properties": {
        "schema": {"const": ENVELOPE_ID},
        "version": {"type": "string", "description": "the flagtree-cpu version that wrote it"},
        "command": {"type": ["string", "null"], "description": "the command that ran, e.g. \"recipe list\"; null "
                    "when the command line named none that exists"},
        "ok": {"type": "boolean", "description": "true exactly when the exit code is 0"},
        "result": {"description": "the command's own document (see the README's table); null when the command "
                   "stopped before it had one"},
        "error": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/error"}]},
    },
    "if": {"properties": {"ok": {"const": True}}},
    "then": {"properties": {"error": {"type": "null"}}},
    "else": {"properties": {"error": {"$ref": "#/$defs/error"}}},
    "$defs": {
        "error": {
            "type": "object",
            "additionalProperties": False,
            "required": ["code", "exit_code", "message", "fix", "details", "log", "diagnosis"],
            "properties": {
                "code": {"enum": list(ERROR_CODES), "description": "a stable short id: " + "; ".join(
                    f"{code} = exit {meaning}" for code, meaning in ERROR_CODES.items())},
                "exit_code": {"type": "integer", "minimum": 1, "maximum": 255},
                "message": {"type": "string"},
                "fix": {**_TEXT_OR_NULL, "description": "what to do about it"},
                "details": {"type": "array", "items": {"type": "string"}},
                "log": {**_TEXT_OR_NULL, "description": "the log of a failed build or check"},
                "diagnosis": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/diagnosis"}]},
                "problems": {"type": "array", "items": {"$ref": "#/$defs/problem"},
                             "description": "code recipe: every problem of the recipe"},
            },
        },
        "diagnosis": {
            "type": "object",
            "additionalProperties": False,
            "required": ["signature", "cause", "line", "excerpt"],
            "properties": {
                "signature": {**_TEXT_OR_NULL, "description": "the id of the known failure it matched"},
                "cause": {"type": "string"},
                "line": {"type": ["integer", "null"], "description": "1-based line of the log"},
                "excerpt": {"type": "array", "items": {"type": "string"}},
            },
        },
        "problem": {
            "type": "object",
            "additionalProperties": False,
            "required": ["file", "line", "key", "message", "fix"],
            "properties": {
                "file": {"type": "string"},
                "line": {"type": ["integer", "null"]},
                "key": {"type": "string"},
                "message": {"type": "string"},
                "fix": _TEXT_OR_NULL,
            },
        },
    },
}
