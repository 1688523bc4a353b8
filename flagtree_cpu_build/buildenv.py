"""The build and run environments, computed from recipe + host facts + paths.

Nothing here reads the machine or starts processes, with exceptions made explicit: a recipe's
``source`` ops run their script (``envops.source_script``, replaceable by a parameter);
``build_environment`` starts from this process's own environment (which the build inherits); and
``toolchain_missing`` looks for a pre-provisioned toolchain's folder. Callers pass the other facts in,
so every rule is unit-tested with plain numbers.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .envops import SEP, Applied, CommandLookup, EnvChange, EnvLayer, Sourced, SourceRunner, apply_layers, on_path
from .recipe import BuildSpec, EnvOps, Recipe, SelectorFacts, Toolchain

if TYPE_CHECKING:
    from .host import HostFacts

__all__ = ["GIB", "Applied", "BuildEnv", "EnvChange", "EnvLayer", "JobCounts", "applicable_toolchains",
           "build_environment", "compute_build_env", "compute_jobs", "not_shell_names", "render_exports",
           "runtime_env", "stamp_env", "toolchain_layers", "toolchain_missing"]

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
    *,
    cores_per_job: float | None = None,
) -> JobCounts:
    """Parallel compile and link jobs for this host.

    FlagTree's setup.py defaults MAX_JOBS to 2 x cores; each C++ job of this build
    needs roughly 1.5-2.5 GB, so edge boards with little RAM swap or get OOM-killed.
    Formula: jobs = max(1, min(cores, floor(cores / cores_per_job), floor(available / per_job)));
    link jobs (which need more memory) = max(1, min(jobs, floor(available / per_link_job))).
    Some projects size jobs by cores ("cores / 3": each job runs threads of its own), hence
    cores_per_job; the smallest limit wins. With unknown memory, memory limits nothing and
    link jobs = 1.
    """
    cores = max(1, cpu_count)
    limits = {"CPUs": cores}
    if cores_per_job is not None:
        limits["CPUs per job"] = int(cores // cores_per_job)
    per_core = f" at {cores_per_job:g} CPUs per job" if cores_per_job is not None else ""
    if mem_available is None:
        limit = min(limits, key=lambda k: limits[k])  # first of the smallest: CPUs on a tie
        jobs = max(1, limits[limit])
        return JobCounts(jobs, 1, f"{cores} CPUs{per_core}; memory unknown, so 1 link job: limited by {limit}")
    gib = mem_available / GIB
    limits["memory"] = int(gib // memory_per_job_gb)
    limit = min(limits, key=lambda k: limits[k])
    jobs = max(1, limits[limit])
    link_jobs = max(1, min(jobs, int(gib // memory_per_link_job_gb)))
    reason = (f"{cores} CPUs{per_core}, {gib:.1f} GiB available at {memory_per_job_gb:g} GB per job: "
              f"limited by {limit}")
    return JobCounts(jobs, link_jobs, reason)


# --- the build and run environments ----------------------------------------------------------

Shell = Literal["bash", "zsh", "fish"]


@dataclass(frozen=True)
class BuildEnv:
    """A computed environment (the build's, a step's, or the run-time one) and how it differs from the inherited
    one."""

    env: dict[str, str]  # the complete environment of the process
    changes: tuple[EnvChange, ...]  # how it differs from the inherited one
    sourced: tuple[Sourced, ...] = ()  # what each sourced script changed
    named: tuple[str, ...] = ()  # the variables the recipe's ops assign
    path_prefix: str | None = None  # the target Python's bin, put in front of PATH (not the recipe's doing)

    @property
    def conflicts(self) -> list[EnvChange]:
        """Inherited values the build could not keep: the user should hear about these."""
        return [c for c in self.changes if c.action in ("dropped", "overridden")]

    def settings(self) -> dict[str, str]:
        """The variables whose values differ from the inherited ones (for `env --build`)."""
        return {c.name: self.env[c.name] for c in self.changes if c.name in self.env}

    def exports(self) -> dict[str, str]:
        """Every variable the ops assign, changed or not, then the other changes (for `flagtree-cpu env`)."""
        names = [*self.named, *(c.name for c in self.changes if c.name not in self.named)]
        return {name: self.env[name] for name in names if name in self.env}

    def removed(self) -> list[str]:
        return [c.name for c in self.changes if c.action == "dropped" and c.name not in self.env]


def toolchain_layers(recipe: Recipe, facts: SelectorFacts) -> list[EnvLayer]:
    """The env ops of the recipe's toolchains that apply on this host (their ``when``), in recipe order."""
    from .recipe.resolve import toolchain_override_var

    layers = []
    for name, toolchain in recipe.toolchains_on(facts).items():
        if toolchain.env.is_empty():
            continue
        fix = toolchain.fix or f"install {name} at {toolchain.path}"
        if toolchain_override_var(name) not in fix:  # the recipe's fix may already say it
            fix += f" (or point {toolchain_override_var(name)} at this host's copy)"
        layers.append(EnvLayer(toolchain.env, f"toolchains.{name}.env", fix))
    return layers


