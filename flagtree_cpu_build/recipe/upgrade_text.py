"""`flagtree-cpu recipe upgrade`: a version 1 or 2 recipe file rewritten as version 3 text, comments kept.

Version 2 -> 3 changes the `schema_version` line only; version 1 is first rewritten as version 2 (below).

``upgrade.upgrade_data`` says what the version 2 data is; this module finds the lines that can stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .upgrade import to_current, upgrade_data, upgrade_path


class UpgradeError(Exception):
    """The rewritten text does not read back as the upgraded recipe: a bug in the rewrite, never the user's."""


def upgrade_text(text: str) -> str:
    """A v1 or v2 recipe file's text as the current version, keeping every line but the version's."""
    import yaml

    old = yaml.safe_load(text)
    if not isinstance(old, dict) or old.get("schema_version") not in (1, 2):
        raise ValueError("upgrade_text takes a schema version 1 or 2 recipe")
    v2 = v1_to_v2_text(text) if old["schema_version"] == 1 else text
    new = to_current(old)
    lines = v2.splitlines()
    for i, line in enumerate(lines):
        bumped, n = re.subn(r"""^(schema_version\s*:\s*)(["']?)2\2(?=\s*(#|$))""", r"\g<1>3", line)
        if n:
            result = "\n".join(lines[:i] + [bumped] + lines[i + 1:]).rstrip("\n") + "\n"
            break
    else:  # written some other way (flow style, a YAML tag): every comment on top, the data written anew
        result = "\n".join(_plain(lines, new)).rstrip("\n") + "\n"
    if yaml.safe_load(result) != new:
        raise UpgradeError("the rewritten recipe does not read back as the upgraded one")
    return result


def v1_to_v2_text(text: str) -> str:
    """A v1 recipe file's text as v2, keeping what can be kept.

    A mapping is split into blocks, one per key (a block also owns the blank and comment lines right above
    its key). A block the upgrade leaves alone is copied line for line; a block that only moves (`unset_env`
    -> `env.unset`, `env` -> `env.set`) is copied, indented and renamed; a changed mapping is rewritten key
    by key the same way; anything else is written anew by PyYAML with the comment lines of what it replaces
    just above it, so no comment is lost. ``schema_version: 1`` becomes 2 in place.

    The result is read back and compared with ``upgrade_data`` of the original; raises UpgradeError when
    they differ (after trying a plain rewrite with every comment on top)."""
    import yaml

    old = yaml.safe_load(text)
    if not isinstance(old, dict) or old.get("schema_version") != 1:
        raise ValueError("upgrade_text takes a schema version 1 recipe")
    new = upgrade_data(old)
    lines = text.splitlines()
    candidates = []
    try:
        body = _Rewrite(old).mapping(lines, 0, 2, old, new, (), (), ())
    except _Unfit:
        body = None
    if body is not None:
        candidates.append(body)
    candidates.append(_plain(lines, new))
    for candidate in candidates:
        result = "\n".join(candidate).rstrip("\n") + "\n"
        try:
            if yaml.safe_load(result) == new:
                return result
        except yaml.YAMLError:
            continue
    raise UpgradeError("the rewritten recipe does not read back as the upgraded one")


class _Unfit(Exception):
    """A layout the line-keeping rewrite does not follow (the caller writes the value anew)."""


@dataclass
class _Block:
    key: Any
    v1_path: tuple[Any, ...]  # where its value is in the v1 data
    value: Any  # that value
    ind: int  # indentation of its key line
    lead: list[str] = field(default_factory=list)  # blank and comment lines right above the key
    lines: list[str] = field(default_factory=list)  # the key line and every line under it

    @property
    def inline(self) -> bool:
        """Whether the key line carries the value itself (`root: {strip: 1}`) rather than lines below."""
        rest = self.lines[0][self.ind:][_KEY_RE.match(self.lines[0][self.ind:]).end():].strip()  # type: ignore[union-attr]
        return bool(rest) and not rest.startswith("#")

    @property
    def comments(self) -> list[str]:
        return [x.strip() for x in self.lead + self.lines[1:] if x.strip().startswith("#")]

    def placed(self, ind: int, key: Any) -> list[str]:
        """Its lines with the key at indentation ``ind`` and named ``key``."""
        shift = ind - self.ind
        if shift < 0:
            raise _Unfit
        first = self.lines[0][self.ind:]
        match = _KEY_RE.match(first)
        assert match is not None
        if key != self.key:
            first = str(key) + first[match.end(1):]
        moved = [(" " * shift + x) if x.strip() else x for x in self.lead + self.lines[1:]]
        return moved[:len(self.lead)] + [" " * ind + first] + moved[len(self.lead):]


