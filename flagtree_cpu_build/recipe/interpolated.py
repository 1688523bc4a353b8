"""The strings of a recipe's ``interpolate`` fields (placeholders: ``{workdir}``, ``{jobs}``, ...): rewriting them
all (``resolve`` expands the placeholders) and listing them (a test that no placeholder is left)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from .schema import Path_, field_spec, public_fields, yaml_key


def map_interpolated(value: Any, fn: Callable[[str, Path_], str], path: Path_ = ()) -> Any:
    """A copy of ``value`` with ``fn`` applied to every string of an ``interpolate`` field."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in public_fields(type(value)):
            current = getattr(value, f.name)
            child = path + (yaml_key(f),)
            if field_spec(f).interpolate:
                changes[f.name] = _map_strings(current, fn, child)
            else:
                changes[f.name] = map_interpolated(current, fn, child)
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(map_interpolated(v, fn, path + (i,)) for i, v in enumerate(value))
    if isinstance(value, dict):
        return {k: map_interpolated(v, fn, path + (k,)) for k, v in value.items()}
    return value


def _map_strings(value: Any, fn: Callable[[str, Path_], str], path: Path_) -> Any:
    if isinstance(value, str):
        return fn(value, path)
    if isinstance(value, tuple):
        return tuple(_map_strings(v, fn, path + (i,)) for i, v in enumerate(value))
    if isinstance(value, dict):
        return {k: _map_strings(v, fn, path + (k,)) for k, v in value.items()}
    return value


def iter_interpolated(value: Any, path: Path_ = ()) -> Iterable[tuple[Path_, str]]:
    """Every (path, string) of ``interpolate`` fields in a converted tree."""
    found: list[tuple[Path_, str]] = []

    def collect(text: str, where: Path_) -> str:
        found.append((where, text))
        return text

    map_interpolated(value, collect, path)
    return found
