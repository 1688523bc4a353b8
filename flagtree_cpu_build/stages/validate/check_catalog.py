"""The recipe's checks as validate, its plan and ``validate --list`` see them: which ones to run, what
kind each is and what it proves. The presets a check can use are declared in ``presets``."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from difflib import get_close_matches
from typing import Any

from ...errors import UsageError
from ...presets import PRESETS, PRESETS_DIR, REQUIRED, Preset
from ...recipe import Check, Recipe


def kind_of(check: Check) -> str:
    """argv, uses, import or wheel (the model makes sure a check is exactly one)."""
    if check.uses is not None:
        return "uses"
    if check.import_ is not None:
        return "import"
    if check.wheel is not None:
        return "wheel"
    return "argv"


def preset_of(check: Check) -> Preset | None:
    return PRESETS.get(check.uses) if check.uses is not None else None


def proves(check: Check) -> str:
    """One line on what the check shows, for --list."""
    preset = preset_of(check)
    if preset is not None:
        return preset.proves
    if check.import_ is not None:
        version = f" at {check.import_.version}" if check.import_.version else ""
        return f"the target Python imports {check.import_.module}{version}"
    if check.wheel is not None:
        wheel = check.wheel
        parts = ([f"every ELF object is {wheel.arch}"] if wheel.arch else []) + \
                ([f"none is {', '.join(wheel.forbid)}"] if wheel.forbid else []) + \
                ([f"tagged {', '.join(wheel.tags)}"] if wheel.tags else [])
        return f"{wheel.path}: {'; '.join(parts)}"
    expect = check.expect
    wanted = [f"exit {expect.exit}"] + ([f"output ~ /{expect.output}/"] if expect.output else []) + \
             ([f"no /{expect.absent}/"] if expect.absent else []) + \
             ([f"pytest {_counts(expect.pytest)}"] if expect.pytest else [])
    return f"{shlex.join(check.argv)} ({', '.join(wanted)})"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def chosen_checks(recipe: Recipe, names: Sequence[str]) -> list[Check]:
    """The recipe's checks named on the command line (by name, or by the preset they use), in the recipe's
    order; all of them when none is named."""
    if not recipe.checks:
        raise UsageError(f"recipe {recipe.name} has no checks",
                         fix="add a checks: section to the recipe (see flagtree-cpu recipe schema)")
    if not names:
        return list(recipe.checks)
    labels = [c.label for c in recipe.checks]
    wanted: set[str] = set()
    for name in dict.fromkeys(names):
        found = [c.label for c in recipe.checks if name in (c.label, c.uses)]
        if not found:
            close = get_close_matches(name, labels, n=1)
            raise UsageError(f"recipe {recipe.name} has no check {name!r}"
                             + (f"; did you mean {close[0]!r}?" if close else ""),
                             fix=f"run one of: {', '.join(labels)} (flagtree-cpu validate --list shows them)")
        wanted.update(found)
    return [c for c in recipe.checks if c.label in wanted]


def listing(recipe: Recipe) -> dict[str, Any]:
    """The recipe's checks and the preset library, for ``validate --list``."""
    checks = [{"name": c.label, "kind": kind_of(c), "preset": c.uses, "required": c.required, "where": c.where,
               "proves": proves(c), "script": str(p.path) if (p := preset_of(c)) else None} for c in recipe.checks]
    presets = [{"preset": p.name, "proves": p.proves, "script": str(p.path), "needs_model": p.needs_model,
                "parameters": {k: {"doc": v.doc, **({} if v.default is REQUIRED else {"default": v.default})}
                               for k, v in p.parameters.items()}} for p in PRESETS.values()]
    return {"recipe": recipe.name, "folder": str(PRESETS_DIR), "checks": checks, "presets": presets}
