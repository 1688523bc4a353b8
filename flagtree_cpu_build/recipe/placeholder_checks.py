"""The placeholders a recipe may use and the checks of the fields that hold them.

The catalog (``PLACEHOLDERS`` and the per-source, per-artifact and per-toolchain ones) says which ``{name}`` the
tool can fill in (``placeholders.placeholder_values`` gives the values); the checks report an unknown one with a
did-you-mean, a format where none is allowed, and ``{glob:PATTERN}`` outside the fields that take it.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable
from typing import Any

from . import schema as rs
from .checks import ENV_NAME_RE
from .match_names import name_of
from .schema import Context, Path_, suggest

# Placeholders every recipe may use in fields marked "interpolate". The values come from
# the workspace and the host (placeholders.placeholder_values); per-source and per-artifact
# placeholders are added from the recipe itself.
PLACEHOLDERS: dict[str, str] = {
    "workdir": "the workspace folder (--workdir, default ./flagtree-workspace)",
    "home": "the user's home folder",
    "triton_home": "where Triton keeps .triton/ ($TRITON_HOME, else the home folder)",
    "state_dir": "the tool's state folder inside the workspace ({workdir}/.flagtree-cpu)",
    "logs_dir": "the log folder inside the workspace ({workdir}/logs)",
    "cache_dir": "the per-user download cache",
    "empty_dir": "an empty folder the tool creates, for variables that must name an "
    "existing path but should provide nothing",
    "python": "the target Python interpreter (the workspace venv unless one is active)",
    "jobs": "parallel compile jobs, from CPU cores and available memory",
    "link_jobs": "parallel link jobs, from available memory",
    "arch": "the host machine architecture (e.g. aarch64); the same as {host.arch}",
    "host.arch": "the architecture of the machine the build runs on",
    "target.arch": "the architecture the products run on (platform.target.arch; the host's when native)",
    "variant": "the chosen variant (--variant, else the recipe's default; empty when it has none)",
    "wheel_dir": "where `build --wheel DIR` puts wheels (default {workdir}/dist)",
    "python.version": "the target interpreter's version as build folders name it (3.11: "
    "build/cmake.{platform.tag}-cpython-{python.version})",
    "python.tag": "the target interpreter's wheel tag (cp311)",
    "platform.tag": "the target interpreter's platform as setuptools names build folders (linux-x86_64)",
}

SOURCE_PLACEHOLDERS = {"path": "absolute path of the source's checkout"}

ARTIFACT_PLACEHOLDERS = {"path": "absolute path of the published tree", "url": "the download URL"}

TOOLCHAIN_PLACEHOLDERS = {"path": "the pre-provisioned toolchain's folder on this host"}

ENV_PLACEHOLDER = "env.NAME"  # {env.PATH}: the inherited value of a variable ("" when unset)

GLOB = "glob"  # {glob:PATTERN}: the one path PATTERN matches when the value is used (env values, check argv)

def _placeholder_check(globs: bool, also: Callable[[str], bool] = lambda _name: False) -> rs.Check:
    """A check that every {placeholder} of a field is one the tool can fill in; ``globs``: the field may hold
    {glob:PATTERN}; ``also``: other names the field may use (an artifact's {match...})."""
    def check(value: Any, ctx: Context, path: Path_) -> None:
        known = placeholder_catalog(ctx.facts.get("sources", ()), ctx.facts.get("artifacts", ()),
                                    ctx.facts.get("toolchains", ()))
        for where, text in _strings(value, path):
            _check_text(text, known, globs, also, ctx, where)

    return check

def _check_text(text: str, known: list[str], globs: bool, also: Callable[[str], bool], ctx: Context, where: Path_,
                nested: bool = False) -> None:
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        ctx.report(where, f"{text!r}: {exc}", "write a literal brace as '{{' or '}}'")
        return
    for _literal, name, fmt, conversion in parts:
        if name is None:
            continue
        if name == GLOB and not conversion and not nested:
            if not globs:
                ctx.report(where, f"{{glob:{fmt}}} works only in env values and check argv",
                           "spell the path out with placeholders here")
            elif not (fmt or "").strip():
                ctx.report(where, "{glob:} has no pattern", "e.g. {glob:{sources.NAME.path}/build/lib.*}")
            else:
                _check_text(fmt or "", known, globs, also, ctx, where, nested=True)
            continue
        inherited = name.startswith("env.") and ENV_NAME_RE.fullmatch(name[4:])
        if not inherited and name not in known and not also(name):
            extra = ", {glob:PATTERN}" if globs and not nested else ""
            ctx.report(where, f"unknown placeholder {{{name}}}{suggest(name, known)}",
                       "placeholders are: " + ", ".join("{" + k + "}" for k in known + [ENV_PLACEHOLDER]) + extra)
        elif fmt or conversion:
            ctx.report(where, f"placeholder {{{name}}} has a format; only plain {{name}} works",
                       f"write {{{name}}}, without !conversion or :format")

check_placeholders = _placeholder_check(False)

check_placeholders_globs = _placeholder_check(True)  # fields whose values may hold {glob:PATTERN}

# an artifact's url and path: also {match} / {match.NAME} (values read from a source's file, which the artifact's
# own check matches against its rules)
check_artifact_placeholders = _placeholder_check(False, lambda name: name_of(name) is not None)

def check_no_artifact_placeholders(value: str, ctx: Context, path: Path_) -> None:
    """An artifact's own URL/path cannot depend on artifacts (that could be circular)."""
    if "{artifacts." in value:
        ctx.report(path, "an artifact's url and path cannot use {artifacts.*} placeholders",
                   "spell the location out, or use {triton_home}, {cache_dir} or {workdir}")

def _strings(value: Any, path: Path_) -> Iterable[tuple[Path_, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _strings(item, path + (i,))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, path + (key,))

def placeholder_catalog(sources: Iterable[str], artifacts: Iterable[str], toolchains: Iterable[str] = ()) -> list[str]:
    names = list(PLACEHOLDERS)
    names += [f"sources.{s}.{k}" for s in sorted(sources) for k in SOURCE_PLACEHOLDERS]
    names += [f"artifacts.{a}.{k}" for a in sorted(artifacts) for k in ARTIFACT_PLACEHOLDERS]
    names += [f"toolchains.{t}.{k}" for t in sorted(toolchains) for k in TOOLCHAIN_PLACEHOLDERS]
    return names

INTERPOLATED = (check_placeholders,)

GLOBBED = (check_placeholders_globs,)  # env values and check argv: {glob:PATTERN} too
