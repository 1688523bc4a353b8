"""JSON Schema (draft 2020-12) from the recipe classes, describing exactly what ``schema.convert`` accepts.

``flagtree-cpu recipe schema`` prints it for editors (``# yaml-language-server: $schema=...``);
generated from the same field specs the loader uses, it cannot drift from the format.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import MISSING
from typing import Any, Literal, Union, get_args, get_origin

from .model import SCHEMA_VERSION, Recipe
from .schema import field_spec, public_fields, to_data, type_hints, yaml_key


def recipe_json_schema() -> dict[str, Any]:
    schema = json_schema(Recipe, title="flagtree-cpu recipe (schema version 1)",
                         schema_id="https://flagtree-cpu.invalid/schema/recipe-v1.json")
    schema["properties"]["schema_version"]["const"] = SCHEMA_VERSION
    return schema


def json_schema(root: type, *, title: str, schema_id: str) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) describing exactly what ``convert`` accepts."""
    defs: dict[str, Any] = {}
    body = _object_schema(root, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        **body,
        "$defs": dict(sorted(defs.items())),
    }


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        arms = [a for a in get_args(tp) if a is not type(None)]
        inner = _type_schema(arms[0], defs)
        return {"anyOf": [inner, {"type": "null"}]}
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    if dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder first: models may refer to themselves
            defs[name] = _object_schema(tp, defs)
        ref = {"$ref": f"#/$defs/{name}"}
        if getattr(tp, "SHORTHAND", None):
            return {"anyOf": [{"type": "string"}, ref]}
        return ref
    if origin is tuple:
        return {"type": "array", "items": _type_schema(get_args(tp)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type_schema(get_args(tp)[1], defs)}
    return {str: {"type": "string"}, bool: {"type": "boolean"}, int: {"type": "integer"},
            float: {"type": "number"}}[tp]


def _object_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = type_hints(cls)
    properties: dict[str, Any] = {}
    required = []
    for f in public_fields(cls):
        fs = field_spec(f)
        prop = _type_schema(hints[f.name], defs)
        if fs.json:
            prop = _merge(prop, fs.json)
        prop = {"description": fs.doc, **prop}
        if f.default is not MISSING and f.default is not None:
            prop["default"] = to_data(f.default)
        properties[yaml_key(f)] = prop
        if f.default is MISSING and f.default_factory is MISSING:
            required.append(yaml_key(f))
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if cls.__doc__:
        schema = {"description": " ".join(cls.__doc__.split()), **schema}
    if required:
        schema["required"] = required
    return schema


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
