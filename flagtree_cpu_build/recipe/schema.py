"""Plain data -> frozen dataclasses, every problem at once, and back: the engine under the recipe format.

The recipe models (``model``, ``inputs``) are ordinary frozen dataclasses whose fields carry a
``FieldSpec`` (documentation, YAML key, extra checks). This module is the one generic
engine that:

* converts loaded YAML into those dataclasses, collecting *all* problems (unknown keys
  with a did-you-mean, wrong types with a YAML-aware hint, failed checks) instead of
  stopping at the first;
* provides what ``json_schema`` needs to describe the same classes, so ``recipe schema``
  can never drift from what the loader accepts;
* turns instances back into plain data (``recipe show``, the recipe digest), and
  rewrites the strings of fields marked ``interpolate`` (placeholder expansion).

It knows nothing about FlagTree (the lock file uses it too); a pydantic-like library would do the same job but
cost ~150 ms of import time on every command and give us less control over messages.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass
from typing import Any, Literal, Union, get_args, get_origin

Path_ = tuple[str | int, ...]
_META = "flagtree_cpu"


@dataclass(frozen=True)
class Problem:
    path: Path_
    message: str
    fix: str | None = None


class Context:
    """State shared by one conversion: the problems found so far and recipe-wide facts.

    ``facts`` holds whatever the model's checks need to look across the document (for
    recipes: the names of all sources and artifacts), gathered *before* conversion so
    a check on one key can be judged even when another key is broken.
    """

    def __init__(
        self,
        facts: dict[str, Any] | None = None,
        *,
        raw_text: dict[Path_, str] | None = None,
        override_paths: Iterable[Path_] = (),
    ):
        self.problems: list[Problem] = []
        self.facts: dict[str, Any] = facts or {}
        # the scalar text as typed, for "YAML reads OFF as false"-style hints
        self.raw_text: dict[Path_, str] = raw_text or {}
        # values that came from --set: a command line has no types, so text wanted is text given
        self.override_paths = set(override_paths)

    def report(self, path: Path_, message: str, fix: str | None = None) -> None:
        self.problems.append(Problem(tuple(path), message, fix))


Check = Callable[[Any, Context, Path_], None]


@dataclass(frozen=True)
class FieldSpec:
    doc: str
    key: str | None = None  # YAML key when it is not the attribute name (e.g. "tle-rms-norm")
    checks: tuple[Check, ...] = ()
    interpolate: bool = False  # strings here may hold {placeholders}
    # JSON Schema keywords the value must also satisfy (bounds, patterns, enums): the loader enforces them
    # (``keyword_problems``) and ``json_schema`` emits them, so the two cannot disagree about them
    json: dict[str, Any] | None = None
    internal: bool = False  # filled in by the loader, not part of the file format


def spec(
    doc: str,
    *,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    key: str | None = None,
    checks: tuple[Check, ...] | Check = (),
    interpolate: bool = False,
    json: dict[str, Any] | None = None,
    internal: bool = False,
) -> Any:
    """Declare a recipe field: ``url: str = spec("where to clone from", checks=is_url)``."""
    if callable(checks):
        checks = (checks,)
    meta = {_META: FieldSpec(doc, key, tuple(checks), interpolate, json, internal)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def field_spec(f: dataclasses.Field) -> FieldSpec:
    return f.metadata.get(_META) or FieldSpec(doc="")


def yaml_key(f: dataclasses.Field) -> str:
    return field_spec(f).key or f.name


def public_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if not field_spec(f).internal]


_HINTS: dict[type, dict[str, Any]] = {}


def type_hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def suggest(word: object, candidates: Iterable[str]) -> str:
    """`` (did you mean 'commit'?)`` or an empty string."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def json_rule(fragment: dict[str, Any]) -> Callable[[Check], Check]:
    """Mark a check with the JSON Schema keywords that say the same thing, for ``json_schema`` to emit.

    The check stays the loader's (its message can be kinder than a keyword's: "Linux calls it 'aarch64'");
    the fragment is what an editor can be told. A check without one is a loader-only rule, which
    tests/unit/test_schema_agreement.py lists with its reason."""

    def mark(check: Check) -> Check:
        check.json = fragment  # type: ignore[attr-defined]
        return check

    return mark


