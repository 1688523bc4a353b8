"""The recipe models: every pinned input of a build, as validated, frozen data.

A recipe is YAML (schema version 2; version 1 files are upgraded in memory by ``upgrade``).
The classes here and in ``inputs`` (sources,
artifacts, links) are the format: their fields, documentation and rules (see ``checks``)
drive both the loader and the JSON Schema. Resolving a recipe for one host and workspace
(artifact variants, placeholders) is ``resolve``; finding and loading recipe files is
``files``. FlagTree knowledge belongs in the bundled recipe file, not here: a new
FlagTree branch should need a new recipe, not new code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .checks import (
    ARCHES,
    INTERPOLATED,
    check_arches,
    check_download_url,
    check_env_names,
    check_env_patterns,
    check_name,
    check_names,
    check_placeholders,
    check_regex,
    check_requirement,
    check_script_path,
    check_specifier,
)

# the field types below name these: typing.get_type_hints resolves them in this module
from .inputs import Artifact, Links, Selector, SelectorFacts, Source, check_source_tree, checkout_path
from .schema import Context, Path_, spec

SCHEMA_VERSION = 2
SUPPORTED_VERSIONS = (1, 2)

ENV_CHECKS = (check_env_names, check_placeholders)


# --- platforms ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CompilerRequirement:
    """A compiler the build needs: its family's minimum major version and flags it must accept."""

    env: str = spec("the build-environment variable naming the compiler", default="CXX",
                    checks=check_env_names)
    default: str = spec("the compiler when that variable is unset", default="c++")
    min: dict[str, int] = spec("minimum major version per family (gcc, clang)", default_factory=dict)
    flags: tuple[str, ...] = spec("flags it must accept (probed on the hosts the recipe builds on)", default=())
    why: str = spec("what an older compiler breaks, shown with a failure", default="")
    fix: str = spec("how to get a suitable compiler", default="")
    when: Selector | None = spec("when this applies (default: always)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        for family, major in self.min.items():
            if family not in ("gcc", "clang"):
                ctx.report(path + ("min", family), f"unknown compiler family {family!r}", "use gcc or clang")
            elif major < 1:
                ctx.report(path + ("min", family), f"a major version is at least 1, got {major}")


@dataclass(frozen=True, kw_only=True)
class LibraryRequirement:
    """A library the compiler must find (asked with -print-file-name)."""

    name: str = spec("what it is, e.g. OpenMP runtime")
    any_of: tuple[str, ...] = spec("file names; one of them must be found, e.g. libgomp.so")
    compiler_env: str = spec("the variable naming the compiler to ask", default="CC", checks=check_env_names)
    compiler_default: str = spec("the compiler when that variable is unset", default="cc")
    why: str = spec("what is broken without it", default="")
    fix: str = spec("how to install it", default="")
    when: Selector | None = spec("when this applies (default: always)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.any_of:
            ctx.report(path + ("any_of",), "list at least one file name, e.g. libgomp.so")


@dataclass(frozen=True, kw_only=True)
class DeviceRequirement:
    """A device node the products need (an accelerator)."""

    path: str = spec("absolute path of the device node, e.g. /dev/davinci_manager")
    why: str = spec("what needs it", default="")
    fix: str = spec("how to get it (driver, container option)", default="")
    when: Selector | None = spec("when this applies (default: always)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.path.startswith("/dev/"):
            ctx.report(path + ("path",), f"{self.path!r} is not a device node path", "write it as /dev/NAME")


@dataclass(frozen=True, kw_only=True)
class CommandRequirement:
    """A command that must be on PATH."""

    command: str = spec("executable name")
    why: str = spec("what needs it", default="")
    fix: str = spec("how to install it", default="")
    when: Selector | None = spec("when this applies (default: always)", default=None)


@dataclass(frozen=True, kw_only=True)
class HostRequirements:
    """What doctor and setup's preflight check on the build host; nothing is checked that is not asked here."""

    compilers: tuple[CompilerRequirement, ...] = spec("compilers and their minimums", default=())
    libraries: tuple[LibraryRequirement, ...] = spec("libraries the compiler must find", default=())
    devices: tuple[DeviceRequirement, ...] = spec("device nodes", default=())
    commands: tuple[CommandRequirement, ...] = spec("commands on PATH", default=())


@dataclass(frozen=True, kw_only=True)
class HostPlatform:
    """The machines a build from this recipe runs on."""

    os: Literal["linux"] = spec("operating system", default="linux")
    arch: tuple[str, ...] = spec("architectures that can build (uname -m names)", checks=check_arches,
                                 json={"items": {"enum": list(ARCHES)}})
    why: str = spec("why other machines cannot build it, shown with a host.arch failure", default="")
    advice: str = spec("what to use instead, shown as the fix of a host.arch failure", default="")
    requires: HostRequirements = spec("compilers, libraries, devices and commands the host must have",
                                      default_factory=HostRequirements)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.arch:
            ctx.report(path + ("arch",), "list at least one architecture", "e.g. arch: [x86_64, aarch64]")


@dataclass(frozen=True, kw_only=True)
class TargetPlatform:
    """The machines the products run on; by default the build host itself."""

    arch: str | None = spec("architecture the products run on; absent = the build host's (a native build)",
                            default=None, json={"enum": list(ARCHES)})
    cpu_features: tuple[str, ...] = spec(
        "CPU features the products need, as /proc/cpuinfo spells them", default=())
    sve_vector_bits: int | None = spec(
        "SVE vector length (bits) the products assume, if any", default=None, json={"minimum": 128})
    why: str = spec("what happens on a CPU without those features, shown with a cpu.features failure", default="")
    machines: str = spec("examples of suitable CPUs, shown in fixes", default="")

    def check(self, ctx: Context, path: Path_) -> None:
        if self.arch is not None:
            check_arches((self.arch,), ctx, path + ("arch",))


@dataclass(frozen=True, kw_only=True)
class Platform:
    """Where the build runs (host) and where its products run (target)."""

    host: HostPlatform = spec("the build host")
    target: TargetPlatform = spec("where the products run", default_factory=TargetPlatform)


@dataclass(frozen=True, kw_only=True)
class SystemPackages:
    """System packages the build needs, per package manager."""

    apt: tuple[str, ...] = spec("Debian/Ubuntu package names", default=())


@dataclass(frozen=True, kw_only=True)
class Variant:
    """A named overlay deep-merged onto the recipe (a mapping merges key by key, a list or text replaces,
    null removes the key)."""

    description: str = spec("one line on what this variant is for", default="")
    overlay: dict[str, object] = spec("the keys it changes, shaped like the recipe", default_factory=dict,
                                      json={"type": "object"})


# --- python ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Requirement:
    """A Python package requirement, as pip takes it."""

    SHORTHAND = "requirement"  # a bare string means {requirement: <string>}

    requirement: str = spec("PEP 508 requirement, e.g. ninja>=1.11.1", checks=check_requirement)
    index_url: str | None = spec("package index to install from", default=None,
                                 checks=check_download_url)
    system_command: str | None = spec(
        "skip the pip install when this command is on PATH and its version satisfies the "
        "requirement", default=None)


@dataclass(frozen=True, kw_only=True)
class PythonSpec:
    """The target Python interpreter and packages."""

    requires: str | None = spec("interpreter version range", default=None, checks=check_specifier)
    build: tuple[Requirement, ...] = spec("needed by the build (installed before it)", default=())
    runtime: tuple[Requirement, ...] = spec("needed to run and validate the result", default=())


# --- environments --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SourceScript:
    """A vendor script whose environment is captured (``source set_env.sh``)."""

    SHORTHAND = "script"

    script: str = spec("path of the script: absolute, or relative to the workdir", interpolate=True,
                       checks=(check_script_path, check_placeholders))
    args: tuple[str, ...] = spec("arguments given to it", default=(), interpolate=True, checks=INTERPOLATED)


@dataclass(frozen=True, kw_only=True)
class CommandEnv:
    """Variables set only when a command is available on PATH."""

    command: str = spec("executable name")
    set: dict[str, str] = spec("variables to set", checks=ENV_CHECKS, interpolate=True)


@dataclass(frozen=True, kw_only=True)
class EnvOps:
    """Changes to an inherited environment, applied in this order: unset, source, set, if_command,
    prepend, append."""

    unset: tuple[str, ...] = spec("inherited variables removed; globs like LLVM_* remove every match", default=(),
                                  checks=check_env_patterns)
    source: tuple[SourceScript, ...] = spec("scripts run in bash whose resulting environment is kept", default=())
    set: dict[str, str] = spec("variables set (replacing inherited values)", default_factory=dict,
                               interpolate=True, checks=ENV_CHECKS)
    if_command: tuple[CommandEnv, ...] = spec("variables set when a command exists (e.g. ccache)", default=())
    prepend: dict[str, tuple[str, ...]] = spec("entries put in front of PATH-like variables (':'-separated)",
                                               default_factory=dict, interpolate=True, checks=ENV_CHECKS)
    append: dict[str, tuple[str, ...]] = spec("entries added at the end of PATH-like variables", default_factory=dict,
                                              interpolate=True, checks=ENV_CHECKS)

    def is_empty(self) -> bool:
        return not (self.unset or self.source or self.set or self.if_command or self.prepend or self.append)


@dataclass(frozen=True, kw_only=True)
class EnvHazard:
    """An inherited variable whose value misleads (a hand-run build, or the checks)."""

    name: str = spec("the variable")
    equals: str | None = spec("a hazard when it has exactly this value", default=None, interpolate=True,
                              checks=INTERPOLATED)
    not_equals: str | None = spec("a hazard when it is set to anything else", default=None, interpolate=True,
                                  checks=INTERPOLATED)
    matches: str | None = spec("a hazard when the whole value matches this regular expression", default=None,
                               checks=check_regex)
    why: str = spec("what it breaks")
    fix: str = spec("what to do instead (default: unset it)", default="")

    def check(self, ctx: Context, path: Path_) -> None:
        check_env_names((self.name,), ctx, path + ("name",))
        given = [k for k in ("equals", "not_equals", "matches") if getattr(self, k) is not None]
        if len(given) > 1:
            ctx.report(path, f"give one of equals, not_equals and matches, not {' and '.join(given)}")

    def applies(self, value: str | None) -> bool:
        import re

        if not value:  # unset, or set to nothing: nothing to mislead with
            return False
        if self.equals is not None:
            return value == self.equals
        if self.not_equals is not None:
            return value != self.not_equals
        if self.matches is not None:
            return re.fullmatch(self.matches, value) is not None
        return True


# --- build and steps ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BuildSpec:
    """How the build runs."""

    cwd: str = spec("working folder", interpolate=True, checks=INTERPOLATED)
    mode: Literal["editable", "wheel-only"] = spec(
        "editable: `build` installs into the target Python (and `build --wheel DIR` makes a wheel); wheel-only: "
        "`build` always makes a wheel (into {wheel_dir})", default="editable")
    argv: tuple[str, ...] = spec("the command, one list item per argument (never a shell string)", default=(),
                                 interpolate=True, checks=INTERPOLATED)
    wheel_argv: tuple[str, ...] = spec("the command for `build --wheel` (may use {wheel_dir})", default=(),
                                       interpolate=True, checks=INTERPOLATED)
    env: EnvOps = spec("build environment", default_factory=EnvOps)
    offline_env: EnvOps = spec("extra changes for --offline builds", default_factory=EnvOps)
    hazards: tuple[EnvHazard, ...] = spec("inherited variables that mislead a hand-run build (doctor warns)",
                                          default=())
    products: tuple[str, ...] = spec("glob patterns, relative to cwd, of what the build produces; a build is "
                                     "up to date only while they exist", default=())
    distribution: str | None = spec("the Python distribution the build installs (checked for up to date)",
                                    default=None)
    stamp_ignores: tuple[str, ...] = spec("build variables that do not change the result (job counts, "
                                          "ccache): changing them does not trigger a rebuild", default=(),
                                          checks=check_env_names)
    memory_per_job_gb: float = spec("memory one compile job needs (limits {jobs})", default=2.0,
                                    json={"exclusiveMinimum": 0})
    memory_per_link_job_gb: float = spec("memory one link job needs (limits {link_jobs})",
                                         default=4.0, json={"exclusiveMinimum": 0})

    def check(self, ctx: Context, path: Path_) -> None:
        if self.mode == "editable" and not self.argv:
            ctx.report(path + ("argv",), "the build command is empty",
                       "give `argv`, or set `mode: wheel-only` with a `wheel_argv`")
        if self.mode == "wheel-only" and not self.wheel_argv:
            ctx.report(path + ("wheel_argv",), "a wheel-only build needs `wheel_argv`",
                       "e.g. [\"{python}\", setup.py, bdist_wheel, -d, \"{wheel_dir}\"]")
        for key in ("memory_per_job_gb", "memory_per_link_job_gb"):
            if getattr(self, key) <= 0:
                ctx.report(path + (key,), f"{key} must be greater than 0")


@dataclass(frozen=True, kw_only=True)
class Step:
    """A named command list run before the build or after it installs, logged, stamped and diagnosed like it."""

    name: str = spec("step name (lower-case, '-' separated)", checks=check_name)
    phase: Literal["pre-build", "post-install"] = spec("when it runs, relative to the build command")
    cwd: str = spec("working folder", interpolate=True, checks=INTERPOLATED)
    run: tuple[tuple[str, ...], ...] = spec("the commands, each a list of arguments (never a shell string)",
                                            interpolate=True, checks=INTERPOLATED)
    env: EnvOps = spec("changes on top of the build environment", default_factory=EnvOps)
    inputs: tuple[str, ...] = spec("globs (relative to cwd) whose contents are part of the build stamp", default=())
    creates: tuple[str, ...] = spec("globs (relative to cwd) it produces; missing ones make the build run again",
                                    default=())
    when: Selector | None = spec("when it runs (default: always)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.run:
            ctx.report(path + ("run",), "a step needs at least one command", "e.g. run: [[make, install]]")
        for i, argv in enumerate(self.run):
            if not argv:
                ctx.report(path + ("run", i), "an empty command (a step's command needs an argv)",
                           "write the program and its arguments as a list")


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    """A toolkit installed on the host by other means (CUDA, a vendor SDK): checked, never downloaded."""

    path: str = spec("its folder (placeholders allowed; FLAGTREE_CPU_TOOLCHAIN_<NAME> overrides it per host)",
                     interpolate=True, checks=INTERPOLATED)
    expect: tuple[str, ...] = spec("files (relative to path) that must exist", default=(),
                                   checks=lambda v, c, p: [check_file(x, c, p + (i,)) for i, x in enumerate(v)])
    env: EnvOps = spec("what it adds to the build and run environments", default_factory=EnvOps)
    why: str = spec("what needs it", default="")
    fix: str = spec("how to install it", default="")
    when: Selector | None = spec("when it is needed (default: always)", default=None)


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


@dataclass(frozen=True, kw_only=True)
class Expect:
    """What a check's command must show."""

    exit: int = spec("exit status", default=0)
    output: str | None = spec("a regular expression that must occur in the output", default=None,
                              checks=check_regex)
    absent: str | None = spec("a regular expression that must not occur in the output", default=None,
                              checks=check_regex)
    pytest: dict[str, int] | None = spec("counts from pytest's summary line, e.g. {passed: 7, failed: 0}",
                                         default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        for key, count in (self.pytest or {}).items():
            if key not in PYTEST_OUTCOMES:
                ctx.report(path + ("pytest", key), f"pytest reports no {key!r} count",
                           f"use: {', '.join(PYTEST_OUTCOMES)}")
            elif count < 0:
                ctx.report(path + ("pytest", key), "a count cannot be negative")


PYTEST_OUTCOMES = ("passed", "failed", "skipped", "errors", "xfailed", "xpassed", "deselected", "warnings")


@dataclass(frozen=True, kw_only=True)
class ImportCheck:
    """A module the target interpreter must import, optionally with a version range."""

    module: str = spec("the module, e.g. torch_fl")
    version: str | None = spec("range its __version__ must satisfy", default=None, checks=check_specifier)


@dataclass(frozen=True, kw_only=True)
class WheelCheck:
    """A built wheel whose shared objects must be for the target."""

    path: str = spec("glob of the wheel(s) to inspect, e.g. {wheel_dir}/*.whl", interpolate=True,
                     checks=INTERPOLATED)
    arch: str | None = spec("every ELF object in the wheel must be for this architecture", default=None,
                            json={"enum": list(ARCHES)})
    forbid: tuple[str, ...] = spec("no ELF object may be for these", default=(), checks=check_arches)
    tags: tuple[str, ...] = spec("platform tags the wheel's file name must carry, e.g. linux_riscv64", default=())

    def check(self, ctx: Context, path: Path_) -> None:
        if self.arch is not None:
            check_arches((self.arch,), ctx, path + ("arch",))
        if self.arch is None and not self.forbid and not self.tags:
            ctx.report(path, "a wheel check needs arch, forbid or tags",
                       "e.g. arch: riscv64 (every ELF object is for it), forbid: [x86_64], or tags: [linux_riscv64]")


@dataclass(frozen=True, kw_only=True)
class Check:
    """One validation check: a command with expectations, a bundled preset, an import, or a wheel inspection."""

    name: str | None = spec("check name (default for a preset: its own name)", default=None, checks=check_name)
    argv: tuple[str, ...] = spec("a command (one list item per argument)", default=(), interpolate=True,
                                 checks=INTERPOLATED)
    uses: str | None = spec("a bundled preset, LIBRARY/NAME (flagtree-cpu validate --list shows them)", default=None)
    with_: dict[str, object] = spec("the preset's parameters", default_factory=dict, key="with",
                                    json={"type": "object"})
    import_: ImportCheck | None = spec("a module the target Python must import", default=None, key="import")
    wheel: WheelCheck | None = spec("a wheel whose objects must be for the target", default=None)
    cwd: str | None = spec("working folder (default: the workdir)", default=None, interpolate=True,
                           checks=INTERPOLATED)
    env: EnvOps = spec("changes on top of the run-time environment", default_factory=EnvOps)
    where: Literal["target", "host"] = spec(
        "target: it runs the products, so it is skipped on a build host of another architecture; host: it "
        "inspects them (runs anywhere)", default="target")
    required: bool = spec("a failure fails validation (otherwise it is reported only)", default=True)
    timeout: float = spec("seconds before it is stopped", default=600.0, json={"exclusiveMinimum": 0})
    when: Selector | None = spec("when it runs (default: always)", default=None)
    expect: Expect = spec("what a command must show", default_factory=Expect)

    def check(self, ctx: Context, path: Path_) -> None:
        kinds = [k for k, given in (("argv", bool(self.argv)), ("uses", self.uses is not None),
                                    ("import", self.import_ is not None), ("wheel", self.wheel is not None)) if given]
        if len(kinds) != 1:
            what = "none of them" if not kinds else " and ".join(kinds)
            ctx.report(path, f"a check is exactly one of argv, uses, import and wheel; this one has {what}",
                       "split it into one check per kind" if kinds else "e.g. argv: [\"{python}\", -c, "
                       "\"import torch\"]")
        if self.uses is None and self.with_:
            ctx.report(path + ("with",), "`with` gives a preset's parameters; this check uses no preset")
        if self.uses is not None:
            from ..presets import preset_problems

            for key, message, fix in preset_problems(self.uses, self.with_):
                ctx.report(path + (("uses",) if key is None else ("with", key)), message, fix)
        elif self.name is None:
            ctx.report(path, "missing required key 'name'", "add `name:` — what the report calls this check")

    @property
    def label(self) -> str:
        """The check's name: given, or the preset's own (flagtree/backend -> backend)."""
        return self.name or (self.uses or "check").rsplit("/", 1)[-1]


@dataclass(frozen=True, kw_only=True)
class SignatureSpec:
    """A known failure: a line pattern, what it means, and the fix."""

    id: str = spec("short name, e.g. install-permission", checks=check_name)
    pattern: str = spec("regular expression searched line by line (case-insensitive)", checks=check_regex)
    cause: str = spec("what went wrong")
    fix: str = spec("what fixes it (may use {jobs_half} and {log})")


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """The recipe's known failures, tried before the generic ones."""

    build: tuple[SignatureSpec, ...] = spec("in build and step logs", default=())
    run: tuple[SignatureSpec, ...] = spec("in check output", default=())


# --- the recipe ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """Everything needed to build and check one system, pinned."""

    schema_version: int = spec("recipe format version; this tool reads 1 and 2")
    name: str = spec("recipe name (lower-case, '-' separated)", checks=check_name)
    description: str = spec("one line on what this recipe builds", default="")
    variant: str | None = spec("the default variant (--variant picks another)", default=None)
    variants: dict[str, Variant] = spec("named overlays (--variant NAME)", default_factory=dict, checks=check_names)
    platform: Platform = spec("where it builds and where the result runs")
    system_packages: SystemPackages = spec("system packages", default_factory=SystemPackages)
    sources: dict[str, Source] = spec("git sources by name", checks=check_names)
    artifacts: dict[str, Artifact] = spec("downloaded toolchains by name", default_factory=dict,
                                          checks=check_names)
    toolchains: dict[str, Toolchain] = spec("pre-provisioned toolkits by name (checked, never downloaded)",
                                            default_factory=dict, checks=check_names)
    links: Links | None = spec("symlinks to create", default=None)
    python: PythonSpec = spec("Python interpreter and packages", default_factory=PythonSpec)
    build: BuildSpec | None = spec("the build", default=None)
    steps: tuple[Step, ...] = spec("commands before the build and after it installs", default=())
    runtime: RuntimeSpec = spec("run-time environment", default_factory=RuntimeSpec)
    resources: Resources = spec("disk and memory the build needs", default_factory=Resources)
    checks: tuple[Check, ...] = spec("validation checks, in order", default=())
    diagnosis: Diagnosis = spec("known failures of this system", default_factory=Diagnosis)

    file: str = spec("where the recipe was loaded from", default="", internal=True)
    digest: str = spec("sha256 of the normalized recipe", default="", internal=True)
    upgraded_from: int | None = spec("the schema version of the file, when it was older", default=None,
                                     internal=True)

    def check(self, ctx: Context, path: Path_) -> None:
        check_source_tree(self.sources, ctx, path + ("sources",))
        if self.schema_version != SCHEMA_VERSION:
            ctx.report(path + ("schema_version",), f"expected {SCHEMA_VERSION} after upgrading")
        if self.variants and self.variant is None:
            ctx.report(path + ("variant",), "a recipe with variants names its default one",
                       f"add `variant: {next(iter(self.variants))}`")
        if self.variant is not None and self.variant not in self.variants:
            ctx.report(path + ("variant",), f"there is no variant named {self.variant!r}",
                       f"the recipe's variants: {', '.join(self.variants) or 'none'}")
        seen: dict[str, int] = {}
        for i, check in enumerate(self.checks):
            if check.label in seen:
                ctx.report(path + ("checks", i, "name"), f"check name {check.label!r} is used twice (also "
                           f"check {seen[check.label]})", "give each check its own name")
            seen.setdefault(check.label, i)
        steps: dict[str, int] = {}
        for i, step in enumerate(self.steps):
            if step.name in steps:
                ctx.report(path + ("steps", i, "name"), f"step name {step.name!r} is used twice")
            steps.setdefault(step.name, i)

    def source_path(self, name: str) -> str:
        """The checkout folder of source ``name``, relative to the workdir."""
        return checkout_path(self.sources, name)

    def sources_in_order(self) -> list[str]:
        """Source names with every parent before the sources checked out inside it."""
        ordered: list[str] = []

        def visit(name: str) -> None:
            if name in ordered:
                return
            parent = self.sources[name].inside
            if parent:
                visit(parent)
            ordered.append(name)

        for name in self.sources:
            visit(name)
        return ordered

    def target_arch(self, host_arch: str) -> str:
        """Where the products run: the target's arch, or the build host's for a native build."""
        return self.platform.target.arch or host_arch

    def is_cross(self, host_arch: str) -> bool:
        return self.target_arch(host_arch) != host_arch

    def selector_facts(self, host_arch: str, os_id: str = "", glibc: str | None = None) -> SelectorFacts:
        return SelectorFacts(arch=host_arch, target_arch=self.target_arch(host_arch), os_id=os_id, glibc=glibc,
                             variant=self.variant)


def check_file(value: str, ctx: Context, path: Path_) -> None:
    from .checks import check_file_in_source

    check_file_in_source(value, ctx, path)
