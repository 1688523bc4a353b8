"""How a table fits a terminal without breaking what a user copies out of it (no rich here: ``ui.table`` renders).

A column is declared with its kind, never guessed from its text:

- ``PROSE`` (the default): wraps at spaces; a word is never split. A word wider than the column (a path or a URL
  inside a sentence) sits on a line of its own and, only if it cannot fit at all, is elided in the middle.
- ``PATH``: a path, URL, command or name: never wrapped (not even at a space); elided in the middle when the row
  cannot fit, keeping where it starts and the file it names (``/tmp/…/logs/build.log``).
- ``LABEL``: a short word (a status, a stage, a size): kept whole; shrunk only when nothing else can give.

When the row is too wide, prose columns give first (down to their longest word), then paths and prose share what
is still missing, widest first. Sizes are counted in characters; the table's callers print file names, URLs and
words, whose characters are one cell wide.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["prose", "path", "label"]
PROSE: Kind = "prose"
PATH: Kind = "path"
LABEL: Kind = "label"

ELLIPSIS = "…"
MIN_ELIDED = 16  # a path elided to less than this names nothing a user could find
_WORD = re.compile(r"\S+")

# one printed line of a cell: slices of the cell's text, joined by ELLIPSIS (one slice: nothing elided)
Line = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Column:
    header: str
    kind: Kind = PROSE


def as_column(column: Column | str) -> Column:
    return column if isinstance(column, Column) else Column(column)


def column_widths(columns: Sequence[Column], cells: Sequence[Sequence[str]], available: int) -> list[int]:
    """The width of each column (text only: no padding or rules) for rows whose cells are ``cells``."""
    natural = [max([len(line) for c in (column.header, *(row[i] for row in cells)) for line in c.split("\n")])
               for i, column in enumerate(columns)]
    widths = list(natural)
    excess = sum(widths) - available
    if excess <= 0:
        return widths
    # prose first, down to its longest word: a sentence that wraps loses nothing
    floors = [_longest_word(column, [row[i] for row in cells]) if column.kind == PROSE else natural[i]
              for i, column in enumerate(columns)]
    excess = _shrink(widths, floors, excess)
    # then paths and long words, widest first, elided in the middle
    floors = [natural[i] if column.kind == LABEL else min(natural[i], max(MIN_ELIDED, len(column.header)))
              for i, column in enumerate(columns)]
    excess = _shrink(widths, floors, excess)
    # a terminal narrower than the labels: everything gives, labels lose their end
    _shrink(widths, [min(n, 3) for n in natural], excess)
    return widths


def _longest_word(column: Column, texts: Sequence[str]) -> int:
    return max([len(word) for text in (column.header, *texts) for word in text.split()], default=1)


def _shrink(widths: list[int], floors: Sequence[int], excess: int) -> int:
    """Take ``excess`` characters from the widest columns above their floor; what could not be taken."""
    while excess > 0:
        candidates = [i for i, w in enumerate(widths) if w > floors[i]]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return excess


def cell_lines(text: str, kind: Kind, width: int) -> list[Line]:
    """The lines ``text`` prints as in a column of ``width`` characters."""
    lines: list[Line] = []
    start = 0
    for paragraph in text.split("\n"):
        end = start + len(paragraph)
        if kind == PROSE:
            lines += [_fit(s, e, text, width) for s, e in _wrap(paragraph, start, width)]
        else:
            lines.append(_fit(start, end, text, width, keep_end=kind == PATH))
        start = end + 1
    return lines


def _wrap(paragraph: str, offset: int, width: int) -> list[tuple[int, int]]:
    """Lines broken at spaces (a paragraph's indentation kept); a word longer than ``width`` alone on its line."""
    lines: list[tuple[int, int]] = []
    line_start = line_end = None
    for word in _WORD.finditer(paragraph):
        if line_start is None:
            line_start, line_end = (0 if not lines else word.start()), word.end()
        elif word.end() - line_start <= width:
            line_end = word.end()
        else:
            lines.append((line_start, line_end))  # type: ignore[arg-type]
            line_start, line_end = word.start(), word.end()
    if line_start is None:
        return [(offset, offset)]
    lines.append((line_start, line_end))  # type: ignore[arg-type]
    return [(offset + s, offset + e) for s, e in lines]


def _fit(start: int, end: int, text: str, width: int, *, keep_end: bool = True) -> Line:
    """``text[start:end]`` in ``width`` characters: whole if it fits, else elided in the middle (or at the end)."""
    if end - start <= width:
        return ((start, end),)
    room = max(width - 1, 0)
    if not keep_end:
        return ((start, start + room), (end, end))
    tail = room - room // 3  # the end names the file: two thirds, or all of the file's name if the start keeps 5
    name = end - max(text.rfind("/", start, end), start)
    if tail < name <= room - 5:
        tail = name
    cut = text.find("/", end - tail, end)  # start the end at a folder boundary: …/logs/build.log
    if cut > end - tail and end - cut > 1:
        tail = end - cut
    head = room - tail
    boundary = text.rfind("/", start, start + head)
    if boundary > start:  # end the start at a folder boundary too: /tmp/…
        head = boundary + 1 - start
    while (longer := text.rfind("/", start + head, end - tail)) >= 0 and head + end - longer <= room:
        tail = end - longer  # what the boundaries left over: whole folders at the end
    return ((start, start + head), (end - tail, end))