def compute_build_env(
    build: BuildSpec,
    inherited: Mapping[str, str],
    *,
    offline: bool,
    commands_available: Mapping[str, bool] | None = None,
    path_prefix: str | None = None,
    extra_ops: Sequence[EnvLayer | EnvOps] = (),
    workdir: Path | None = None,
    source: SourceRunner | None = None,
    cmake_args: Sequence[str] = (),
) -> BuildEnv:
    """The build environment: ``inherited`` with ``build.env``, then ``extra_ops`` (the env of the toolchains
    that apply — ``toolchain_layers`` — and a step's own env, in that order), then ``offline_env`` when
    offline, then ``cmake_args`` (``cmakeargs.cmake_arguments``) appended to ``build.cmake.args_env`` — last, so
    no env operation replaces them — then ``path_prefix`` (the target venv's bin, so ninja and cmake installed
    there are found) in front of PATH.

    ``commands_available`` answers ``if_command`` (command -> present); None looks each command up on the
    PATH computed so far with ``path_prefix`` in front. Relative ``source`` scripts are found under
    ``workdir``; ``source`` runs them (default: bash).
    """
    layers = [EnvLayer(build.env, "build.env"), *(_layer(x) for x in extra_ops)]
    if offline:
        layers.append(EnvLayer(build.offline_env, "build.offline_env"))
    if build.cmake is not None and cmake_args:
        layers.append(EnvLayer(EnvOps(), "build.cmake", arguments=(build.cmake.args_env, tuple(cmake_args))))
    has_command: CommandLookup = (
        on_path if commands_available is None else (lambda command, _path: bool(commands_available.get(command))))
    applied = apply_layers(layers, inherited, workdir=workdir, has_command=has_command, source=source,
                           path_prefix=path_prefix)
    return BuildEnv(applied.env, applied.changes, applied.sourced, applied.named, path_prefix)


def build_environment(recipe: Recipe, python: Path, *, offline: bool, host: HostFacts, workdir: Path | None = None,
                      extra: Sequence[EnvLayer] = ()) -> BuildEnv:
    """The build environment on this machine: the recipe's env operations, those of the toolchains that
    apply here, then ``extra`` (a step's own), then the ``cmake:`` block's arguments, applied to os.environ,
    with the target interpreter's bin first on PATH (where ``if_command`` commands such as ccache are looked
    up too). Relative ``source`` scripts are found under ``workdir``."""
    from .cmakeargs import cmake_arguments

    assert recipe.build is not None
    facts = recipe.facts_on(host)
    cmake = recipe.build.cmake
    args = cmake_arguments(cmake, recipe, workdir or Path.cwd()) if cmake is not None else ()
    return compute_build_env(recipe.build, os.environ, offline=offline, path_prefix=str(python.parent),
                             extra_ops=[*toolchain_layers(recipe, facts), *extra], workdir=workdir, cmake_args=args)


def applicable_toolchains(recipe: Recipe, host: HostFacts) -> dict[str, Toolchain]:
    """The pre-provisioned toolchains this host needs (their ``when`` matches)."""
    return recipe.toolchains_on(recipe.facts_on(host))


def toolchain_missing(toolchain: Toolchain) -> list[str]:
    """What of a pre-provisioned toolchain is not on this machine: its folder, else the expected files in it, at
    the place a failure is told about; [] when it was found (see ``toolchain_shortfall`` for other reasons)."""
    from .toolchain_search import toolchain_verdict

    search = toolchain_verdict(toolchain)
    return [] if search.found or search.chosen is None else list(search.chosen.missing)


def toolchain_shortfall(toolchain: Toolchain) -> str | None:
    """Why the toolchain will not do here, in words ("missing A, B", "found 12.4 at X, the recipe needs >=12.6"),
    with the other places looked at; None when it was found."""
    from .toolchain_search import toolchain_verdict

    search = toolchain_verdict(toolchain)
    if search.found:
        return None
    what = search.chosen.reason() if search.chosen is not None else "no path, paths or discover answer"
    others = search.others()
    return what + (f" (also looked at: {'; '.join(others)})" if others else "")


