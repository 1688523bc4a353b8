"""The recipe models: every pinned input of a build, as validated, frozen data.

A recipe is YAML (schema version 3; version 1 and 2 files are upgraded in memory by ``upgrade``).
The classes here and in ``inputs`` (sources, artifacts, links), ``platform`` (host and target),
``environment`` (env operations) and ``validation`` (checks, diagnosis) are the format: their fields,
documentation and rules (see ``checks``) drive both the loader and the JSON Schema. Resolving a
recipe for one host and workspace (artifact variants, placeholders) is ``resolve``; finding and
loading recipe files is ``files``. FlagTree knowledge belongs in the bundled recipe file, not here: a new
FlagTree branch should need a new recipe, not new code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .artifact_paths import check_artifact_paths

# the field types below name these: typing.get_type_hints resolves them in this module
from .build_spec import BuildInputs, BuildSpec  # noqa: F401 (BuildInputs: a field type of BuildSpec's)
from .builds import check_builds
from .checks import check_env_names, check_name, check_names
from .environment import EnvHazard, EnvOps
from .inputs import Artifact, Links, Source, check_source_tree, checkout_path
from .placeholder_checks import INTERPOLATED
from .platform import (
    Platform,
)
from .python_model import PythonSpec
from .schema import Context, Path_, json_rule, spec
from .selector import Selector, SelectorFacts
from .toolchain import Toolchain
from .validation import Check, Diagnosis

if TYPE_CHECKING:
    from ..host import HostFacts

SCHEMA_VERSION = 3
SUPPORTED_VERSIONS = (1, 2, 3)



@json_rule({"items": {"pattern": "^[A-Za-z0-9_+][A-Za-z0-9._+:-]*$"}})
def check_package_names(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
    """A package name goes into a root command line: one that starts with '-' would be an option of it."""
    for i, name in enumerate(value):
        if not re.fullmatch(r"[A-Za-z0-9_+][A-Za-z0-9._+:-]*", name):
            ctx.report(path + (i,), f"{name!r} is not a package name", "write the name as the package manager "
                       "lists it, e.g. gcc-c++ or libstdc++-static")


@dataclass(frozen=True, kw_only=True)
class SystemPackages:
    """System packages the build needs, per package manager."""

    apt: tuple[str, ...] = spec("Debian/Ubuntu package names", default=())
    dnf: tuple[str, ...] = spec(
        "RHEL-family package names (a host whose /etc/os-release ID or ID_LIKE is rhel, fedora, centos, almalinux "
        "or rocky): checked with rpm, installed with dnf (yum where there is no dnf)", default=(),
        checks=check_package_names)


@dataclass(frozen=True, kw_only=True)
class Variant:
    """A named overlay deep-merged onto the recipe (a mapping merges key by key, a list or text replaces,
    null removes the key)."""

    description: str = spec("one line on what this variant is for", default="")
    overlay: dict[str, object] = spec("the keys it changes, shaped like the recipe", default_factory=dict)


# --- python: python_model ---------------------------------------------------------------------------

# --- build and steps ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StepVerify:
    """A mark a step leaves in an installed distribution's files (a patch of triton-ascend): when it is gone (the
    distribution was reinstalled, even at the same version) the build runs again, and so does the step."""

    distribution: str = spec("the installed distribution, e.g. triton-ascend")
    file: str = spec("a file of it, relative to where it is installed (site-packages), e.g. "
                     "triton/backends/ascend/driver.py", checks=lambda v, c, p: check_file(v, c, p))
    contains: str = spec("text the file holds once the step has run")


@dataclass(frozen=True, kw_only=True)
class Step:
    """A named command list run before the build or after it installs, logged, stamped and diagnosed like it."""

    name: str = spec("step name (lower-case, '-' separated)", checks=check_name)
    phase: Literal["pre-build", "post-install"] = spec("when it runs, relative to the build command")
    cwd: str = spec("working folder", interpolate=True, checks=INTERPOLATED)
    run: tuple[tuple[str, ...], ...] = spec("the commands, each a list of arguments (never a shell string)",
                                            interpolate=True, checks=INTERPOLATED)
    env: EnvOps = spec("changes on top of the build environment", default_factory=EnvOps)
    inputs: tuple[str, ...] = spec("globs (relative to cwd, or absolute) whose contents are part of the build stamp",
                                   default=(), interpolate=True, checks=INTERPOLATED)
    creates: tuple[str, ...] = spec("globs (relative to cwd, or absolute) it produces; missing ones make the build "
                                    "run again", default=(), interpolate=True, checks=INTERPOLATED)
    verify: tuple[StepVerify, ...] = spec("marks it leaves in installed distributions; checked after it runs and "
                                          "whenever the build's freshness is judged", default=())
    when: Selector | None = spec("when it runs (default: always)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.run:
            ctx.report(path + ("run",), "a step needs at least one command", "e.g. run: [[make, install]]")
        for i, argv in enumerate(self.run):
            if not argv:
                ctx.report(path + ("run", i), "an empty command (a step's command needs an argv)",
                           "write the program and its arguments as a list")


# --- run time, resources, checks, diagnosis ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RuntimeSpec:
    """What programs using the result need."""

    env: EnvOps = spec("the run-time environment (`flagtree-cpu env`, checks)", default_factory=EnvOps)
    notes: dict[str, str] = spec("why a run-time variable matters, shown by doctor when it is not exported",
                                 default_factory=dict, checks=check_env_names)
    only_with: dict[str, str] = spec("variables that matter only once a distribution is installed "
                                     "(variable -> distribution)", default_factory=dict, checks=check_env_names)
    hazards: tuple[EnvHazard, ...] = spec("inherited values that make the checks meaningless (validate warns)",
                                          default=())


@dataclass(frozen=True, kw_only=True)
class DiskNeed:
    """Free disk a folder needs."""

    path: str = spec("the folder (placeholders allowed)", interpolate=True, checks=INTERPOLATED)
    gb: float = spec("free GiB it needs", json={"minimum": 0})
    label: str = spec("how doctor names it", default="")


@dataclass(frozen=True, kw_only=True)
class Resources:
    """What a build needs from the machine (estimates doctor compares with what it finds)."""

    disk: tuple[DiskNeed, ...] = spec("free disk per folder", default=())
    memory_gb: float = spec("total memory below which the build is impractical", default=0.0,
                            json={"minimum": 0})

# --- the recipe ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """Everything needed to build and check one system, pinned."""

    schema_version: int = spec("recipe format version; this tool reads 1, 2 and 3 (1 and 2 are upgraded as "
                               "they are read)")
    name: str = spec("recipe name (lower-case, '-' separated)", checks=check_name)
    description: str = spec("one line on what this recipe builds", default="")
    variant: str | None = spec("the default variant (--variant picks another)", default=None)
    variants: dict[str, Variant] = spec("named overlays (--variant NAME)", default_factory=dict, checks=check_names)
    extends: str | None = spec("the recipe this one is stacked on (a name or a file): same workspace and "
                               "interpreter, its platform when this recipe gives none, its run-time environment "
                               "first; each keeps its own lock and stamps", default=None)
    keep_installed: tuple[str, ...] = spec("distributions this build must leave as they were (version and "
                                           "install origin), e.g. the base's triton", default=())
    platform: Platform = spec("where it builds and where the result runs")
    system_packages: SystemPackages = spec("system packages", default_factory=SystemPackages)
    sources: dict[str, Source] = spec("git sources by name", checks=check_names)
    artifacts: dict[str, Artifact] = spec("downloaded toolchains by name", default_factory=dict,
                                          checks=check_names)
    toolchains: dict[str, Toolchain] = spec("pre-provisioned toolkits by name (checked, never downloaded)",
                                            default_factory=dict, checks=check_names)
    links: Links | None = spec("symlinks to create", default=None)
    python: PythonSpec = spec("Python interpreter and packages", default_factory=PythonSpec)
    build: BuildSpec | None = spec("the build (the one named `build` among `builds`)", default=None)
    builds: dict[str, BuildSpec] = spec("more builds by name, each with its own stamp, run in `needs` order "
                                        "(e.g. a framework from source before the compiler)", default_factory=dict,
                                        checks=check_names)
    steps: tuple[Step, ...] = spec("commands before the build and after it installs", default=())
    runtime: RuntimeSpec = spec("run-time environment", default_factory=RuntimeSpec)
    resources: Resources = spec("disk and memory the build needs", default_factory=Resources)
    checks: tuple[Check, ...] = spec("validation checks, in order", default=())
    diagnosis: Diagnosis = spec("known failures of this system", default_factory=Diagnosis)

    file: str = spec("where the recipe was loaded from", default="", internal=True)
    digest: str = spec("sha256 of the normalized recipe", default="", internal=True)
    inputs_digest: str = spec("sha256 of what the build is made from (recipe/input_digest.py)", default="",
                              internal=True)
    upgraded_from: int | None = spec("the schema version of the file, when it was older", default=None,
                                     internal=True)
    base: Recipe | None = spec("the recipe `extends` names, resolved for the same workspace and host (set when "
                               "a context is opened)", default=None, internal=True)
    host_compiler: tuple[str, str] | None = spec("the C++ compiler's family and version, asked when a context is "
                                                 "opened for a recipe whose `when:` has a compiler condition",
                                                 default=None, internal=True)

    def check(self, ctx: Context, path: Path_) -> None:
        check_source_tree(self.sources, ctx, path + ("sources",))
        check_artifact_paths(self, ctx, path)
        check_builds(self, ctx, path)
        if self.schema_version != SCHEMA_VERSION:
            ctx.report(path + ("schema_version",), f"expected {SCHEMA_VERSION} after upgrading")
        if self.variants and self.variant is None:
            ctx.report(path + ("variant",), "a recipe with variants names its default one",
                       f"add `variant: {next(iter(self.variants))}`")
        if self.variant is not None and self.variant not in self.variants:
            ctx.report(path + ("variant",), f"there is no variant named {self.variant!r}",
                       f"the recipe's variants: {', '.join(self.variants) or 'none'}")
        _check_names(self.checks, ctx, path)
        steps: dict[str, int] = {}
        for i, step in enumerate(self.steps):
            if step.name in steps:
                ctx.report(path + ("steps", i, "name"), f"step name {step.name!r} is used twice")
            steps.setdefault(step.name, i)

    def stack(self) -> list[Recipe]:
        """This recipe's bases, the bottom one first, then this recipe."""
        return [*(self.base.stack() if self.base is not None else ()), self]

    def source_path(self, name: str) -> str:
        """The checkout folder of source ``name``, relative to the workdir."""
        return checkout_path(self.sources, name)

    def sources_in_order(self) -> list[str]:
        """Source names with every parent before the sources checked out inside it."""
        ordered: list[str] = []

        def visit(name: str, seen: tuple[str, ...] = ()) -> None:
            if name in ordered or name in seen:  # a circle is the recipe check's to report
                return
            source = self.sources[name]
            # the parent, and the source whose file names this one's commit or ref (commit_from, ref_from), come first
            reader = source.pin_reader[0]
            for first in (source.inside, reader.source if reader else None):
                if first in self.sources:
                    visit(first, seen + (name,))
            ordered.append(name)

        for name in self.sources:
            visit(name)
        return ordered

    def target_arch(self, host_arch: str) -> str:
        """Where the products run: the target's arch, or the build host's for a native build."""
        return self.platform.target.arch or host_arch

    def is_cross(self, host_arch: str) -> bool:
        return self.target_arch(host_arch) != host_arch

    def selector_facts(self, host_arch: str, os_id: str = "", glibc: str | None = None,
                       os_version: str = "") -> SelectorFacts:
        return SelectorFacts(arch=host_arch, target_arch=self.target_arch(host_arch), os_id=os_id, glibc=glibc,
                             variant=self.variant, os_version=os_version, compiler=self.host_compiler)

    def facts_on(self, host: HostFacts) -> SelectorFacts:
        """What every `when:` of this recipe is judged against on ``host``."""
        return self.selector_facts(host.arch, host.os_id, host.glibc, host.os_version_id)

    def toolchains_on(self, facts: SelectorFacts) -> dict[str, Toolchain]:
        """The pre-provisioned toolchains these facts need (their ``when`` matches), in recipe order."""
        return {name: t for name, t in self.toolchains.items() if t.when is None or t.when.matches(facts)}


