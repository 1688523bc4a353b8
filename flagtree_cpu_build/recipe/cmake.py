"""A build's CMake arguments as recipe data: ``-D`` definitions, and FetchContent dependencies handed to CMake as
recipe sources or artifacts (``FETCHCONTENT_SOURCE_DIR_<NAME>``, ``FETCHCONTENT_FULLY_DISCONNECTED``), so a build
that would clone googletest at configure time uses a pinned input instead and an offline build is provably offline.

Projects take extra CMake arguments from one environment variable (Triton's setup.py: ``TRITON_APPEND_CMAKE_ARGS``,
scikit-build: ``CMAKE_ARGS``), split like a shell does; ``args_env`` names it. What the arguments become is computed
in the environment layer (``cmakeargs``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .checks import ENV_NAME_PATTERN, _relative_path_check, check_artifact_ref, check_source_ref
from .placeholder_checks import INTERPOLATED
from .schema import Context, Path_, json_rule, spec

# CMake's own variable names (-DNAME or -DNAME:TYPE=VALUE), and FetchContent's content names
CMAKE_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.+-]*(:(BOOL|STRING|PATH|FILEPATH|INTERNAL))?$"
CONTENT_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$"
_CMAKE_NAME = re.compile(CMAKE_NAME_PATTERN)
_CONTENT_NAME = re.compile(CONTENT_NAME_PATTERN)
FETCHCONTENT_PREFIX = "FETCHCONTENT_"
check_at = _relative_path_check("folder", "escapes the build's working folder (cwd)")

@json_rule({"pattern": ENV_NAME_PATTERN})
def check_env_name(value: str, ctx: Context, path: Path_) -> None:
    if not re.fullmatch(ENV_NAME_PATTERN[1:-1], value):
        ctx.report(path, f"{value!r} is not an environment variable name",
                   "use letters, digits and '_', not starting with a digit, e.g. TRITON_APPEND_CMAKE_ARGS")


@json_rule({"propertyNames": {"pattern": CMAKE_NAME_PATTERN}})
def check_cmake_names(value: dict[str, str], ctx: Context, path: Path_) -> None:
    for name in value:
        if not _CMAKE_NAME.fullmatch(name):
            ctx.report(path + (name,), f"{name!r} is not a CMake variable name",
                       "write NAME or NAME:TYPE (BOOL, STRING, PATH, FILEPATH), e.g. TRITON_BUILD_UT: \"OFF\"")
        elif name.upper().startswith(FETCHCONTENT_PREFIX):
            ctx.report(path + (name,), f"{name} is FetchContent's own: the tool sets it from `fetchcontent`",
                       "name the dependency under build.cmake.fetchcontent instead, e.g. "
                       "fetchcontent: {googletest: {source: googletest}}")


@json_rule({"propertyNames": {"pattern": CONTENT_NAME_PATTERN}})
def check_content_names(value: dict[str, object], ctx: Context, path: Path_) -> None:
    seen: dict[str, str] = {}
    for name in value:
        if not _CONTENT_NAME.fullmatch(name):
            ctx.report(path + (name,), f"{name!r} is not a FetchContent name",
                       "use the name the project's FetchContent_Declare gives, e.g. googletest")
        elif name.upper() in seen:  # CMake upper-cases the name: both would set one variable
            ctx.report(path + (name,), f"{name!r} and {seen[name.upper()]!r} are one FetchContent dependency "
                       f"(FETCHCONTENT_SOURCE_DIR_{name.upper()})", "keep one of them")
        seen.setdefault(name.upper(), name)


@dataclass(frozen=True, kw_only=True)
class FetchContentDep:
    """Where a FetchContent dependency's source tree comes from: a recipe source (a git checkout) or an artifact
    (an unpacked tarball)."""

    source: str | None = spec("the recipe source whose checkout is the dependency", default=None,
                              checks=check_source_ref)
    artifact: str | None = spec("the recipe artifact whose unpacked tree is the dependency", default=None,
                                checks=check_artifact_ref)
    at: str | None = spec(
        "a folder relative to the build's cwd where the project's CMake module expects the dependency's sources (its "
        "own SOURCE_DIR inside the build tree, from which it derives include folders): before the build command "
        "the tool makes it a symlink to the pinned tree, in addition to FETCHCONTENT_SOURCE_DIR_<NAME>; e.g. "
        "build/cmake.{platform.tag}-cpython-{python.version}/third_party/x/SPIRVToLLVMTranslator",
        default=None, interpolate=True, checks=(check_at, *INTERPOLATED))

    def check(self, ctx: Context, path: Path_) -> None:
        if (self.source is None) == (self.artifact is None):
            given = "both source and artifact" if self.source else "neither source nor artifact"
            ctx.report(path, f"a FetchContent dependency names one source or one artifact, not {given}",
                       "e.g. {source: googletest} (a git source of the recipe) or {artifact: googletest}")


@dataclass(frozen=True, kw_only=True)
class CMakeSpec:
    """CMake arguments the build hands to the project through one environment variable: ``define``s, then
    ``-DFETCHCONTENT_SOURCE_DIR_<NAME>=<path>`` per FetchContent dependency and, when there is one,
    ``-DFETCHCONTENT_FULLY_DISCONNECTED=ON`` (no download at configure time). They are appended, shell-quoted, to
    the variable's value after every env operation (build.env, toolchains, offline_env), so `env --build` shows
    them and the build stamp records them."""

    args_env: str = spec("the variable the project reads extra CMake arguments from, e.g. TRITON_APPEND_CMAKE_ARGS "
                         "(Triton's setup.py) or CMAKE_ARGS (scikit-build)",
                         checks=check_env_name)
    define: dict[str, str] = spec("CMake cache variables (-DNAME=VALUE; NAME:TYPE allowed), in order",
                                  default_factory=dict, interpolate=True, checks=(check_cmake_names, *INTERPOLATED))
    fetchcontent: dict[str, FetchContentDep] = spec(
        "FetchContent dependencies by their FetchContent_Declare name (e.g. googletest): each a recipe source or "
        "artifact", default_factory=dict, checks=check_content_names)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.define and not self.fetchcontent:
            ctx.report(path, "a cmake block without define or fetchcontent adds nothing",
                       "add define: {NAME: VALUE} or fetchcontent: {NAME: {source: SOURCE}}, or remove the block")
