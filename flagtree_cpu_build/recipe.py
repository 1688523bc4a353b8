"""The recipe models: every pinned input of a build, as validated, frozen data.

A recipe is YAML (schema version 1). The classes below are the format: their fields,
documentation and rules (see ``recipe_checks``) drive both the loader and the JSON
Schema. This module also resolves a recipe for one host and workspace (artifact
variants, placeholders). Loading and finding recipe files is ``recipe_files``.
FlagTree knowledge belongs in the bundled recipe file, not here: a new FlagTree branch
should need a new recipe, not new code.
"""

from __future__ import annotations

import posixpath
import string
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from . import recipe_schema as rs
from .recipe_checks import (
    ARCHES,
    INTERPOLATED,
    PLACEHOLDERS,
    check_arches,
    check_artifact_sizes,
    check_commit,
    check_download_url,
    check_env_names,
    check_env_patterns,
    check_file_in_source,
    check_git_url,
    check_link_path,
    check_name,
    check_names,
    check_no_artifact_placeholders,
    check_placeholders,
    check_requirement,
    check_sha256,
    check_source_path,
    check_source_ref,
    check_specifier,
    escapes,
    find_patch,
)
from .recipe_schema import Context, Path_, spec

SCHEMA_VERSION = 1


# --- models ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Platform:
    """The machines a build from this recipe can run on."""

    os: Literal["linux"] = spec("operating system", default="linux")
    arch: tuple[str, ...] = spec("CPU architectures (uname -m names)", checks=check_arches,
                                 json={"items": {"enum": list(ARCHES)}})
    cpu_features: tuple[str, ...] = spec(
        "CPU features the built code needs, as /proc/cpuinfo spells them", default=())
    sve_vector_bits: int | None = spec(
        "SVE vector length (bits) the build assumes, if any", default=None, json={"minimum": 128})


@dataclass(frozen=True, kw_only=True)
class SystemPackages:
    """System packages the build needs, per package manager."""

    apt: tuple[str, ...] = spec("Debian/Ubuntu package names", default=())


@dataclass(frozen=True, kw_only=True)
class Probe:
    """A cheap compatibility check on a source, run before any long step."""

    file: str = spec("file (relative to the source) that must exist", checks=check_file_in_source)
    contains: str | None = spec("text the file must contain", default=None)
    why: str = spec("what a failure means and what to do, shown to the user")


@dataclass(frozen=True, kw_only=True)
class Source:
    """A git repository checked out at a pinned commit."""

    url: str = spec("where to clone from", checks=check_git_url)
    ref: str | None = spec("branch or tag the commit belongs to; resolved once and locked when "
                           "`commit` is absent", default=None)
    commit: str | None = spec("the pinned commit (full 40-hex id)", default=None, checks=check_commit,
                              json={"pattern": "^[0-9a-fA-F]{40}$"})
    path: str | None = spec("checkout folder, relative to the workdir (or to the `inside` source);"
                            " default: the source name", default=None, checks=check_source_path)
    inside: str | None = spec("name of the source this one is checked out inside", default=None,
                              checks=check_source_ref)
    submodules: Literal["none", "recursive"] = spec("submodules to check out at their recorded "
                                                    "commits", default="none")
    shallow: bool = spec("fetch only the pinned commit on first clone", default=False)
    filter: Literal["blob:none", "tree:0"] | None = spec("partial-clone filter for the first clone",
                                                        default=None)
    patches: tuple[str, ...] = spec("patch files (under patches/) applied after checkout",
                                    default=())
    probes: tuple[Probe, ...] = spec("compatibility probes run after checkout", default=())

    def check(self, ctx: Context, path: Path_) -> None:
        if self.ref is None and self.commit is None:
            ctx.report(path, "a source needs `ref` (a branch or tag), `commit`, or both",
                       "add `ref: main` to follow a branch (resolved once, then locked)")
        for i, patch in enumerate(self.patches):
            if find_patch(patch, ctx.facts.get("patch_dirs", ())) is None:
                dirs = " or ".join(str(d) for d in ctx.facts.get("patch_dirs", ()))
                ctx.report(path + ("patches", i), f"patch file {patch!r} not found in {dirs}",
                           "put the file there, or fix its name")