def check_file(value: str, ctx: Context, path: Path_) -> None:
    from .checks import check_file_in_source

    check_file_in_source(value, ctx, path)


def _check_names(checks: tuple[Check, ...], ctx: Context, path: Path_) -> None:
    """A check name is one check per variant: several checks may share it when their `when.variant` lists do not
    overlap (`triton` at ==3.1.* for the 3.1 variants, at ==3.6.* for the 3.6 ones); a variant resolves to one."""
    seen: dict[str, list[int]] = {}
    for i, check in enumerate(checks):
        for j in seen.get(check.label, []):
            shared = _shared_variants(checks[j], check)
            if shared is None:
                ctx.report(path + ("checks", i, "name"), f"check name {check.label!r} is used twice (also check "
                           f"{j}, and one of them applies to every variant)", "give each check its own name, or "
                           "give both a `when: {variant: [...]}` with no variant in common")
            elif shared:
                ctx.report(path + ("checks", i, "name"), f"check name {check.label!r} is used twice for variant"
                           f"{'s' if len(shared) > 1 else ''} {', '.join(shared)} (also check {j})",
                           "give each check its own name, or take those variants out of one `when.variant` list")
            else:
                continue
            break
        seen.setdefault(check.label, []).append(i)


def _shared_variants(first: Check, second: Check) -> list[str] | None:
    """The variants both checks apply to; None when one of them names no variant (it applies to all)."""
    a = first.when.variant if first.when is not None else ()
    b = second.when.variant if second.when is not None else ()
    if not a or not b:
        return None
    return [v for v in a if v in b]


def for_variant(checks: tuple[Check, ...], variant: str | None) -> tuple[Check, ...]:
    """The checks a recipe resolved to ``variant`` has: those whose `when.variant` names another are not its own."""
    if variant is None:
        return checks
    return tuple(c for c in checks if c.when is None or not c.when.variant or variant in c.when.variant)
