"""PURE: the build and run environments, computed from recipe + host facts + paths.

Nothing here reads the machine or starts processes; callers pass the facts in, so every
rule is unit-tested with plain numbers.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from .recipe import BuildSpec

GIB = 1024**3


@dataclass(frozen=True)
class JobCounts:
    jobs: int
    link_jobs: int
    reason: str  # one line on what limited the numbers, for plans and doctor


def compute_jobs(
    cpu_count: int,
    mem_available: int | None,
    memory_per_job_gb: float,
    memory_per_link_job_gb: float,
) -> JobCounts:
    """Parallel compile and link jobs for this host.

    FlagTree's setup.py defaults MAX_JOBS to 2 x cores; each C++ job of this build
    needs roughly 1.5-2.5 GB, so edge boards with little RAM swap or get OOM-killed.
    Formula: jobs = max(1, min(cores, floor(available / per_job))); link jobs (which
    need more memory) = max(1, min(jobs, floor(available / per_link_job))). With
    unknown memory, jobs = cores and link jobs = 1.
    """
    cores = max(1, cpu_count)
    if mem_available is None:
        return JobCounts(cores, 1, f"{cores} CPUs; memory unknown, so 1 link job")
    gib = mem_available / GIB
    by_memory = int(gib // memory_per_job_gb)
    jobs = max(1, min(cores, by_memory))
    link_jobs = max(1, min(jobs, int(gib // memory_per_link_job_gb)))
    limit = "CPUs" if cores <= by_memory else "memory"
    reason = (f"{cores} CPUs, {gib:.1f} GiB available at {memory_per_job_gb:g} GB per job: "
              f"limited by {limit}")
    return JobCounts(jobs, link_jobs, reason)


# --- the build and run environments ----------------------------------------------------------

Shell = Literal["bash", "zsh", "fish"]


@dataclass(frozen=True)
class EnvChange:
    name: str
    action: Literal["set", "overridden", "dropped", "prepended"]
    old: str | None
    new: str | None

    def describe(self) -> str:
        if self.action == "dropped":
            return f"{self.name} dropped (was {self.old!r})"
        if self.action == "overridden":
            return f"{self.name} overridden: {self.old!r} -> {self.new!r}"
        if self.action == "prepended":
            return f"PATH starts with {self.new}"
        return f"{self.name}={self.new!r}"


@dataclass(frozen=True)
class BuildEnv:
    env: dict[str, str]  # the complete environment of the build process
    changes: tuple[EnvChange, ...]  # how it differs from the inherited one

    @property
    def conflicts(self) -> list[EnvChange]:
        """Inherited values the build could not keep: the user should hear about these."""
        return [c for c in self.changes if c.action in ("dropped", "overridden")]

    def settings(self) -> dict[str, str]:
        """The variables the tool sets (for `env --build` and the stamp)."""
        return {c.name: self.env[c.name] for c in self.changes if c.action != "dropped"}

    def removed(self) -> list[str]:
        return [c.name for c in self.changes if c.action == "dropped" and c.name not in self.env]


def _matches(name: str, pattern: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def compute_build_env(
    build: BuildSpec,
    inherited: Mapping[str, str],
    *,
    offline: bool,
    commands_available: Mapping[str, bool],
    path_prefix: str | None = None,
) -> BuildEnv:
    """The build environment: inherited, minus ``unset_env``, plus the recipe's env, the env of
    available commands (ccache), ``offline_env`` when offline, and ``path_prefix`` (the target
    venv's bin, so ninja and cmake installed there are found) in front of PATH."""
    env = dict(inherited)
    changes: dict[str, EnvChange] = {}
    for name in list(env):
        if any(_matches(name, pattern) for pattern in build.unset_env):
            changes[name] = EnvChange(name, "dropped", env.pop(name), None)
    layers = [build.env]
    layers += [c.env for c in build.env_if_command if commands_available.get(c.command)]
    if offline:
        layers.append(build.offline_env)
    for layer in layers:
        for name, value in layer.items():
            before = inherited.get(name)
            if before is None:
                changes[name] = EnvChange(name, "set", None, value)
            elif before != value:
                changes[name] = EnvChange(name, "overridden", before, value)
            else:
                changes.pop(name, None)  # inherited exactly as wanted: nothing to say
            env[name] = value
    if path_prefix:
        parts = env.get("PATH", "").split(os.pathsep) if env.get("PATH") else []
        if not parts or parts[0] != path_prefix:
            env["PATH"] = os.pathsep.join([path_prefix, *[p for p in parts if p != path_prefix]])
            changes["PATH"] = EnvChange("PATH", "prepended", inherited.get("PATH"), path_prefix)
    return BuildEnv(env, tuple(changes.values()))


def stamp_env(build_env: BuildEnv, ignores: Sequence[str]) -> dict[str, str | None]:
    """The part of the build environment that determines the result (job counts do not)."""
    relevant = {c.name: c.new for c in build_env.changes if c.name not in ignores and c.name != "PATH"}
    return dict(sorted(relevant.items()))


def render_exports(values: Mapping[str, str], unset: Sequence[str] = (), shell: Shell = "bash") -> str:
    """Shell commands that set ``values`` and remove ``unset``, for `eval "$(flagtree-cpu env)"`."""
    lines = []
    for name in unset:
        lines.append(f"set -e {name};" if shell == "fish" else f"unset {name}")
    for name, value in values.items():
        if shell == "fish":
            quoted = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
            lines.append(f"set -gx {name} {quoted};")
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + ("\n" if lines else "")