@dataclass(frozen=True, kw_only=True)
class HostSelector:
    """Which hosts an artifact variant is for; every listed condition must hold."""

    os_id: tuple[str, ...] = spec("/etc/os-release ID values, e.g. almalinux", default=())
    arch: tuple[str, ...] = spec("architectures", default=(), checks=check_arches)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.os_id and not self.arch:
            ctx.report(path, "`when` needs at least one condition (os_id or arch)")

    def matches(self, os_id: str, arch: str) -> bool:
        return (not self.os_id or os_id in self.os_id) and (not self.arch or arch in self.arch)


@dataclass(frozen=True, kw_only=True)
class ArtifactVariant:
    """Replacement url/sha256/path for the hosts matched by `when` (first match wins)."""

    when: HostSelector = spec("the hosts this variant is for")
    url: str | None = spec("download URL on those hosts", default=None,
                           checks=(check_download_url, check_no_artifact_placeholders,
                                   check_placeholders), interpolate=True)
    sha256: str | None = spec("expected sha256 on those hosts", default=None, checks=check_sha256)
    path: str | None = spec("publish path on those hosts", default=None, interpolate=True,
                            checks=(check_no_artifact_placeholders, check_placeholders))
    size: int | None = spec("approximate download size in bytes", default=None, json={"minimum": 1})
    unpacked_size: int | None = spec("approximate unpacked size in bytes on those hosts", default=None,
                                     json={"minimum": 1})
    unpacked_entries: int | None = spec("approximate number of files, folders and links on those hosts",
                                        default=None, json={"minimum": 1})

    def check(self, ctx: Context, path: Path_) -> None:
        check_artifact_sizes(self, ctx, path)


@dataclass(frozen=True, kw_only=True)
class SourcePin:
    """Ties an artifact to a source file: the file's first `chars` characters must appear
    in the artifact URL (FlagTree names its LLVM tarball after cmake/llvm-hash.txt)."""

    source: str = spec("source holding the file", checks=check_source_ref)
    file: str = spec("file in that source", checks=check_file_in_source)
    chars: int = spec("how many leading characters of the file must appear in the URL",
                      default=8, json={"minimum": 1, "maximum": 64})

    def check(self, ctx: Context, path: Path_) -> None:
        if not 1 <= self.chars <= 64:
            ctx.report(path + ("chars",), f"chars must be between 1 and 64, got {self.chars}")


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """A downloaded, verified and unpacked toolchain (e.g. the LLVM prebuilt)."""

    url: str = spec("download URL", checks=(check_download_url, check_no_artifact_placeholders,
                                            check_placeholders), interpolate=True)
    sha256: str | None = spec("expected sha256; absent = recorded on first download (lock file)",
                              default=None, checks=check_sha256,
                              json={"pattern": "^[0-9a-fA-F]{64}$"})
    kind: Literal["tarball"] = spec("archive kind", default="tarball")
    path: str = spec("where the unpacked tree is published (relative = inside the workdir)",
                     interpolate=True, checks=(check_no_artifact_placeholders, check_placeholders))
    strip_components: int = spec("leading path components to drop while unpacking", default=0,
                                 json={"minimum": 0})
    version_file: str | None = spec("file written inside the tree holding the URL exactly", default=None,
                                    checks=check_file_in_source)
    size: int | None = spec("approximate download size in bytes (for plans and the free-space check)",
                            default=None, json={"minimum": 1})
    unpacked_size: int | None = spec(
        "approximate size of the unpacked tree in bytes (`du -sb`); checked against free space before "
        "unpacking, and unpacking stops beyond twice this (an archive bomb). Absent: the limit is 20 times "
        "the download", default=None, json={"minimum": 1})
    unpacked_entries: int | None = spec(
        "approximate number of files, folders and links in the tarball (`tar -tf FILE | wc -l`); unpacking "
        "stops beyond twice this. Absent: the limit is 200,000", default=None, json={"minimum": 1})
    matches: SourcePin | None = spec("consistency rule against a source file", default=None)
    variants: tuple[ArtifactVariant, ...] = spec("per-host replacements", default=())

    def check(self, ctx: Context, path: Path_) -> None:
        if self.strip_components < 0:
            ctx.report(path + ("strip_components",), "strip_components cannot be negative")
        check_artifact_sizes(self, ctx, path)


