"""`when:` — the hosts, targets and variants something applies to, and the facts it is judged against.

An OS version is matched the way /etc/os-release writes it (VERSION_ID: "22.04", "12", "8.10"), either exactly or
by a range (">=22.04"); a host whose os-release gives no VERSION_ID matches no `os_version` condition.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import check_arches, check_specifier, check_variant_names
from .schema import Context, Path_, spec, suggest


@dataclass(frozen=True)
class SelectorFacts:
    """What a `when:` is judged against: this host, the recipe's target and the chosen variant."""

    arch: str
    target_arch: str
    os_id: str = ""
    glibc: str | None = None  # "2.35"; None when unknown (a snapshot, musl)
    variant: str | None = None
    os_version: str = ""  # /etc/os-release VERSION_ID ("22.04"); "" when it gives none
    compiler: tuple[str, str] | None = None  # ("gcc", "9.3.1"): CXX's, asked only for a recipe that uses it


def check_os_versions(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
    for i, entry in enumerate(value):
        if entry.strip()[:1] in "<>=!~":
            check_specifier(entry, ctx, path + (i,))
        elif _version(entry) is None:  # a codename (jammy) or a typo would silently never match
            ctx.report(path + (i,), f"{entry!r} is neither an OS version nor a version range",
                       "write /etc/os-release's VERSION_ID (e.g. '22.04') or a range (e.g. '>=22.04')")


def os_version_matches(wanted: tuple[str, ...], version: str) -> bool:
    """True when ``version`` (VERSION_ID) is one of ``wanted`` or inside one of its ranges."""
    from packaging.specifiers import SpecifierSet

    have = _version(version)
    for entry in wanted:
        entry = entry.strip()
        if entry[:1] in "<>=!~":
            if have is not None and SpecifierSet(entry).contains(have, prereleases=True):
                return True
        elif entry == version or (have is not None and have == _version(entry)):
            return True
    return False


def _version(text: str):  # packaging's Version, or None for a VERSION_ID it cannot read ("rolling", "")
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text.strip())
    except InvalidVersion:
        return None


@dataclass(frozen=True, kw_only=True)
class Selector:
    """When something applies; every listed condition must hold."""

    arch: tuple[str, ...] = spec("host architectures (uname -m names)", default=(), checks=check_arches)
    target_arch: tuple[str, ...] = spec("target architectures", default=(), checks=check_arches)
    os_id: tuple[str, ...] = spec("/etc/os-release ID values, e.g. almalinux", default=())
    os_version: tuple[str, ...] = spec(
        "/etc/os-release VERSION_ID values or ranges, any of which holds, e.g. ['22.04', '24.04'] or ['>=22.04'] "
        "(a host whose os-release has no VERSION_ID matches none)", default=(), checks=check_os_versions)
    glibc: str | None = spec("a version range the host's glibc must satisfy, e.g. '<=2.28'", default=None,
                             checks=check_specifier)
    variant: tuple[str, ...] = spec("variants of the recipe", default=(), checks=check_variant_names)
    match: dict[str, str] = spec(
        "only in an artifact's variants: version ranges the values its `matches` rules read must satisfy (NAME: "
        "'>=13', compared as versions; NAME is a rule's `as` or a regex group), e.g. {cudacrt: '>=13'}",
        default_factory=dict)
    compiler: dict[str, str] = spec(
        "version ranges of the C++ compiler ($CXX, else c++; what doctor's toolchain.compiler checks) by family, gcc "
        "or clang, e.g. {gcc: '<9.4'}: holds when the compiler is of a listed family and in its range",
        default_factory=dict)

    def check(self, ctx: Context, path: Path_) -> None:
        if not (self.arch or self.target_arch or self.os_id or self.os_version or self.glibc or self.variant
                or self.match or self.compiler):
            ctx.report(path, "`when` needs at least one condition (arch, target_arch, os_id, os_version, glibc, "
                       "variant, compiler or match)")
        for family, wanted in self.compiler.items():
            if family not in COMPILER_FAMILIES:
                ctx.report(path + ("compiler", family), f"{family!r} is not a compiler family"
                           f"{suggest(family, COMPILER_FAMILIES)}", "use gcc or clang")
            check_specifier(wanted, ctx, path + ("compiler", family))
        if self.match and not (path[:1] == ("artifacts",) and "variants" in path):
            ctx.report(path + ("match",), "`match` is allowed only in an artifact's variants (it compares the "
                       "values that artifact reads from a source's file)",
                       "move the condition into artifacts.NAME.variants[].when, or use a host condition here")
        for name, wanted in self.match.items():
            check_specifier(wanted, ctx, path + ("match", name))
        host_arches = ctx.facts.get("host_arches") or ()
        impossible = [a for a in self.arch if host_arches and a not in host_arches]
        if impossible:
            ctx.report(path + ("arch",), f"{', '.join(impossible)} is not a host this recipe builds on "
                       f"(platform.host.arch: {', '.join(host_arches)}), so this can never apply",
                       "add the architecture to platform.host.arch, or use target_arch for where the products run")

    def matches(self, facts: SelectorFacts) -> bool:
        if self.arch and facts.arch not in self.arch:
            return False
        if self.target_arch and facts.target_arch not in self.target_arch:
            return False
        if self.os_id and facts.os_id not in self.os_id:
            return False
        if self.os_version and not os_version_matches(self.os_version, facts.os_version):
            return False
        if self.variant and facts.variant not in self.variant:
            return False
        if self.compiler and not _compiler_holds(self.compiler, facts.compiler):
            return False
        if self.glibc is not None:
            from packaging.specifiers import SpecifierSet

            return facts.glibc is not None and SpecifierSet(self.glibc).contains(facts.glibc, prereleases=True)
        return True


HostSelector = Selector  # the v1 name
COMPILER_FAMILIES = ("gcc", "clang")


def _compiler_holds(wanted: dict[str, str], found: tuple[str, str] | None) -> bool:
    """The compiler is of a family ``wanted`` lists and its version in that range (an unknown one: never)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if found is None or found[0] not in wanted:
        return False
    try:
        return SpecifierSet(wanted[found[0]]).contains(Version(found[1]), prereleases=True)
    except InvalidVersion:
        return False


def uses_compiler(value: object) -> bool:
    """Whether any `when:` in a recipe (a dataclass tree) has a compiler condition: only then is the compiler asked."""
    import dataclasses

    if isinstance(value, Selector):
        return bool(value.compiler)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(uses_compiler(getattr(value, f.name)) for f in dataclasses.fields(value)
                   if f.name != "base")
    if isinstance(value, (tuple, list)):
        return any(uses_compiler(v) for v in value)
    if isinstance(value, dict):
        return any(uses_compiler(v) for v in value.values())
    return False
