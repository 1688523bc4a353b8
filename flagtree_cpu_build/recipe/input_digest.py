"""The digest of what in a recipe its build is made from (``Recipe.inputs_digest``), for the pins key.

``Recipe.digest`` hashes the whole normalized recipe, defaults included: a flagtree-cpu that adds a recipe key
changes it, and so does a setting that is not a build input (where to look for a published build, a compile cache
or farm, the installer, the checks). A published build found by its pins (``stages/build/pins.py``) must survive
both, so this digest leaves out ``NOT_BUILD_INPUTS`` and every field left at its default. Like ``digest`` it is
taken when the recipe is loaded: after the variant and ``--set``, before any placeholder is filled in with this
machine's paths.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..digest import hash_text
from .schema import public_fields, yaml_key

# What a recipe says that is not what its build is made from: where to look for a published build, a compile cache
# or farm, which installer, the checks and notes, the other variants (the chosen one is applied). Changing one of
# these must not make a published build stop fitting (the farm and the cache are never build inputs).
NOT_BUILD_INPUTS = frozenset({
    ("description",), ("variants",), ("checks",), ("diagnosis",), ("runtime",), ("schema_version",),
    ("build", "wheelhouse"), ("build", "compile_cache"), ("build", "compile_farm"), ("python", "installer"),
})


def inputs_digest(recipe: Any) -> str:
    """The digest of what in ``recipe`` its build is made from: without ``NOT_BUILD_INPUTS`` and without any field
    left at its default, so a flagtree-cpu that adds a recipe key (at its default) keeps every published key."""
    return hash_text(json.dumps(_set_fields(recipe, ()), sort_keys=True))


def _set_fields(value: Any, path: tuple[str, ...]) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {}
        for f in public_fields(type(value)):
            key = yaml_key(f)
            if (*path, key) in NOT_BUILD_INPUTS or _at_default(f, getattr(value, f.name)):
                continue
            data[key] = _set_fields(getattr(value, f.name), (*path, key))
        return data
    if isinstance(value, (tuple, list)):
        return [_set_fields(v, path) for v in value]
    if isinstance(value, dict):
        return {str(k): _set_fields(v, path) for k, v in value.items()}
    return value


def _at_default(f: dataclasses.Field, value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return bool(value == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(value == f.default_factory())
    return False
