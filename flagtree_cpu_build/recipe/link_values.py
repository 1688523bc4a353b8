"""Placeholders in a link's ``path`` and ``target``: a README's ``ln -s python/build/cmake.{platform.tag}-cpython-
{python.version} build`` as recipe data.

A link is relative to the root source (the tree can move), so it takes only the placeholders that *name* things
(the interpreter's version and tags, the architectures, the variant), never one that is a folder or a value from
outside ({workdir}, {sources.NAME.path}, {env.NAME}). The link rules are checked twice: on the text as written when
the recipe is loaded, and again once ``resolve`` has filled the values in (an interpreter's answer is outside
input: a platform named '..' must not lead a link out of the tree, and two entries may become one).
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RecipeError, RecipeProblem
from .checks import check_link_path, placeholder_catalog
from .schema import Context, Path_, suggest

if TYPE_CHECKING:
    from .inputs import Links

LINK_PLACEHOLDERS = ("python.version", "python.tag", "platform.tag", "arch", "host.arch", "target.arch", "variant")
_TAKES = "a link takes " + ", ".join("{" + n + "}" for n in LINK_PLACEHOLDERS)


def check_link_placeholders(value: str, ctx: Context, path: Path_) -> None:
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as exc:
        ctx.report(path, f"{value!r}: {exc}", "write a literal brace as '{{' or '}}'")
        return
    known = placeholder_catalog(ctx.facts.get("sources", ()), ctx.facts.get("artifacts", ()),
                                ctx.facts.get("toolchains", ()))
    for _literal, name, fmt, conversion in parts:
        if name is None:
            continue
        if name in LINK_PLACEHOLDERS:
            if fmt or conversion:
                ctx.report(path, f"placeholder {{{name}}} has a format; only plain {{name}} works",
                           f"write {{{name}}}, without !conversion or :format")
        elif name in known or name.startswith("env.") or name == "glob":
            ctx.report(path, f"{{{name}}} cannot be part of a link: links are relative to the root source and "
                       "take only placeholders that name things", f"{_TAKES}; write the folder relative to the link")
        else:
            ctx.report(path, f"unknown placeholder {{{name}}}{suggest(name, LINK_PLACEHOLDERS)}", _TAKES)


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
    from .loader import format_path

    return format_path(path)


def _lines(origin: str) -> Any:
    """The recipe file's key positions (None: it cannot be read again, e.g. a text parsed from memory)."""
    from .loader import load, read_text

    try:
        return load(read_text(Path(origin)), origin)
    except (OSError, ValueError):
        return None
