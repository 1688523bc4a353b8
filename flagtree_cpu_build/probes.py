"""Cheap compatibility checks that fail in seconds, before a long download or build does.

Two kinds, both from recipe data: per-source probes ("this file exists / contains this
text") and artifact pins ("FlagTree's cmake/llvm-hash.txt names the LLVM the recipe
downloads"). A pin reads a piece of the file — its leading characters, a regular expression's
first group, or a value at a dotted JSON path — which must appear in the artifact's URL. All
failures are collected and reported together.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .errors import SourceError
from .recipe import Recipe
from .recipe.inputs import SourcePin
from .regular_file import read_regular
from .workspace import Workspace

# a probed file is a version file, a JSON of pins, a source file: megabytes at most
MAX_PROBED_BYTES = 16 << 20


def probe_failures(recipe: Recipe, ws: Workspace) -> list[str]:
    failures = []
    for name, source in recipe.sources.items():
        checkout = ws.root / recipe.source_path(name)
        for probe in source.probes:
            path = checkout / probe.file
            if not path.is_file():
                failures.append(f"{name}: {probe.file} is missing — {probe.why}")
            elif probe.contains is not None:
                text, unreadable = _read(path)
                if unreadable is not None:
                    failures.append(f"{name}: {probe.file} {unreadable} — {probe.why}")
                elif probe.contains not in text:
                    failures.append(f"{name}: {probe.file} does not contain {probe.contains!r} — {probe.why}")
    return failures


def artifact_pin_failures(recipe: Recipe, ws: Workspace, *, missing_ok: bool = False) -> list[str]:
    """Each artifact whose `matches` rule its source's file contradicts. ``missing_ok``: a file that is not there
    (the source is not checked out yet) is not a failure — fetch runs beside the clone that brings it."""
    failures = []
    for name, artifact in recipe.artifacts.items():
        pin = artifact.matches
        if pin is None:
            continue
        path = ws.root / recipe.source_path(pin.source) / pin.file
        if not path.is_file():
            if not missing_ok:
                failures.append(f"artifacts.{name}: {pin.source} has no {pin.file} to check the artifact against "
                                f"— check out {pin.source} (flagtree-cpu sync), or fix artifacts.{name}.matches.file")
            continue
        text, problem = _read(path)
        if problem is None:
            wanted, problem = _pinned_text(pin, text, f"artifacts.{name}.matches")
        if problem is not None:
            failures.append(f"artifacts.{name}: {pin.source}'s {pin.file} {problem}")
        elif wanted not in artifact.url:
            failures.append(
                f"artifacts.{name}: {pin.source}'s {pin.file} asks for {wanted!r} ({_rule(pin)}), but the recipe "
                f"downloads {artifact.url} — update artifacts.{name}.url (and its digest) to the {wanted} build, or "
                f"pin {pin.source} to a commit whose {pin.file} names the build in that URL"
            )
    return failures


def _rule(pin: SourcePin) -> str:
    if pin.json_path is not None:
        return f"the first {pin.chars} characters at {pin.json_path}" if pin.chars else f"at {pin.json_path}"
    if pin.regex is not None:
        return f"matched by {pin.regex!r}"
    return f"its first {pin.leading_chars} characters"


def _pinned_text(pin: SourcePin, text: str, key: str) -> tuple[str, str | None]:
    """The piece of the file the URL must contain, or why it cannot be read (with what to do)."""
    fix = f"correct {key}, or pin {pin.source} to a commit whose file has it"
    if pin.json_path is not None:
        try:
            data = json.loads(text)
        except ValueError as exc:
            return "", (f"is not JSON ({exc.msg}, line {exc.lineno}), so json_path {pin.json_path} cannot be read "
                        f"— {fix}")
        value, missing = _at_path(data, pin.json_path)
        if missing is not None:
            return "", f"has no {pin.json_path} ({missing}) — {fix}"
        if isinstance(value, (dict, list)) or value is None or value == "":
            return "", f"holds {json.dumps(value)[:60]} at {pin.json_path}, not a value a URL can contain — {fix}"
        text_value = str(value).lower() if isinstance(value, bool) else str(value)
        return (text_value[:pin.chars] if pin.chars else text_value), None
    if pin.regex is not None:
        match = re.search(pin.regex, text, re.MULTILINE)
        if match is None:
            return "", f"has nothing matching {pin.regex!r} — {fix}"
        return (match.group(1) if match.re.groups else match.group(0)), None
    # FlagTree's setup.py reads exactly the first 8 characters
    return text[:pin.leading_chars], None


def _at_path(data: Any, path: str) -> tuple[Any, str | None]:
    """The value at a dotted path (integer parts index lists), or a note on where the path stops."""
    here = data
    for depth, part in enumerate(path.split(".")):
        where = ".".join(path.split(".")[:depth]) or "the top"
        if isinstance(here, dict):
            if part not in here:
                keys = ", ".join(sorted(map(str, here))[:8]) or "none"
                return None, f"{where} has no key {part!r}; its keys: {keys}"
            here = here[part]
        elif isinstance(here, list):
            if not part.lstrip("-").isdigit() or not -len(here) <= int(part) < len(here):
                return None, f"{where} is a list of {len(here)}, and {part!r} is not an index in it"
            here = here[int(part)]
        else:
            return None, f"{where} is {json.dumps(here)[:40]}, not an object or a list"
    return here, None


def check_sources(recipe: Recipe, ws: Workspace) -> int:
    """Run every probe and artifact pin check; raise one error listing all failures."""
    failures = probe_failures(recipe, ws) + artifact_pin_failures(recipe, ws)
    if failures:
        raise SourceError(
            f"{len(failures)} compatibility check{'s' if len(failures) > 1 else ''} failed; stopping before "
            "any download or build",
            details=tuple(failures),
            fix="pin compatible versions (--set sources.NAME.commit=<sha>) or update the recipe",
        )
    return sum(len(s.probes) for s in recipe.sources.values()) + sum(
        1 for a in recipe.artifacts.values() if a.matches)


def _read(path: Path) -> tuple[str, str | None]:
    """A source's file, or why it cannot be read. The checkout is the source's, not ours: its file may be a link
    to a device or a FIFO, or far bigger than any file a probe reads, so it is read as a regular file, capped."""
    try:
        data = read_regular(path, MAX_PROBED_BYTES)
    except OSError as exc:
        return "", f"cannot be read ({exc.strerror or exc})"
    if len(data) > MAX_PROBED_BYTES:
        return "", f"is larger than {MAX_PROBED_BYTES >> 20} MiB, which no file a recipe probes is"
    return data.decode("utf-8", errors="replace"), None
