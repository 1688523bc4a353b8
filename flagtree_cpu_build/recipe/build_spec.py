"""A build's recipe data: `build:` and each entry of `builds:` (how it runs, what it records, its limits).

The ordering of several builds and the rules between them are ``builds``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .checks import (
    _known,
    check_compile_cache_url,
    check_compile_farm_hosts,
    check_env_names,
    check_wheelhouse_location,
)
from .cmake import CMakeSpec
from .environment import EnvHazard, EnvOps
from .placeholder_checks import INTERPOLATED
from .schema import Context, Path_, spec

_source_known = _known("sources", "source")
_artifact_known = _known("artifacts", "artifact")


def _each(check):  # a name check applied to each item of a list
    def checks(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
        for i, name in enumerate(value):
            check(name, ctx, path + (i,))
    return checks


@dataclass(frozen=True, kw_only=True)
class BuildInputs:
    """What a build's result depends on among the recipe's sources and artifacts (its stamp records only those:
    a change in another source does not rerun it)."""

    sources: tuple[str, ...] = spec("the sources it builds from (their commit and local changes are in its stamp)",
                                    default=(), checks=_each(_source_known))
    artifacts: tuple[str, ...] = spec("the artifacts it uses (their sha256 is in its stamp)", default=(),
                                      checks=_each(_artifact_known))


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
    cmake: CMakeSpec | None = spec("CMake arguments handed to the project through one variable: definitions and "
                                   "FetchContent dependencies as recipe sources or artifacts", default=None)
    hazards: tuple[EnvHazard, ...] = spec("inherited variables that mislead a hand-run build (doctor warns)",
                                          default=())
    products: tuple[str, ...] = spec("glob patterns, relative to cwd, of what the build produces; a build is "
                                     "up to date only while they exist", default=())
    distribution: str | None = spec("the Python distribution the build installs (checked for up to date)",
                                    default=None)
    needs: tuple[str, ...] = spec("builds (names under `builds:`, or `build`) that run before this one; a "
                                  "change in one of them reruns this one", default=())
    inputs: BuildInputs | None = spec("the sources and artifacts its stamp records (default: all of them)",
                                      default=None)
    install_wheels: tuple[str, ...] = spec(
        "globs (absolute, or relative to cwd) of wheels the command built: one `pip install` of every match into "
        "the target Python after it; a glob that matches nothing fails the build", default=(), interpolate=True,
        checks=INTERPOLATED)
    stamp_ignores: tuple[str, ...] = spec("build variables that do not change the result (job counts, "
                                          "ccache): changing them does not trigger a rebuild", default=(),
                                          checks=check_env_names)
    compile_cache: str | None = spec(
        "a compile cache shared by machines (ccache >= 4.4 remote storage: redis://HOST:PORT or http://HOST/PATH); "
        "$FLAGTREE_CPU_COMPILE_CACHE and --compile-cache take precedence; never a build input", default=None,
        checks=check_compile_cache_url)
    compile_farm: str | None = spec(
        "distcc helpers that compile the build's C++ through ccache's prefix command (CCACHE_PREFIX=distcc): "
        "HOST[:PORT][/LIMIT][,lzo], separated by spaces; each host is probed with a one-line compile before the "
        "build (none answers: a warning and a local build); $FLAGTREE_CPU_COMPILE_FARM and --compile-farm take "
        "precedence; needs ccache and distcc; adds the hosts' slots to {jobs}; never a build input", default=None,
        checks=check_compile_farm_hosts)
    wheelhouse: str | None = spec(
        "where finished builds are published for a fleet (a folder, file:// or http(s)://): `build` and `setup` "
        "install a wheel from there whose build key and target class fit instead of building; "
        "$FLAGTREE_CPU_WHEELHOUSE and --wheelhouse take precedence; never a build input", default=None,
        checks=check_wheelhouse_location)
    memory_per_job_gb: float = spec("memory one compile job needs (limits {jobs})", default=2.0,
                                    json={"exclusiveMinimum": 0})
    memory_per_link_job_gb: float = spec("memory one link job needs (limits {link_jobs})",
                                         default=4.0, json={"exclusiveMinimum": 0})
    cores_per_job: float | None = spec(
        "CPUs one compile job takes, for projects that size jobs by cores (\"cores / 3\"): {jobs} is at most "
        "cores / this, beside the memory limit (the smaller wins); absent = one job per CPU", default=None,
        json={"exclusiveMinimum": 0})

    def check(self, ctx: Context, path: Path_) -> None:
        if self.mode == "editable" and not self.argv:
            ctx.report(path + ("argv",), "the build command is empty",
                       "give `argv`, or set `mode: wheel-only` with a `wheel_argv`")
        if self.install_wheels and self.mode == "wheel-only":
            ctx.report(path + ("install_wheels",), "a wheel-only build installs nothing",
                       "remove `install_wheels`, or use `mode: editable`")
        if self.mode == "wheel-only" and not self.wheel_argv:
            ctx.report(path + ("wheel_argv",), "a wheel-only build needs `wheel_argv`",
                       "e.g. [\"{python}\", setup.py, bdist_wheel, -d, \"{wheel_dir}\"]")
        for key in ("memory_per_job_gb", "memory_per_link_job_gb"):
            if getattr(self, key) <= 0:
                ctx.report(path + (key,), f"{key} must be greater than 0")
