"""YAML in, plain data out — bounded, with the line of every key and the text of every scalar.

PyYAML's ``safe_load`` forgets where values came from and silently keeps the last of
two duplicate keys. Recipe errors must name ``file:line``, so this module composes the
node tree itself and records, for each key path, where it was written. It also keeps
each scalar's source text: YAML 1.1 reads ``OFF`` as ``false`` and a 40-digit commit
id as an integer, and the error for that should quote what the user typed.

It is also the one door for YAML the user (or a damaged disk) hands us — recipes, ``--set``
values, the lock file — so hostile input ends as a located problem, never a hang or a crash:
at most ``MAX_TEXT_CHARS`` of text, ``MAX_DEPTH`` levels of nesting and ``MAX_VALUES`` values
with every alias counted as what it expands to; no recursive aliases, complex keys or tags
beyond plain data. See ``_Composer`` for why PyYAML's own composer cannot be used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import RecipeProblem
from ..regular_file import read_regular

Path_ = tuple[str | int, ...]  # a key path into the loaded data: ("sources", "flagtree", "url")

try:  # the C parser is several times faster; fall back when libyaml is absent
    _BaseLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _BaseLoader = yaml.SafeLoader

# The bundled recipe is ~10 KB, ~400 values, 7 levels deep; a lock file is smaller. The limits
# leave two orders of magnitude of room and still stop a hostile file in milliseconds.
MAX_TEXT_CHARS = 1 << 20
MAX_DEPTH = 64
MAX_VALUES = 100_000

_CORE = "tag:yaml.org,2002:"
_MERGE_TAG = _CORE + "merge"
# Tags a user may write explicitly (`!!str 0123`); anything else (`!custom`, `!!python/object`,
# `!!binary`, `!!set`) would need a constructor a recipe has no use for.
_SCALAR_TAGS = frozenset(_CORE + t for t in ("str", "int", "float", "bool", "null", "timestamp"))
# What PyYAML's scalar constructors raise on text that does not fit its tag: `!!int abc` (ValueError),
# `!!bool maybe` (KeyError), `!!timestamp soon` (AttributeError on a failed match), 2024-13-45 (ValueError).
_READ_ERRORS = (yaml.YAMLError, ValueError, KeyError, TypeError, OverflowError, AttributeError)
_YAML_FIX = "check indentation and quoting near that line; values containing ': ' or starting with '{' must be quoted"


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


def read_text(path: Path) -> str:
    """A file's text, but never more than ``MAX_TEXT_CHARS`` + 1 characters of it, so a huge or
    endless file is refused by ``load`` without first being read into memory.

    Only a regular file is read: a FIFO, a socket or a device (/dev/zero behind a symlink) raises
    ``regular_file.NotRegularFile`` at once, a folder ``IsADirectoryError``. Raises ``OSError``, or
    ``UnicodeDecodeError`` (``utf8_error_line`` locates it).
    """
    data = read_regular(path, MAX_TEXT_CHARS * 4 + 3)  # 4 bytes per character at most in UTF-8
    if len(data) > MAX_TEXT_CHARS * 4:  # too big whatever it holds; load() reports the size
        return data.decode("utf-8", "replace")[: MAX_TEXT_CHARS + 1]
    return data.decode("utf-8")


def utf8_error_line(exc: UnicodeDecodeError) -> int:
    return exc.object[: exc.start].count(b"\n") + 1


def load(text: str, origin: str) -> LoadedData:
    """Parse ``text``; syntax errors, hostile input and duplicate keys become problems, not exceptions."""
    if len(text) > MAX_TEXT_CHARS:
        return _unreadable(RecipeProblem(
            origin, 1, "", f"the file is larger than {MAX_TEXT_CHARS >> 20} MiB; flagtree-cpu reads no "
            "YAML file that big (a recipe is about 10 KB)",
            "check that this is the right file; a recipe looks like `flagtree-cpu recipe show "
            "flagtree-cpu-arm64 --raw`"))
    try:
        return _load(text, origin, _BaseLoader)
    except _Deeper:
        # libyaml (0.2.5 in PyYAML 6.0.4 wheels) refuses flow nesting past 1000 levels in its scanner,
        # before our composer has seen level MAX_DEPTH + 1 (the scanner reads ahead for simple keys).
        # The pure-Python scanner has no such limit and looks ahead at most 1024 characters, so read
        # again with it: the problem is then ours, on the line where MAX_DEPTH was passed, whichever
        # PyYAML is installed.
        return _load(text, origin, yaml.SafeLoader)


class _Deeper(Exception):
    """The YAML library stopped the input for nesting before our composer could."""


def _load(text: str, origin: str, loader_class: type) -> LoadedData:
    loader = loader_class(text)
    try:
        composer = _Composer(loader, origin)
        node = composer.compose()
        if composer.problems:
            return LoadedData(None, {}, composer.problems)
        if node is None:
            return LoadedData(None, {(): Position(origin, 1)}, [])
        converter = _Converter(loader, origin)
        converter.positions[()] = Position(origin, node.start_mark.line + 1)
        data = converter.value(node, ())
        return LoadedData(data, converter.positions, list(dict.fromkeys(converter.problems)))
    except _Stop as stop:
        return _unreadable(stop.problem)
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" in str(exc.problem) and loader_class is not yaml.SafeLoader:
            raise _Deeper() from None
        mark = exc.problem_mark or exc.context_mark
        return _unreadable(RecipeProblem(origin, mark.line + 1 if mark else 1, "",
                                         f"not valid YAML: {exc.problem or exc}", _YAML_FIX))
    except yaml.YAMLError as exc:  # the reader: characters YAML forbids (NUL, other controls)
        offset = getattr(exc, "position", 0) or 0  # a byte offset into the UTF-8 text
        line = text.encode("utf-8", "replace")[:offset].count(b"\n") + 1
        return _unreadable(RecipeProblem(origin, line, "", f"not valid YAML: {str(exc).splitlines()[0]}",
                                         "remove the control character (a NUL or similar) from that line"))
    finally:
        loader.dispose()


def _unreadable(problem: RecipeProblem) -> LoadedData:
    return LoadedData(None, {}, [problem])


# --- composing: events -> node graph, bounded ---------------------------------------------


class _Stop(Exception):
    """Reading cannot go on (a limit, a broken alias); carries the one problem to report."""

    def __init__(self, problem: RecipeProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


@dataclass
class _Open:
    """A list or mapping whose end has not been read yet."""

    node: yaml.CollectionNode
    anchor: str | None
    values_before: int  # the running count when it opened: its size is the difference at its end
    height: int = 1  # levels of nesting in it, itself included, aliases counted as what they name
    key: yaml.Node | None = field(default=None)  # a mapping's key still waiting for its value


class _Composer:
    """Parser events -> node graph, with an explicit stack, charging each alias its full size.

    PyYAML's composer and libyaml's (behind ``CSafeLoader``) recurse once per level of
    nesting, so deep nesting raises RecursionError and 200,000 levels overflow the C stack
    (SIGSEGV); libyaml also slows down quadratically with depth (82 s to stream 200,000
    ``[``). And an alias costs a composer nothing — a 1.5 KB "billion laughs" file is a
    tiny graph — the bill comes when it is turned into data. So this composer stops at
    ``MAX_DEPTH`` while streaming, and counts every alias as the values and depth it will
    expand to, stopping at ``MAX_VALUES`` before anything big exists.
    """

    def __init__(self, loader: Any, origin: str) -> None:
        self.loader, self.origin = loader, origin
        self.stack: list[_Open] = []
        self.anchors: dict[str, tuple[yaml.Node, int, int]] = {}  # name -> node, values, height
        self.open_anchors: dict[str, int] = {}  # anchors of collections still being read -> line
        self.values = 0
        self.documents = 0
        self.root: yaml.Node | None = None
        self.problems: list[RecipeProblem] = []  # tags and complex keys: reading goes on to find all

    def compose(self) -> yaml.Node | None:
        while self.loader.check_event():
            event = self.loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                self._alias(event)
            elif isinstance(event, yaml.ScalarEvent):
                self._scalar(event)
            elif isinstance(event, yaml.CollectionStartEvent):
                self._open(event)
            elif isinstance(event, yaml.CollectionEndEvent):
                self._close()
            elif isinstance(event, yaml.DocumentStartEvent):
                self.documents += 1
                if self.documents > 1:
                    raise self._stop(event, "a second YAML document starts here; the file must be "
                                     "one document", "remove the '---' line and what follows, or "
                                     "merge the two documents")
        return self.root

    def _scalar(self, event: yaml.ScalarEvent) -> None:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
            tag = _CORE + "str" if tag == _CORE + "value" else tag  # a lone '=' is text
        elif tag not in _SCALAR_TAGS:
            self._bad_tag(event)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        self._count(1, event)
        self._define(event, node, 1, 0)
        self._add(node, 0, event.start_mark)

    def _open(self, event: yaml.CollectionStartEvent) -> None:
        mapping = isinstance(event, yaml.MappingStartEvent)
        tag = _CORE + ("map" if mapping else "seq")
        if event.tag not in (None, "!", tag):
            self._bad_tag(event)
        if len(self.stack) >= MAX_DEPTH:
            raise self._too_deep(event)
        kind = yaml.MappingNode if mapping else yaml.SequenceNode
        node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
        self._define(event, None, 0, 0)
        if event.anchor is not None:
            self.open_anchors[event.anchor] = event.start_mark.line + 1
        self.stack.append(_Open(node, event.anchor, self.values))
        self._count(1, event)

    def _close(self) -> None:
        frame = self.stack.pop()
        if frame.anchor is not None:
            del self.open_anchors[frame.anchor]
            self.anchors[frame.anchor] = (frame.node, self.values - frame.values_before, frame.height)
        self._add(frame.node, frame.height, frame.node.start_mark)

    def _alias(self, event: yaml.AliasEvent) -> None:
        name = event.anchor
        if name in self.open_anchors:
            raise self._stop(event, f"alias *{name} is inside the value it names (&{name}, line "
                             f"{self.open_anchors[name]}), so that value would contain itself forever",
                             "point the alias at another anchor, or write the value out")
        if name not in self.anchors:
            raise self._stop(event, f"alias *{name} names no anchor defined before it",
                             f"define `&{name}` on an earlier value, or quote the text if '*{name}' "
                             "is meant literally")
        node, values, height = self.anchors[name]
        if len(self.stack) + height > MAX_DEPTH:
            raise self._too_deep(event)
        self._count(values, event)
        self._add(node, height, event.start_mark)

    def _define(self, event: yaml.NodeEvent, node: yaml.Node | None, values: int, height: int) -> None:
        name = event.anchor
        if name is None:
            return
        if name in self.anchors or name in self.open_anchors:
            raise self._stop(event, f"anchor &{name} is defined twice", "rename one of the two anchors "
                             "and the aliases (*name) that mean it")
        if node is not None:
            self.anchors[name] = (node, values, height)

    def _add(self, node: yaml.Node, height: int, mark: yaml.Mark) -> None:
        if not self.stack:
            self.root = node
            return
        parent = self.stack[-1]
        parent.height = max(parent.height, height + 1)
        if isinstance(parent.node, yaml.SequenceNode):
            parent.node.value.append(node)
        elif parent.key is None:
            if not isinstance(node, yaml.ScalarNode):
                self.problems.append(RecipeProblem(
                    self.origin, mark.line + 1, "", "a key here is a list or a mapping; keys must be "
                    "plain text", "write the key as plain text (drop the '?', brackets or braces)"))
            parent.key = node
        else:
            parent.node.value.append((parent.key, node))
            parent.key = None

    def _count(self, values: int, event: yaml.Event) -> None:
        self.values += values
        if self.values <= MAX_VALUES:
            return
        if isinstance(event, yaml.AliasEvent) or self.anchors:
            raise self._stop(event, f"the file holds more than {MAX_VALUES:,} values once aliases "
                             "are expanded (an alias bomb?)", "use anchors (&name) for a few small "
                             "values only, and never alias a value that is made of aliases")
        raise self._stop(event, f"the file holds more than {MAX_VALUES:,} values; a recipe holds a "
                         "few hundred", "check that this is the right file")

    def _bad_tag(self, event: yaml.NodeEvent) -> None:
        tag = event.tag.replace(_CORE, "!!", 1) if event.tag.startswith(_CORE) else event.tag
        self.problems.append(RecipeProblem(
            self.origin, event.start_mark.line + 1, "", f"the tag {tag} is not allowed; a recipe holds "
            "only text, numbers, true/false, lists and mappings",
            f"remove {tag}; to keep a value as text, quote it"))

    def _too_deep(self, event: yaml.Event) -> _Stop:
        return self._stop(event, f"values are nested more than {MAX_DEPTH} levels deep here (aliases "
                          "count as what they name)", "a recipe needs a few levels; check for unclosed "
                          "'[' or '{' and for aliases nested in aliases")

    def _stop(self, event: yaml.Event, message: str, fix: str) -> _Stop:
        return _Stop(RecipeProblem(self.origin, event.start_mark.line + 1, "", message, fix))


# --- converting: node graph -> plain data with positions -------------------------------------


class _Converter:
    """The composed graph -> dicts, lists and scalars, recording where each key path was written.

    The composer has bounded the expanded size and depth, so plain recursion is safe here.
    """

    def __init__(self, loader: Any, origin: str) -> None:
        self.loader, self.origin = loader, origin
        self.positions: dict[Path_, Position] = {}
        self.problems: list[RecipeProblem] = []

    def value(self, node: yaml.Node, path: Path_) -> Any:
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self._place(path + (index,), item, item)
                items.append(self.value(item, path + (index,)))
            return items
        return self._scalar(node, path)

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[Any, Any]:
        chosen: dict[Any, tuple[yaml.Node, yaml.Node]] = {}
        own_lines: dict[Any, int] = {}
        for key_node, value_node, own in self._pairs(node, path):
            key = self._scalar(key_node, path)
            line = key_node.start_mark.line + 1
            if own and key in own_lines:
                self.problems.append(RecipeProblem(
                    self.origin, line, format_path(path + (key,)), f"duplicate key {key!r} (first "
                    f"written on line {own_lines[key]}); YAML would silently keep only the last one",
                    "delete one of the two entries"))
                continue
            if own:
                own_lines[key] = line
            chosen[key] = (key_node, value_node)  # as in PyYAML: a later pair wins, the key keeps its place
        result = {}
        for key, (key_node, value_node) in chosen.items():
            self._place(path + (key,), key_node, value_node)
            result[key] = self.value(value_node, path + (key,))
        return result

    def _pairs(self, node: yaml.MappingNode, path: Path_) -> list[tuple[yaml.Node, yaml.Node, bool]]:
        """The mapping's pairs after YAML merge keys (``<<: *defaults``), in PyYAML's order: merged
        pairs first, the last merge source first, so the mapping's own keys and then the first
        source win. (PyYAML's ``flatten_mapping`` copies the pairs into the graph, which an alias
        bomb of merges would make exponential; here they are only listed.)"""
        merged: list[tuple[yaml.Node, yaml.Node, bool]] = []
        own = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                own.append((key_node, value_node, True))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            if not all(isinstance(s, yaml.MappingNode) for s in sources):
                self.problems.append(RecipeProblem(
                    self.origin, key_node.start_mark.line + 1, format_path(path), "'<<' merges mappings "
                    "into this one, but its value is not a mapping or a list of mappings",
                    "write `<<: *name` where &name marks a mapping, or drop the '<<' line"))
                continue
            for source in reversed(sources):
                merged.extend((k, v, False) for k, v, _ in self._pairs(source, path))
        return merged + own

    def _scalar(self, node: yaml.Node, path: Path_) -> Any:
        if node.tag == _MERGE_TAG:
            return node.value  # '<<' anywhere but as a key is just text
        try:
            return self.loader.construct_object(node)
        except _READ_ERRORS as exc:  # `!!int abc`, a date such as 2024-13-45, `!!bool maybe`
            kind = node.tag.replace(_CORE, "", 1)
            self.problems.append(RecipeProblem(
                self.origin, node.start_mark.line + 1, format_path(path), f"{node.value!r} is not a "
                f"valid {kind} ({exc})", f"quote it to keep it as text: '{node.value}'"))
            return node.value

    def _place(self, path: Path_, where: yaml.Node, value: yaml.Node) -> None:
        raw = value.value if isinstance(value, yaml.ScalarNode) else None
        self.positions[path] = Position(self.origin, where.start_mark.line + 1, raw)


# --- key paths ------------------------------------------------------------------------------


def format_path(path: Path_) -> str:
    """``("links", "entries", 3, "target")`` -> ``links.entries[3].target``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text
