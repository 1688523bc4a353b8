"""JSON Schema (draft 2020-12) from the recipe classes, describing exactly what ``schema.convert`` accepts.

``flagtree-cpu recipe schema`` prints it for editors (``# yaml-language-server: $schema=...``);
generated from the same field specs the loader uses, it cannot drift from the format.

It describes schema version 3, and so version 2 (version 3 only added keys). Version 1 files are
still read (the loader upgrades them in memory), but their layout is not described here:
`flagtree-cpu recipe upgrade FILE` rewrites one.
A few rules need the whole recipe or the bundled presets (a check's single kind, a preset's
parameters, `when: {variant: ...}` naming a variant); those only the loader enforces.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import MISSING
from typing import Any, Literal, Union, get_args, get_origin

from .model import SCHEMA_VERSION, SUPPORTED_VERSIONS, Recipe
from .schema import field_spec, public_fields, to_data, type_hints, yaml_key


def recipe_json_schema() -> dict[str, Any]:
    schema = json_schema(Recipe, title=f"flagtree-cpu recipe (schema version {SCHEMA_VERSION})",
                         schema_id=f"https://flagtree-cpu.invalid/schema/recipe-v{SCHEMA_VERSION}.json")
    schema["description"] += (f" This schema describes version {SCHEMA_VERSION} (and so version 2, which only "
                              "lacks keys); version 1 files are still read "
                              "(upgraded in memory) but not described here: `flagtree-cpu recipe upgrade FILE` "
                              "rewrites one.")
    # a stacked recipe may leave `platform` out: it builds where the recipe it extends builds
    required = [key for key in schema.pop("required") if key != "platform"]
    version_2 = {key: schema.pop(key) for key in ("type", "additionalProperties", "properties")}
    version_2["required"] = required
    version_2["anyOf"] = [{"required": ["platform"]}, {"required": ["extends"]}]
    # The loader reads both versions, so an editor must not flag a version 1 file: its layout is left
    # undescribed (any mapping), and everything else is judged as version 2.
    older = [1]  # version 2 is version 3 without its new keys: judged as version 3
    schema["type"] = "object"
    schema["required"] = ["schema_version"]
    schema["properties"] = {"schema_version": {**version_2["properties"]["schema_version"],
                                               "enum": list(SUPPORTED_VERSIONS)}}
    schema["if"] = {"properties": {"schema_version": {"enum": older}}}
    schema["else"] = version_2
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
        if len(arms) > 1:  # one value or a list of them; the loader takes the arm the data's shape asks for
            nullable = [{"type": "null"}] if len(arms) < len(get_args(tp)) else []
            return {"anyOf": [*(_type_schema(a, defs) for a in arms), *nullable]}
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
    if tp is object:  # free-form data (a variant's overlay, a preset's parameters): its owner checks it
        return {}
    return {str: {"type": "string"}, bool: {"type": "boolean"}, int: {"type": "integer"},
            float: {"type": "number"}}[tp]


def _object_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = type_hints(cls)
    properties: dict[str, Any] = {}
    required = []
    for f in public_fields(cls):
        fs = field_spec(f)
        prop = _type_schema(hints[f.name], defs)
        # the field's own keywords (the loader enforces them) and what its checks can say in JSON Schema
        for extra in (fs.json, *(getattr(check, "json", None) for check in fs.checks)):
            if extra:
                prop = _merge_extra(prop, extra)
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


def _merge_extra(prop: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """A field's extra keywords (pattern, enum, bounds) apply to its value, not to the null of an optional
    field: `arch: null` is as valid as leaving the key out."""
    arms = prop.get("anyOf")
    if isinstance(arms, list) and len(arms) == 2 and arms[1] == {"type": "null"}:
        return {**prop, "anyOf": [_merge(arms[0], extra), arms[1]]}
    return _merge(prop, extra)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
