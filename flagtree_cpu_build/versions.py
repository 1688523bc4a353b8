"""Which versions a requirement and a constraint allow together, decided without a package index (pure logic
over PEP 440/508 text): the recipe loader names a contradiction in a recipe, and ``pythonenv`` before pip runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PipRequirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version


def cannot_meet_both(requirement: str, constraint: str) -> bool:
    """True when no version can satisfy both specifiers (same distribution), as far as can be told without an
    index: an exact pin (``==X``) on either side that the other excludes, or two ranges that do not overlap
    (``>=80`` and ``<80``). Anything subtler (``!=``, wildcards, markers) is left to pip."""
    a, b = parsed(requirement), parsed(constraint)
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


def allows(constraint: str, version: str, runtime: str | None = None) -> bool:
    """Whether an installed ``version`` is inside ``constraint`` (one with a marker is left to pip); ``runtime``
    as for ``meets``."""
    pip = parsed(constraint)
    return pip is None or pip.marker is not None or meets(pip.specifier, version, runtime)


def label_pin(specifier: SpecifierSet) -> Version | None:
    """The version of an exact pin with a local label (``==2.10.0+cpu``): such a pin names a build variant."""
    for s in specifier:
        version = _version(s.version) if s.operator == "==" else None  # "==2.10.*" is no Version: None
        if version is not None and version.local is not None:
            return version
    return None


def reads_runtime_label(specifier: SpecifierSet, installed: str) -> bool:
    """Whether the package's own ``__version__`` must say which build ``installed`` is: the pin has a local label,
    and the metadata version has none but the same public version. PyPI's aarch64 torch wheels are CPU builds
    whose metadata says 2.10.0 while torch.__version__ says 2.10.0+cpu; importing to find out is costly (a
    second or more for torch), so nothing else is imported."""
    pin, version = label_pin(specifier), _version(installed)
    return pin is not None and version is not None and version.local is None \
        and Version(version.public) == Version(pin.public)


def meets(specifier: SpecifierSet, installed: str, runtime: str | None = None) -> bool:
    """Whether an installed distribution of metadata version ``installed`` meets ``specifier``: PEP 440, except
    that when ``reads_runtime_label`` holds, the package's ``__version__`` (``runtime``, None when it could not
    be read) decides: it meets ``torch==2.10.0+cpu`` only when it carries that label (``2.10.0+cpu``). Without
    a label on the pin, PEP 440 stands (``==2.10.0`` is met by ``2.10.0+cpu``)."""
    if not reads_runtime_label(specifier, installed):
        return fits(specifier, installed)
    version = _version(runtime) if runtime is not None else None
    return version is not None and version.local is not None and fits(specifier, runtime or "")


def same_name(requirement: str, name: str) -> bool:
    pip = parsed(requirement)
    return pip is not None and canonicalize_name(pip.name) == canonicalize_name(name)


def parsed(requirement: str) -> PipRequirement | None:
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
