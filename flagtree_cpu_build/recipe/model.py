"""The recipe models: every pinned input of a build, as validated, frozen data.

A recipe is YAML (schema version 1). The classes here and in ``inputs`` (sources,
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
    check_requirement,
    check_specifier,
)

# the field types below name these: typing.get_type_hints resolves them in this module
from .inputs import Artifact, Links, Source, check_source_tree, checkout_path
from .schema import Context, Path_, spec

SCHEMA_VERSION = 1


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
        check_source_tree(self.sources, ctx, path + ("sources",))

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