def runtime_env(
    recipe: Recipe,
    inherited: Mapping[str, str],
    *,
    facts: SelectorFacts,
    workdir: Path | None = None,
    extra_ops: Sequence[EnvLayer | EnvOps] = (),
    has_command: CommandLookup = on_path,
    source: SourceRunner | None = None,
) -> BuildEnv:
    """The environment programs using the result get (`flagtree-cpu env`, validation checks):
    ``inherited`` with ``runtime.env``, then the env of the toolchains that apply on this host (``facts``),
    each first for the recipe's bases (``extends``) and then for the recipe itself, then ``extra_ops`` (a
    check's own ``env``: ``EnvLayer(check.env, f"checks[{i}].env")``).

    Relative ``source`` scripts are found under ``workdir`` (the workspace root); a missing or failing
    script raises SourceScriptError (a build error, exit code 5).
    """
    layers = []
    for layer in recipe.stack():  # a stacked recipe's programs run in its base's environment first
        mine = layer is recipe
        layer_facts = facts if mine else replace(facts, variant=layer.variant)
        layers += [EnvLayer(layer.runtime.env, "runtime.env" if mine else f"{layer.name}: runtime.env"),
                   *toolchain_layers(layer, layer_facts)]
    layers += [_layer(x) for x in extra_ops]
    applied = apply_layers(layers, inherited, workdir=workdir, has_command=has_command, source=source)
    return BuildEnv(applied.env, applied.changes, applied.sourced, applied.named)


def _layer(ops: EnvLayer | EnvOps) -> EnvLayer:
    return ops if isinstance(ops, EnvLayer) else EnvLayer(ops, "env")


def stamp_env(build_env: BuildEnv, ignores: Sequence[str]) -> dict[str, str | None]:
    """The part of the build environment that determines the result (job counts do not).

    A variable set (by the recipe or a sourced script) stamps its value; a dropped one None; a PATH-like
    one extended around its inherited value stamps the added entries around ``$NAME`` (the machine's own
    entries, and the target Python's bin, are not the recipe's doing).
    """
    relevant: dict[str, str | None] = {}
    for change in build_env.changes:
        if change.name in ignores:
            continue
        if change.action in ("prepended", "appended"):
            front = [e for e in change.front if not (change.name == "PATH" and e == build_env.path_prefix)]
            if front or change.back:
                relevant[change.name] = SEP.join([*front, f"${change.name}", *change.back])
        else:
            relevant[change.name] = change.new
    return dict(sorted(relevant.items()))


# What sh, bash, zsh and fish all accept as a variable name (ASCII only: dash refuses `é`). An inherited variable's
# name can be any bytes but '=' (`env 'a;b=1' cmd` makes one); printed into `eval "$(flagtree-cpu env)"` it
# would be run as a command, so such a name is never printed.
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def not_shell_names(values: Mapping[str, str], unset: Sequence[str] = ()) -> list[str]:
    """The names ``render_exports`` leaves out, for a warning."""
    return [name for name in (*unset, *values) if not _SHELL_NAME.fullmatch(name)]


def render_exports(values: Mapping[str, str], unset: Sequence[str] = (), shell: Shell = "bash",
                   notes: Sequence[str] = ()) -> str:
    """Shell commands that set ``values`` and remove ``unset``, for `eval "$(flagtree-cpu env)"`; ``notes`` become
    comment lines first — not for `env`'s output: an interactive zsh without INTERACTIVE_COMMENTS runs a `#` line
    (the command says its notes on stderr). A value is the variable's whole new
    value (a prepended PATH included), so evaluating the output twice changes nothing more. Every value is
    quoted, so it is set to exactly its text (quotes, `$(...)`, newlines); a name a shell cannot set is left out
    (``not_shell_names``)."""
    lines = [f"# {line}" for note in notes for line in note.splitlines()]
    for name in unset:
        if _SHELL_NAME.fullmatch(name):
            lines.append(f"set -e {name};" if shell == "fish" else f"unset {name}")
    for name, value in values.items():
        if not _SHELL_NAME.fullmatch(name):
            continue
        if shell == "fish":  # in fish's single quotes only \\ and \' are escapes; a newline is itself
            quoted = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
            lines.append(f"set -gx {name} {quoted};")
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + ("\n" if lines else "")