@dataclass(frozen=True, kw_only=True)
class Link:
    """One symlink: `path` relative to the root source, `target` relative to the link's folder."""

    path: str = spec("where the link is created, relative to the root source", checks=check_link_path)
    target: str = spec("what the link points to, relative to the link's own folder (an existing link "
                       "that reaches the same place through an absolute path is accepted as it is)")

    def check(self, ctx: Context, path: Path_) -> None:
        if self.target.startswith("/"):
            ctx.report(path + ("target",), f"target {self.target!r} is absolute; links must be "
                       "relative so the tree can be moved", "write it relative to the link's folder")
            return
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(self.path), self.target))
        if escapes(resolved):
            ctx.report(path + ("target",), f"target {self.target!r} resolves outside the root "
                       f"source (to {resolved!r})", "count the '../' parts again: the target is "
                       "relative to the folder that holds the link")
        elif resolved == posixpath.normpath(self.path):
            ctx.report(path + ("target",), "the link points at itself")


@dataclass(frozen=True, kw_only=True)
class Links:
    """Symlinks created inside one source's checkout."""

    root: str = spec("the source whose checkout holds the links", checks=check_source_ref)
    entries: tuple[Link, ...] = spec("the links")

    def check(self, ctx: Context, path: Path_) -> None:
        seen: dict[str, int] = {}
        for i, link in enumerate(self.entries):
            key = posixpath.normpath(link.path)
            if key in seen:
                ctx.report(path + ("entries", i, "path"), f"duplicate link path {link.path!r} "
                           f"(also entry {seen[key]})", "delete one of the two entries")
            seen.setdefault(key, i)
        for i, link in enumerate(self.entries):
            key = posixpath.normpath(link.path)
            for other, j in seen.items():
                if key.startswith(other + "/"):
                    ctx.report(path + ("entries", i, "path"), f"link path {link.path!r} lies "
                               f"inside link {other!r} (entry {j}); it would be created through "
                               "the other link", "link the folder or its files, not both")


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


@dataclass(frozen=True, kw_only=True)
class CommandEnv:
    """Variables set only when a command is available on PATH."""

    command: str = spec("executable name")
    env: dict[str, str] = spec("variables to set", checks=(check_env_names, check_placeholders),
                               interpolate=True)


@dataclass(frozen=True, kw_only=True)
class BuildSpec:
    """How the build runs."""

    cwd: str = spec("working folder", interpolate=True, checks=INTERPOLATED)
    argv: tuple[str, ...] = spec("the command, one list item per argument (never a shell string)",
                                 interpolate=True, checks=INTERPOLATED)
    env: dict[str, str] = spec("build environment", default_factory=dict, interpolate=True,
                               checks=(check_env_names, check_placeholders))
    offline_env: dict[str, str] = spec("extra variables for --offline builds", default_factory=dict,
                                       interpolate=True, checks=(check_env_names, check_placeholders))
    unset_env: tuple[str, ...] = spec("inherited variables removed from the build environment; NAME_* "
                                      "removes every variable with that prefix", default=(),
                                      checks=check_env_patterns)
    env_if_command: tuple[CommandEnv, ...] = spec("variables set when a command exists", default=())
    wheel_argv: tuple[str, ...] = spec("the command for `build --wheel` (may use {wheel_dir})", default=(),
                                       interpolate=True, checks=INTERPOLATED)
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
        if not self.argv:
            ctx.report(path + ("argv",), "the build command is empty")
        for key in ("memory_per_job_gb", "memory_per_link_job_gb"):
            if getattr(self, key) <= 0:
                ctx.report(path + (key,), f"{key} must be greater than 0")


@dataclass(frozen=True, kw_only=True)
class RuntimeSpec:
    """What programs using the result need."""

    env: dict[str, str] = spec("variables to export at run time", default_factory=dict,
                               interpolate=True, checks=(check_env_names, check_placeholders))


@dataclass(frozen=True, kw_only=True)
class Resources:
    """What a build needs from the machine (estimates doctor compares with what it finds)."""

    workdir_disk_gb: float = spec("free disk the workdir needs (checkouts, build tree, venv)", default=0.0,
                                  json={"minimum": 0})
    triton_home_disk_gb: float = spec("free disk under $TRITON_HOME/.triton (the unpacked toolchain)",
                                      default=0.0, json={"minimum": 0})
    memory_gb: float = spec("total memory below which the build is impractical", default=0.0,
                            json={"minimum": 0})


@dataclass(frozen=True, kw_only=True)
class KernelCheck:
    required: bool = spec("a failure fails validation (otherwise it is reported only)", default=True)
    timeout: float | None = spec("seconds before the kernel is stopped", default=None)


