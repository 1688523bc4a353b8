"""``--set KEY=VALUE``: changing a loaded recipe's data before it is validated.

An override edits the plain data ``loader`` produced, and records a position for what it
set, so a wrong value is reported against the ``--set`` argument, not a file line.
"""

from __future__ import annotations

import re
from typing import Any

from ..cache_url import redact
from ..errors import RecipeProblem
from . import loader
from .loader import LoadedData, Path_, Position, format_path

_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+")


def apply_override(loaded: LoadedData, assignment: str) -> None:
    """Apply one ``KEY=VALUE``; problems are appended to ``loaded.problems``.

    KEY is a dotted path (``sources.flagtree-cpu.commit``); a numeric segment indexes a
    list (``links.entries.3.target``). VALUE is read as YAML so lists and numbers work
    (``--set platform.arch=[aarch64,x86_64]``); where the recipe wants text, the raw
    VALUE is used as typed, so a commit id made only of digits stays a string.
    """
    origin = f"--set {redact(assignment)}"  # a URL's password given on the command line is not repeated
    key, sep, value_text = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        loaded.problems.append(
            RecipeProblem(origin, None, "", "an override must look like KEY=VALUE",
                          "e.g. --set sources.flagtree-cpu.commit=<40-hex-commit>")
        )
        return
    segments = key.split(".")
    if len(segments) > loader.MAX_DEPTH:  # no recipe is this deep; walking (and copying) it would recurse
        shown = origin if len(origin) <= 200 else f"{origin[:100]}... ({len(assignment):,} characters)"
        loaded.problems.append(
            RecipeProblem(shown, None, "", f"the key has {len(segments)} parts; a recipe is nested "
                          f"{loader.MAX_DEPTH} levels at most", "name a key the recipe has, e.g. "
                          "--set sources.flagtree-cpu.commit=<40-hex-commit>")
        )
        return
    if not all(_SEGMENT.fullmatch(s) for s in segments):
        loaded.problems.append(
            RecipeProblem(origin, None, key, "the key must be dot-separated names",
                          "e.g. --set artifacts.llvm.url=https://mirror.example/llvm.tar.gz")
        )
        return
    parsed = loader.load(value_text, origin) if value_text.strip() else LoadedData("", {}, [])
    # Not YAML, or YAML this loader refuses (`*name`, `!x`, a bomb): the value is most likely meant
    # as plain text, and as text it is harmless.
    value = value_text if parsed.problems else parsed.data
    if not isinstance(loaded.data, dict):
        return  # the file itself is broken; that problem is already reported
    path: Path_ = ()
    node: Any = loaded.data
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        step: str | int = segment
        if isinstance(node, list):
            if not segment.isdigit() or int(segment) >= len(node):
                loaded.problems.append(
                    RecipeProblem(origin, None, format_path(path), f"{segment!r} is not an index "
                                  f"of this list (it has {len(node)} items, counted from 0)")
                )
                return
            step = int(segment)
        elif not isinstance(node, dict):
            loaded.problems.append(
                RecipeProblem(origin, None, format_path(path),
                              "cannot set a key inside a value that is not a mapping")
            )
            return
        path = path + (step,)
        if last:
            node[step] = value
            loaded.positions[path] = Position(origin, None, value_text, from_override=True)
            _forget_positions_below(loaded.positions, path)
        else:
            if isinstance(node, dict) and step not in node:
                node[step] = {}
                loaded.positions[path] = Position(origin, None, None, from_override=True)
            node = node[step]


def _forget_positions_below(positions: dict[Path_, Position], path: Path_) -> None:
    """The overridden value replaced whatever the file had below ``path``."""
    depth = len(path)
    for key in [k for k in positions if len(k) > depth and k[:depth] == path]:
        del positions[key]