# The JSON Schema keywords a field's ``json`` may use: each is enforced here, by the loader, as the schema
# states it. A keyword not listed raises TypeError at the first load, so none can be schema-only.
_BOUNDS = {"minimum": (lambda v, b: v >= b, "must be at least"), "maximum": (lambda v, b: v <= b, "must be at most"),
           "exclusiveMinimum": (lambda v, b: v > b, "must be more than")}


def keyword_problems(value: Any, keywords: dict[str, Any], ctx: Context, path: Path_) -> None:
    """Report where ``value`` breaks one of the JSON Schema ``keywords`` (a converted value, never null)."""
    for keyword, bound in keywords.items():
        if keyword in _BOUNDS:
            holds, words = _BOUNDS[keyword]
            if not holds(value, bound):
                ctx.report(path, f"{value:g} is out of range: it {words} {bound:g}")
        elif keyword == "pattern":
            import re

            if not re.search(bound, value):
                ctx.report(path, f"{value!r} does not match the pattern {bound}")
        elif keyword == "enum":
            if value not in bound:
                ctx.report(path, f"{_describe(value)} is not one of: {', '.join(map(str, bound))}"
                           f"{suggest(value, map(str, bound))}")
        elif keyword == "items":
            for i, item in enumerate(value):
                keyword_problems(item, bound, ctx, path + (i,))
        else:
            raise TypeError(f"JSON Schema keyword {keyword!r} at {path} has no loader rule: add one here")


# --- conversion ------------------------------------------------------------------------


class _Invalid:
    """Marks a value that failed conversion; its problems are already in the context."""

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "<invalid>"


INVALID: Any = _Invalid()


@dataclass(frozen=True)
class _Partial:
    """A list or mapping with some broken items: the good ones still get their checks run,
    so one wrong value does not hide another problem next to it."""

    good: Any


