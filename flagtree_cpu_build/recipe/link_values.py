"""Placeholders in a link's ``path`` and ``target``: a README's ``ln -s python/build/cmake.{platform.tag}-cpython-
{python.version} build`` as recipe data.

A link is relative to the root source (the tree can move), so it takes only the placeholders that *name* things
(the interpreter's version and tags, the architectures, the variant), never one that is a folder or a value from
outside ({workdir}, {sources.NAME.path}, {env.NAME}). The link rules are checked twice: on the text as written when
the recipe is loaded (here), and again once ``resolve`` has filled the values in (``link_filled``: an
interpreter's answer is outside input, so a platform named '..' must not lead a link out of the tree).
"""

from __future__ import annotations

import string

from .placeholder_checks import placeholder_catalog
from .schema import Context, Path_, suggest

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