@dataclass(frozen=True, kw_only=True)
class BackendKernel(KernelCheck):
    """`import triton` and check the registered backend and builder methods."""

    triton_version: str = spec("expected triton.__version__ range", checks=check_specifier)
    backends: tuple[str, ...] = spec("backends that must be registered", default=("cpu",))
    builder_prefix: str = spec("prefix of the builder methods to compare", default="create_cpu_")
    builder_methods: tuple[str, ...] = spec("exact set of builder methods with that prefix", default=())

    def check(self, ctx: Context, path: Path_) -> None:
        for i, name in enumerate(self.builder_methods):
            if not name.startswith(self.builder_prefix):
                ctx.report(path + ("builder_methods", i), f"{name!r} does not start with "
                           f"builder_prefix {self.builder_prefix!r}")
        if len(set(self.builder_methods)) != len(self.builder_methods):
            ctx.report(path + ("builder_methods",), "builder_methods lists a name twice")


@dataclass(frozen=True, kw_only=True)
class RmsNormKernel(KernelCheck):
    """A @triton.jit kernel calling tle_ops.rms_norm, compared with a float reference."""

    dtype: Literal["bfloat16", "float16", "float32"] = spec("element type", default="bfloat16")
    dim: int = spec("vector length D", default=128, json={"minimum": 1})
    eps: float = spec("epsilon", default=1e-6)
    max_error: float = spec("largest accepted absolute error", default=0.0625)


@dataclass(frozen=True, kw_only=True)
class VectorAddKernel(KernelCheck):
    """A plain @triton.jit vector add; the result must be exact."""

    size: int = spec("number of elements", default=98432, json={"minimum": 1})


@dataclass(frozen=True, kw_only=True)
class SoftmaxKernel(KernelCheck):
    """A row-wise softmax kernel compared with torch.softmax."""

    rows: int = spec("rows", default=64, json={"minimum": 1})
    cols: int = spec("columns", default=781, json={"minimum": 1})
    tolerance: float = spec("largest accepted absolute error", default=1e-5)


@dataclass(frozen=True, kw_only=True)
class DecodeKernel(KernelCheck):
    """End-to-end INT8 decode of a model given with --model; skipped without one."""

    required: bool = spec("a failure fails validation", default=False)
    max_new_tokens: int = spec("tokens to generate", default=32, json={"minimum": 1})
    min_tokens_per_s: float | None = spec("throughput floor, if any", default=None)


@dataclass(frozen=True, kw_only=True)
class Validation:
    """Validation kernels and what they must show."""

    timeout: float = spec("default seconds per kernel", default=600.0)
    backend: BackendKernel | None = spec("backend registration check", default=None)
    tle_rms_norm: RmsNormKernel | None = spec("TLE rms_norm operator check", default=None,
                                              key="tle-rms-norm")
    vector_add: VectorAddKernel | None = spec("plain kernel check", default=None, key="vector-add")
    softmax: SoftmaxKernel | None = spec("second plain kernel check", default=None)
    decode_e2e: DecodeKernel | None = spec("end-to-end model check", default=None, key="decode-e2e")


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """Everything needed to build and check one system, pinned."""

    schema_version: int = spec("recipe format version; this tool reads 1")
    name: str = spec("recipe name (lower-case, '-' separated)", checks=check_name)
    description: str = spec("one line on what this recipe builds", default="")
    platform: Platform = spec("where the result runs")
    system_packages: SystemPackages = spec("system packages", default_factory=SystemPackages)
    sources: dict[str, Source] = spec("git sources by name", checks=check_names)
    artifacts: dict[str, Artifact] = spec("downloaded toolchains by name", default_factory=dict,
                                          checks=check_names)
    links: Links | None = spec("symlinks to create", default=None)
    python: PythonSpec = spec("Python interpreter and packages", default_factory=PythonSpec)
    build: BuildSpec | None = spec("the build", default=None)
    runtime: RuntimeSpec = spec("run-time environment", default_factory=RuntimeSpec)
    resources: Resources = spec("disk and memory the build needs", default_factory=Resources)
    validation: Validation | None = spec("validation kernels", default=None)

    file: str = spec("where the recipe was loaded from", default="", internal=True)
    digest: str = spec("sha256 of the normalized recipe", default="", internal=True)

    def check(self, ctx: Context, path: Path_) -> None:
        _check_source_tree(self.sources, ctx, path + ("sources",))

    def source_path(self, name: str) -> str:
        """The checkout folder of source ``name``, relative to the workdir."""
        return _checkout_path(self.sources, name)

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


