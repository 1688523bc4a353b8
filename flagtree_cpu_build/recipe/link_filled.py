"""The link rules again, once ``resolve`` has filled a link's placeholders in (``link_values`` checks the text as
written): an interpreter's answer is outside input, so a platform named '..' must not lead a link out of the tree,
and two entries may become one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import RecipeError, RecipeProblem
from .checks import check_link_path
from .inputs import Links
from .loader import format_path, load, read_text
from .schema import Context, Path_


def check_filled_links(written: Links, filled: Links, origin: str) -> None:
    """The link rules on the filled-in entries (only when some entry held a placeholder); a break is a RecipeError
    located at the entry (``origin``'s line, when the file can be read), quoting the text as written."""
    changed = [i for i, (a, b) in enumerate(zip(written.entries, filled.entries, strict=True)) if a != b]
    if not changed:
        return
    ctx = Context()
    filled.check(ctx, ("links",))
    for i, link in enumerate(filled.entries):
        check_link_path(link.path, ctx, ("links", "entries", i, "path"))
        link.check(ctx, ("links", "entries", i))
    problems = ctx.problems  # the text as written passed these rules when the recipe was loaded: each is new
    if not problems:
        return
    lines = _lines(origin)
    located = [RecipeProblem(origin, lines.position(p.path).line if lines else None, _key(p.path),
                             p.message + _as_written(written, p.path), p.fix) for p in problems]
    raise RecipeError(origin, located)


def _entry(path: Path_) -> int | None:
    return path[2] if len(path) > 2 and isinstance(path[2], int) else None


def _as_written(written: Links, path: Path_) -> str:
    i = _entry(path)
    if i is None or len(path) < 4:
        return ""
    text = getattr(written.entries[i], str(path[3]))
    return f" (filled in from {text!r})" if "{" in text else ""


def _key(path: Path_) -> str:
    return format_path(path)


def _lines(origin: str) -> Any:
    """The recipe file's key positions (None: it cannot be read again, e.g. a text parsed from memory)."""
    try:
        return load(read_text(Path(origin)), origin)
    except (OSError, ValueError):
        return None