_KEY_RE = re.compile(r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^\s#'\"{\[&*!|>%@`,-][^#]*?|-[^\s#][^#]*?)\s*:(?=\s|$)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_comment(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def _key_at(line: str, ind: int) -> tuple[bool, Any]:
    """Whether a line opens a key at indentation ``ind``, and that key as YAML reads it."""
    import yaml

    if _indent(line) != ind or _is_comment(line):
        return False, None
    match = _KEY_RE.match(line[ind:])
    if not match:
        return False, None
    try:
        return True, yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return False, None


class _Rewrite:
    def __init__(self, v1: dict[str, Any]):
        self.v1 = v1

    def split(self, lines: list[str], ind: int, old: dict[Any, Any], v1_path: tuple[Any, ...]
              ) -> tuple[list[str], list[_Block]]:
        """The lines before the first key, and one block per key at indentation ``ind``."""
        head: list[str] = []
        blocks: list[_Block] = []
        for line in lines:
            opens, key = _key_at(line, ind)
            if not opens:
                (blocks[-1].lines if blocks else head).append(line)
                continue
            above = blocks[-1].lines if blocks else head
            lead: list[str] = []
            while len(above) > (1 if blocks else 0) and _is_comment(above[-1]) and (
                    not above[-1].strip() or _indent(above[-1]) <= ind):
                lead.insert(0, above.pop())
            if key not in old:
                raise _Unfit
            blocks.append(_Block(key, v1_path + (key,), old[key], ind, lead, [line]))
        if [b.key for b in blocks] != list(old):
            raise _Unfit
        return head, blocks

    def landing(self, block: _Block, path: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Where under v2 ``path`` the block's value lands: () for ``path`` itself, (KEY,) for its key KEY,
        (KEY, SUB) for a key inside KEY; None when elsewhere."""
        try:
            moved = upgrade_path(block.v1_path, self.v1)
        except (ValueError, TypeError):
            moved = block.v1_path
        if moved[:len(path)] != path:
            return None
        return moved[len(path):]

    def mapping(self, lines: list[str], ind: int, step: int, old: dict[Any, Any], new: dict[Any, Any],
                path: tuple[Any, ...], v1_path: tuple[Any, ...], inherited: tuple[_Block, ...]) -> list[str]:
        """The v2 lines of the mapping ``new`` (at v2 ``path``), whose v1 form ``old`` (at ``v1_path``) is
        written in ``lines`` at indentation ``ind``; ``inherited`` are blocks of other v1 keys that move into it."""
        head, blocks = self.split(lines, ind, old, v1_path)
        homes: dict[Any, list[tuple[_Block, tuple[Any, ...]]]] = {}
        strays: list[_Block] = []
        for block in blocks + list(inherited):
            where = self.landing(block, path)
            if not where or where[0] not in new:
                strays.append(block)
            else:
                homes.setdefault(where[0], []).append((block, where[1:]))
        out = list(head)
        for key, value in new.items():
            if strays:  # what has no place in v2 keeps its comments, above the first key
                out += [" " * ind + c for b in strays for c in b.comments]
                strays = []
            out += self.entry(key, value, homes.get(key, []), ind, step, path)
        return out

    def entry(self, key: Any, value: Any, mine: list[tuple[_Block, tuple[Any, ...]]], ind: int, step: int,
              path: tuple[Any, ...]) -> list[str]:
        """The lines of v2 key ``key``, made from the v1 blocks that land in it."""
        itself = [b for b, rest in mine if rest == ()]
        inside = [(b, rest) for b, rest in mine if rest != ()]
        try:
            if len(itself) == 1 and not inside and itself[0].value == value:
                return itself[0].placed(ind, key)  # unchanged, perhaps moved or renamed
            if len(itself) == 1 and path == () and key == "schema_version" and len(itself[0].lines) == 1:
                line, n = re.subn(r"^(schema_version\s*:\s*)1(?=\s*(#|$))", r"\g<1>2", itself[0].lines[0])
                if n:
                    return itself[0].lead + [line]
            if len(itself) == 1 and isinstance(itself[0].value, dict) and isinstance(value, dict) \
                    and not itself[0].inline and itself[0].ind == ind and all(len(r) >= 1 for _, r in inside):
                block = itself[0]
                body = block.lines[1:]
                child = next((_indent(x) for x in body if not _is_comment(x)), None)
                if child is not None and child > ind:
                    return block.lead + block.lines[:1] + self.mapping(
                        body, child, child - ind, block.value, value, path + (key,), block.v1_path,
                        tuple(b for b, _ in inside))
            if not itself and isinstance(value, dict) and [r for _, r in inside] == [(k,) for k in value] \
                    and all(b.value == value[r[0]] for b, r in inside):
                out = [" " * ind + f"{key}:"]  # the v1 keys, one level down (env -> env.set)
                for block, rest in inside:
                    out += block.placed(ind + step, rest[0])
                return out
        except _Unfit:
            pass
        first = mine[0][0].lead if mine else []
        out = [""] if first and not first[0].strip() else []  # the blank line that separated it stays
        out += [" " * ind + c for b, _ in mine for c in b.comments]
        return out + [" " * ind + x for x in _dump({key: value}).splitlines()]


def _plain(lines: list[str], new: dict[str, Any]) -> list[str]:
    """The last resort: every comment line on top, then the upgraded recipe as PyYAML writes it."""
    comments = [x.strip() for x in lines if x.strip().startswith("#")]
    return comments + ([""] if comments else []) + _dump(new).splitlines()


def _dump(data: Any) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # a value written twice reads better than &id001
            return True

        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, False)  # list items indented under their key, as people write them

    return yaml.dump(data, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True)
