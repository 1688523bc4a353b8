"""Answers several doctor checks share: the target Python's facts (one query, cached), disk paths."""

from __future__ import annotations

from pathlib import Path

from .kit import DoctorContext


def python_facts(c: DoctorContext) -> dict | None:
    """One run of the target interpreter for every Python check (cached)."""
    if "python" not in c.cache:
        if not c.python.exists():
            c.cache["python"] = None
        else:
            from packaging.requirements import Requirement

            from ..pythonenv import inspect

            names = [Requirement(r.requirement).name for r in (*c.recipe.python.build, *c.recipe.python.runtime)]
            c.cache["python"] = inspect(c.python, [*names, "triton", "flag_gems"])
    return c.cache["python"]


def existing_parent(path: Path) -> Path:
    """``path`` or its nearest existing ancestor: where free space can be asked about before it exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