def convert(data: Any, tp: Any, ctx: Context, path: Path_ = ()) -> Any:
    """Convert ``data`` to type ``tp``; returns INVALID (with problems in ``ctx``) on failure."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        arms = [a for a in get_args(tp) if a is not type(None)]
        if data is None and len(arms) < len(get_args(tp)):
            return None
        # one value or a list of them (an artifact's `matches`): the arm the data's shape asks for
        arm = next((a for a in arms if _is_list_type(a) == isinstance(data, list)), arms[0])
        return convert(data, arm, ctx, path)
    if origin is Literal:
        allowed = get_args(tp)
        if data in allowed and type(data) is type(allowed[0]):
            return data
        choices = ", ".join(str(a) for a in allowed)
        ctx.report(path, f"{_describe(data)} is not one of: {choices}{suggest(data, map(str, allowed))}")
        return INVALID
    if dataclasses.is_dataclass(tp):
        return _convert_object(data, tp, ctx, path)
    if origin is tuple:
        return _convert_list(data, get_args(tp)[0], ctx, path)
    if origin is dict:
        return _convert_mapping(data, get_args(tp)[1], ctx, path)
    return _convert_scalar(data, tp, ctx, path)


def _is_list_type(tp: Any) -> bool:
    return get_origin(tp) is tuple


def _convert_object(data: Any, cls: type, ctx: Context, path: Path_) -> Any:
    shorthand = getattr(cls, "SHORTHAND", None)
    if shorthand and isinstance(data, str):
        data = {shorthand: data}
    if not isinstance(data, dict):
        ctx.report(path, f"expected a mapping (indented key: value lines), got {_describe(data)}")
        return INVALID
    fields_by_key = {yaml_key(f): f for f in public_fields(cls)}
    ok = True
    for key in data:
        if key not in fields_by_key:
            ctx.report(
                path + (key,),
                f"unknown key {key!r}{suggest(key, fields_by_key)}",
                f"valid keys here: {', '.join(fields_by_key)}",
            )
            ok = False
    values: dict[str, Any] = {}
    hints = type_hints(cls)
    for key, f in fields_by_key.items():
        if key not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                ctx.report(path, f"missing required key {key!r}", f"add `{key}:` — {field_spec(f).doc}")
                ok = False
            continue
        value = convert(data[key], hints[f.name], ctx, path + (key,))
        if value is INVALID:
            ok = False
            continue
        if isinstance(value, _Partial):
            value, ok = value.good, False
        before = len(ctx.problems)
        if value is not None:  # an explicit null on an optional key means "absent"
            keyword_problems(value, field_spec(f).json or {}, ctx, path + (key,))
            for check in field_spec(f).checks:
                check(value, ctx, path + (key,))
        ok = ok and len(ctx.problems) == before
        values[f.name] = value
    if not ok:
        return INVALID
    instance = cls(**values)
    before = len(ctx.problems)
    hook = getattr(instance, "check", None)
    if callable(hook):
        hook(ctx, path)
    return instance if len(ctx.problems) == before else INVALID


def _convert_list(data: Any, item_tp: Any, ctx: Context, path: Path_) -> Any:
    if not isinstance(data, list):
        fix = f"write it as a list: [{data}]" if isinstance(data, (str, int, float)) else None
        ctx.report(path, f"expected a list, got {_describe(data)}", fix)
        return INVALID
    items = [convert(item, item_tp, ctx, path + (i,)) for i, item in enumerate(data)]
    good = tuple(i for i in items if i is not INVALID and not isinstance(i, _Partial))
    return good if len(good) == len(items) else _Partial(good)


def _convert_mapping(data: Any, value_tp: Any, ctx: Context, path: Path_) -> Any:
    if not isinstance(data, dict):
        ctx.report(path, f"expected a mapping (indented key: value lines), got {_describe(data)}")
        return INVALID
    result: dict[str, Any] = {}
    ok = True
    for key, value in data.items():
        if not isinstance(key, str):
            ctx.report(path + (key,), f"the key {key!r} must be text", f"quote it: \"{key}\"")
            ok = False
            continue
        converted = convert(value, value_tp, ctx, path + (key,))
        if converted is INVALID or isinstance(converted, _Partial):
            ok = False
        else:
            result[key] = converted
    return result if ok else _Partial(result)


def _convert_scalar(data: Any, tp: Any, ctx: Context, path: Path_) -> Any:
    if tp is object:  # free-form data (a variant's overlay, a preset's parameters): checked by its owner
        return data
    if tp is str:
        if isinstance(data, str):
            return data
        if path in ctx.override_paths and isinstance(data, (int, float, bool)):
            return ctx.raw_text.get(path, str(data))
        if isinstance(data, (bool, int, float)):
            raw = ctx.raw_text.get(path)
            shown = raw if raw is not None else str(data)
            if isinstance(data, bool):
                why = f"a boolean: YAML reads {shown} as {_yaml_repr(data)}"
            else:
                why = f"a number: YAML reads {shown} as a number"
            ctx.report(path, f"expected text, got {why}", f'quote it: "{shown}"')
            return INVALID
    elif tp is bool:
        if isinstance(data, bool):
            return data
    elif tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
    else:  # pragma: no cover - a model uses a type this engine does not know
        raise TypeError(f"unsupported field type {tp!r} at {path}")
    ctx.report(path, f"expected {_TYPE_WORDS[tp]}, got {_describe(data)}")
    return INVALID


_TYPE_WORDS = {str: "text", bool: "true or false", int: "a whole number", float: "a number"}


def _yaml_repr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return f"a boolean ({_yaml_repr(value)})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"text {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__  # pragma: no cover


# --- back to plain data (string rewriting: interpolated.py) ---------------------------


def to_data(value: Any) -> Any:
    """A dataclass tree as plain dicts/lists using YAML key names (for show and digests)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {yaml_key(f): to_data(getattr(value, f.name)) for f in public_fields(type(value))}
    if isinstance(value, (tuple, list)):
        return [to_data(v) for v in value]
    if isinstance(value, dict):
        return {k: to_data(v) for k, v in value.items()}
    return value
