"""pip constraints of a recipe: what they hold, the file pip reads, and which versions a requirement and a
constraint allow together is ``versions``'s.

The file is ``<recipe state>/constraints.txt``: ``python.constraints``, then the ranges of
``python.preinstalled`` (so no pip run of the recipe replaces a vendor's package). Every pip run for the
recipe's prerequisites reads it with ``-c``; a stacked build gets it as PIP_CONSTRAINT.
"""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement as PipRequirement

from .atomic import write_atomic
from .recipe import Constraint, Recipe
from .regular_file import read_regular
from .versions import parsed
from .workspace import Workspace

PREINSTALLED_WHY = "python.preinstalled: provided by the vendor's installer, never replaced by pip"


def pip_limits(recipe: Recipe) -> tuple[Constraint, ...]:
    """What binds every pip run of the recipe: its constraints, then its preinstalled packages' ranges (so
    pip may not replace them while installing something that depends on them)."""
    vendor = tuple(Constraint(requirement=_constraint_line(r.requirement), why=PREINSTALLED_WHY)
                   for r in recipe.python.preinstalled if PipRequirement(r.requirement).specifier)
    return tuple(recipe.python.constraints) + vendor


def constraints_path(ws: Workspace) -> Path:
    """Where a recipe's constraints file lives: in its own state folder (a stacked recipe's is its own)."""
    return ws.recipe_state / "constraints.txt"


def constraints_file(recipe: Recipe, ws: Workspace) -> Path | None:
    """The recipe's constraints file (``-c`` for pip, or PIP_CONSTRAINT), written only when its content
    changed (a build stamp or a watching tool sees no new file for nothing); None without limits."""
    limits = pip_limits(recipe)
    if not limits:
        return None
    lines = [f"# pip constraints of recipe {recipe.name} (python.constraints, python.preinstalled); "
             "written by flagtree-cpu, do not edit"]
    for constraint in limits:
        lines += ([f"# {constraint.why}"] if constraint.why else []) + [_constraint_line(constraint.requirement)]
    text = "\n".join(lines) + "\n"
    path = constraints_path(ws)
    try:  # anything but the same regular file is rewritten; a FIFO put there is replaced, never waited on
        current = read_regular(path, len(text.encode()) + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        current = None
    if current != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    return path


def _constraint_line(requirement: str) -> str:
    """A requirement as pip takes a constraint: no extras (pip refuses them in a constraints file)."""
    pip = parsed(requirement)
    if pip is None:
        return requirement
    text = f"{pip.name} @ {pip.url}" if pip.url else f"{pip.name}{pip.specifier}"
    return text + (f" ; {pip.marker}" if pip.marker is not None else "")
