"""YAML in, plain data out — with the line of every key and the text of every scalar.

PyYAML's ``safe_load`` forgets where values came from and silently keeps the last of
two duplicate keys. Recipe errors must name ``file:line``, so this module composes the
node tree itself and records, for each key path, where it was written. It also keeps
each scalar's source text: YAML 1.1 reads ``OFF`` as ``false`` and a 40-digit commit
id as an integer, and the error for that should quote what the user typed.

``--set KEY=VALUE`` overrides are applied here too, onto the same plain data, so they
are validated exactly like the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from .errors import RecipeProblem

Path_ = tuple[str | int, ...]  # a key path into the loaded data: ("sources", "flagtree", "url")

try:  # the C loader is several times faster; fall back when libyaml is absent
    _BaseLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _BaseLoader = yaml.SafeLoader


@dataclass(frozen=True)
class Position:
    """Where a value came from: a file line, or a ``--set`` argument."""

    origin: str
    line: int | None
    raw: str | None = None  # the scalar exactly as written, when it is a scalar
    from_override: bool = False


@dataclass
class LoadedData:
    data: Any
    positions: dict[Path_, Position]
    problems: list[RecipeProblem]

    def position(self, path: Path_) -> Position:
        """The position of ``path``, or of its nearest ancestor that has one."""
        probe = tuple(path)
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            probe = probe[:-1]
        return self.positions.get((), Position(origin="<recipe>", line=None))


def load(text: str, origin: str) -> LoadedData:
    """Parse ``text``; syntax errors and duplicate keys become problems, not exceptions."""
    loader = _BaseLoader(text)
    positions: dict[Path_, Position] = {}
    problems: list[RecipeProblem] = []
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        what = exc.problem or str(exc)
        problems.append(
            RecipeProblem(
                origin,
                line,
                "",
                f"not valid YAML: {what}",
                "check indentation and quoting near that line; values containing ': ' or "
                "starting with '{' must be quoted",
            )
        )
        return LoadedData(None, positions, problems)
    except yaml.YAMLError as exc:  # pragma: no cover - reader errors (bad encoding)
        problems.append(RecipeProblem(origin, None, "", f"not valid YAML: {exc}"))
        return LoadedData(None, positions, problems)
    finally:
        loader.dispose()
    if node is None:
        return LoadedData(None, {(): Position(origin, 1)}, problems)
    positions[()] = Position(origin, node.start_mark.line + 1)
    data = _to_data(loader, node, (), origin, positions, problems)
    return LoadedData(data, positions, problems)


def _to_data(
    loader: Any,
    node: yaml.Node,
    path: Path_,
    origin: str,
    positions: dict[Path_, Position],
    problems: list[RecipeProblem],
) -> Any:
    if isinstance(node, yaml.MappingNode):
        own_keys = {id(k) for k, _ in node.value}
        loader.flatten_mapping(node)  # resolves YAML merge keys (<<: *anchor)
        result: dict[Any, Any] = {}
        merged: set[Any] = set()  # keys that came from a merge; the mapping's own keys override them
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            child = path + (key,)
            line = key_node.start_mark.line + 1
            if id(key_node) not in own_keys:
                if key in result:
                    continue  # an earlier merge source already gave this key
                merged.add(key)
            elif key in merged:
                merged.discard(key)
                del result[key]
            elif key in result:
                first = positions[child].line
                problems.append(
                    RecipeProblem(
                        origin,
                        line,
                        format_path(child),
                        f"duplicate key {key!r} (first written on line {first}); YAML would "
                        "silently keep only the last one",
                        "delete one of the two entries",
                    )
                )
                continue
            raw = value_node.value if isinstance(value_node, yaml.ScalarNode) else None
            positions[child] = Position(origin, line, raw)
            result[key] = _to_data(loader, value_node, child, origin, positions, problems)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item_node in enumerate(node.value):
            child = path + (index,)
            raw = item_node.value if isinstance(item_node, yaml.ScalarNode) else None
            positions[child] = Position(origin, item_node.start_mark.line + 1, raw)
            items.append(_to_data(loader, item_node, child, origin, positions, problems))
        return items
    return loader.construct_object(node, deep=True)


def format_path(path: Path_) -> str:
    """``("links", "entries", 3, "target")`` -> ``links.entries[3].target``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


# --- overrides -----------------------------------------------------------------------

_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+")


def apply_override(loaded: LoadedData, assignment: str) -> None:
    """Apply one ``KEY=VALUE``; problems are appended to ``loaded.problems``.

    KEY is a dotted path (``sources.flagtree-cpu.commit``); a numeric segment indexes a
    list (``links.entries.3.target``). VALUE is read as YAML so lists and numbers work
    (``--set platform.arch=[aarch64,x86_64]``); where the recipe wants text, the raw
    VALUE is used as typed, so a commit id made only of digits stays a string.
    """
    origin = f"--set {assignment}"
    key, sep, value_text = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        loaded.problems.append(
            RecipeProblem(origin, None, "", "an override must look like KEY=VALUE",
                          "e.g. --set sources.flagtree-cpu.commit=<40-hex-commit>")
        )
        return
    segments = key.split(".")
    if not all(_SEGMENT.fullmatch(s) for s in segments):
        loaded.problems.append(
            RecipeProblem(origin, None, key, "the key must be dot-separated names",
                          "e.g. --set artifacts.llvm.url=https://mirror.example/llvm.tar.gz")
        )
        return
    try:
        value = yaml.load(value_text, Loader=_BaseLoader) if value_text.strip() else ""
    except yaml.YAMLError:
        value = value_text  # not YAML: take it literally, it is most likely a plain string
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