def _check_source_tree(sources: Mapping[str, Source], ctx: Context, path: Path_) -> None:
    for name in sources:  # `inside` chains must end
        seen = [name]
        current = sources[name].inside
        while current is not None and current in sources:
            if current in seen:
                chain = " -> ".join(seen + [current])
                ctx.report(path + (name, "inside"), f"sources are inside each other in a circle: {chain}")
                return
            seen.append(current)
            current = sources[current].inside
    recipe_paths = {name: _checkout_path(sources, name) for name in sources}
    for name, rel in recipe_paths.items():
        for other, other_rel in recipe_paths.items():
            if other == name:
                continue
            if rel == other_rel and name < other:
                ctx.report(path + (other, "path"), f"sources {name!r} and {other!r} use the same "
                           f"folder {rel!r}", "give each source its own `path`")
            elif rel.startswith(other_rel + "/") and not _is_inside(sources, name, other):
                ctx.report(path + (name, "path"), f"the checkout {rel!r} lies inside source "
                           f"{other!r}'s checkout", f"declare `inside: {other}` and make `path` "
                           "relative to it, so it is cloned after its parent")


def _checkout_path(sources: Mapping[str, Source], name: str) -> str:
    source = sources[name]
    own = source.path or name
    if source.inside:
        return posixpath.normpath(posixpath.join(_checkout_path(sources, source.inside), own))
    return posixpath.normpath(own)


def _is_inside(sources: Mapping[str, Source], name: str, ancestor: str) -> bool:
    current = sources[name].inside
    while current is not None:
        if current == ancestor:
            return True
        current = sources[current].inside
    return False


# --- host selection and placeholder expansion ---------------------------------------------


def select_variants(recipe: Recipe, os_id: str, arch: str) -> Recipe:
    """Apply, per artifact, the first variant whose `when` matches this host."""
    artifacts = {}
    for name, artifact in recipe.artifacts.items():
        for variant in artifact.variants:
            if variant.when.matches(os_id, arch):
                artifact = replace(
                    artifact,
                    url=variant.url or artifact.url,
                    # another URL is another file: the default's sha256 cannot apply to it
                    sha256=variant.sha256 if variant.url or variant.sha256 else artifact.sha256,
                    path=variant.path or artifact.path,
                    size=variant.size if variant.size is not None else artifact.size,
                    # another URL is another tarball: the default's expectations cannot apply to it
                    unpacked_size=variant.unpacked_size if variant.url or variant.unpacked_size
                    else artifact.unpacked_size,
                    unpacked_entries=variant.unpacked_entries if variant.url or variant.unpacked_entries
                    else artifact.unpacked_entries,
                )
                break
        artifacts[name] = artifact
    return replace(recipe, artifacts=artifacts)


def expand(text: str, values: Mapping[str, str]) -> str:
    """Replace {name} placeholders; the recipe was validated, so every name is known."""
    out = []
    for literal, name, _fmt, _conv in string.Formatter().parse(text):
        out.append(literal)
        if name is not None:
            out.append(values[name])
    return "".join(out)


def resolve(recipe: Recipe, workdir: Path, base: Mapping[str, str]) -> Recipe:
    """The recipe with every placeholder filled in, for this workspace and host.

    ``base`` holds the values of PLACEHOLDERS (see workspace.placeholder_values); the
    per-source and per-artifact values are derived here.
    """
    missing = set(PLACEHOLDERS) - set(base)
    if missing:  # a programming error, not a user one
        raise KeyError(f"placeholder values missing: {sorted(missing)}")
    values = dict(base)
    for name in recipe.sources:
        values[f"sources.{name}.path"] = str(workdir / recipe.source_path(name))
    for name, artifact in recipe.artifacts.items():
        values[f"artifacts.{name}.url"] = expand(artifact.url, values)
        values[f"artifacts.{name}.path"] = str(workdir / expand(artifact.path, values))
    resolved = rs.map_interpolated(recipe, lambda text, _path: expand(text, values))
    # a relative artifact path means "inside the workdir", in the field as in its placeholder
    artifacts = {name: replace(a, path=values[f"artifacts.{name}.path"]) for name, a in resolved.artifacts.items()}
    return replace(resolved, artifacts=artifacts)
