"""pip constraints of a recipe: what they hold, the file pip reads, and which versions a requirement and a
constraint allow together — decided here without an index, so a contradiction in the recipe is named before
pip runs (``pythonenv`` raises it).

The file is ``<recipe state>/constraints.txt``: ``python.constraints``, then the ranges of
``python.preinstalled`` (so no pip run of the recipe replaces a vendor's package). Every pip run for the
recipe's prerequisites reads it with ``-c``; a stacked build gets it as PIP_CONSTRAINT.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PipRequirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .atomic import write_atomic
from .recipe import Constraint, Recipe
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
    try:
        current = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        current = None
    if current != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    return path


def cannot_meet_both(requirement: str, constraint: str) -> bool:
    """True when no version can satisfy both specifiers (same distribution), as far as can be told without an
    index: an exact pin (``==X``) on either side that the other excludes, or two ranges that do not overlap
    (``>=80`` and ``<80``). Anything subtler (``!=``, wildcards, markers) is left to pip."""
    a, b = _parsed(requirement), _parsed(constraint)
    if a is None or b is None or a.marker is not None or b.marker is not None:
        return False
    specs = [*a.specifier, *b.specifier]
    if any(s.operator == "===" for s in specs):
        return False
    pins = [v for s in specs if s.operator == "==" and (v := _version(s.version)) is not None]
    if pins:  # every solution is one of the pins (or a local build of one, which the ranges judge alike)
        return not any(a.specifier.contains(v, prereleases=True) and b.specifier.contains(v, prereleases=True)
                       for v in pins)
    return _disjoint(specs)


def _disjoint(specs: Sequence[Specifier]) -> bool:
    """Whether the bounds of ``specs`` leave no version (only <, <=, >, >=, ~= are read; ignoring the rest only
    widens the range, so "disjoint" is never said wrongly)."""
    low: tuple[Version, bool] | None = None  # (version, inclusive)
    high: tuple[Version, bool] | None = None
    for s in specs:
        version = _version(s.version)
        if version is None:
            continue
        if s.operator in (">=", ">", "~="):
            bound = (version, s.operator != ">")
            if low is None or bound[0] > low[0] or (bound[0] == low[0] and not bound[1]):
                low = bound
        elif s.operator in ("<=", "<"):
            bound = (version, s.operator == "<=")
            if high is None or bound[0] < high[0] or (bound[0] == high[0] and not bound[1]):
                high = bound
    if low is None or high is None:
        return False
    return low[0] > high[0] or (low[0] == high[0] and not (low[1] and high[1]))


def allows(constraint: str, version: str) -> bool:
    """Whether an installed ``version`` is inside ``constraint`` (one with a marker is left to pip)."""
    parsed = _parsed(constraint)
    return parsed is None or parsed.marker is not None or fits(parsed.specifier, version)


def same_name(requirement: str, name: str) -> bool:
    parsed = _parsed(requirement)
    return parsed is not None and canonicalize_name(parsed.name) == canonicalize_name(name)


def _constraint_line(requirement: str) -> str:
    """A requirement as pip takes a constraint: no extras (pip refuses them in a constraints file)."""
    parsed = _parsed(requirement)
    if parsed is None:
        return requirement
    text = f"{parsed.name} @ {parsed.url}" if parsed.url else f"{parsed.name}{parsed.specifier}"
    return text + (f" ; {parsed.marker}" if parsed.marker is not None else "")


def _parsed(requirement: str) -> PipRequirement | None:
    try:
        return PipRequirement(requirement)
    except InvalidRequirement:
        return None


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def fits(specifier: SpecifierSet, version: str) -> bool:
    try:
        return specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False
