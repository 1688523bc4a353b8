"""The values of a recipe's placeholders (``{workdir}``, ``{python}``, ``{jobs}`` ...) in one workspace,
on one host.

It sits next to the recipe, above ``workspace``: the workspace says where things live and knows
nothing of recipes; this module reads both (and the host's cores and memory, for the job counts)
to fill in what ``recipe.resolve`` substitutes. The catalog of names and their meanings is
``recipe``'s ``PLACEHOLDERS``.
"""

from __future__ import annotations

import functools
import re
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .buildenv import compute_jobs
from .errors import BuildError
from .host import HostFacts
from .recipe import BuildSpec, Recipe
from .recipe.builds import final_build, named_builds
from .recipe.interpolated import iter_interpolated
from .workspace import Workspace, home_dir, target_python, triton_home, user_cache_dir

# what setuptools and Triton's setup.py name build folders by: sysconfig.get_python_version(),
# sys.implementation.name, sysconfig.get_platform() (build/cmake.linux-x86_64-cpython-3.11)
_TAGS_SCRIPT = ("import sys, sysconfig\nprint(sysconfig.get_python_version())\nprint(sys.implementation.name)\n"
                "print(sysconfig.get_platform())")
_TAGS_TIMEOUT_S = 30.0
_IMPLEMENTATIONS = {"cpython": "cp", "pypy": "pp", "ironpython": "ip", "jython": "jy"}  # packaging.tags' names
COMPUTED = ("python.version", "python.tag", "platform.tag")


@dataclass(frozen=True)
class InterpreterTags:
    version: str  # 3.11
    tag: str  # cp311
    platform: str  # linux-x86_64

    def values(self) -> dict[str, str]:
        return dict(zip(COMPUTED, (self.version, self.tag, self.platform), strict=True))


def parse_tags(answer: str) -> InterpreterTags | None:
    """The interpreter's three lines as tags; None when they are not what an interpreter says."""
    lines = answer.splitlines()
    if len(lines) != 3:
        return None
    version, name, platform = (line.strip() for line in lines)
    if not (re.fullmatch(r"\d+\.\d+", version) and re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name)
            and re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", platform)):
        return None
    return InterpreterTags(version, _IMPLEMENTATIONS.get(name, name) + version.replace(".", ""), platform)


def running_tags() -> InterpreterTags:
    """This process's own interpreter: the one the workspace venv is made from."""
    tags = parse_tags(f"{sysconfig.get_python_version()}\n{sys.implementation.name}\n{sysconfig.get_platform()}")
    assert tags is not None
    return tags


def interpreter_tags(python: Path) -> InterpreterTags:
    """The target interpreter's tags, asked of it; before it exists (the workspace venv `setup` makes from the
    running interpreter, or a --python the python stage refuses), the running interpreter's."""
    try:
        stat = python.stat()
    except OSError:
        return running_tags()
    return _asked(str(python), stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _asked(python: str, _mtime_ns: int) -> InterpreterTags:
    import os

    from .proc import capture_capped

    fix = f"run `{python} -c 'import sysconfig; print(sysconfig.get_platform())'` to see why, or pass --python"
    what = "({python.version}, {python.tag}, {platform.tag})"
    try:  # capped and timed: whatever sits at the interpreter's path answers no more than three short lines
        answer = capture_capped([python, "-I", "-S", "-c", _TAGS_SCRIPT], env=os.environ, cwd=None,
                                timeout_s=_TAGS_TIMEOUT_S, limit=1024)
    except OSError as exc:
        raise BuildError(f"{python} cannot run to say its version and platform {what}: {exc.strerror or exc}",
                         fix=fix) from None
    if answer.timed_out or answer.over_limit:
        how = f"within {_TAGS_TIMEOUT_S:g} s" if answer.timed_out else "in three short lines"
        raise BuildError(f"{python} did not say its version and platform {how} {what}", fix=fix)
    tags = parse_tags(answer.stdout.decode("utf-8", "replace")) if answer.returncode == 0 else None
    if tags is None:
        lines = answer.stderr_tail.strip().splitlines() or answer.stdout.decode("utf-8", "replace").strip().splitlines()
        said = (lines or [""])[-1][:200]
        raise BuildError(f"{python} did not say its version and platform {what}: exit status {answer.returncode}"
                         + (f", {said!r}" if said else ""), fix=fix)
    return tags


def uses_computed(recipe: Recipe) -> bool:
    """Whether a field of the recipe names a computed placeholder (only then is the interpreter asked)."""
    return any(f"{{{name}}}" in text for _path, text in iter_interpolated(recipe) for name in COMPUTED)


def build_jobs(recipe: Recipe, host: HostFacts, jobs: int | None = None,
               farm_slots: int = 0) -> dict[str, tuple[int, int]]:
    """Each build's compile and link job counts on this host, from its own memory limits (``jobs``: --jobs, which
    holds for every build; the link jobs stay within the build's own link limit). A compile farm in use adds its
    ``farm_slots`` to the compile jobs: those compile elsewhere; links stay here."""
    return {name: _jobs_of(build, host, jobs, farm_slots) for name, build in named_builds(recipe).items()}


def _jobs_of(build: BuildSpec | None, host: HostFacts, jobs: int | None, farm_slots: int = 0) -> tuple[int, int]:
    counts = compute_jobs(host.cpu_count, host.mem_available, build.memory_per_job_gb if build else 2.0,
                          build.memory_per_link_job_gb if build else 4.0,
                          cores_per_job=build.cores_per_job if build else None)
    job_count = jobs if jobs is not None else counts.jobs
    return job_count + farm_slots, min(counts.link_jobs, job_count)


def placeholder_values(
    recipe: Recipe,
    ws: Workspace,
    host: HostFacts,
    environ: Mapping[str, str],
    *,
    jobs: int | None = None,
    python: Path | None = None,
    wheel_dir: Path | None = None,
    farm_slots: int = 0,
) -> dict[str, str]:
    """Values for recipe.PLACEHOLDERS in this workspace, on this host; {jobs} and {link_jobs} are the final build's
    (the recipe's steps and checks run around it), and each named build's own are under ``builds.NAME.jobs`` and
    ``builds.NAME.link_jobs`` (``recipe.resolve`` fills them into that build's fields)."""
    per_build = build_jobs(recipe, host, jobs, farm_slots)
    final = final_build(recipe)
    job_count, link_jobs = per_build[final] if final is not None else _jobs_of(None, host, jobs, farm_slots)
    target = python or target_python(ws, environ)
    tags = interpreter_tags(target) if uses_computed(recipe) else running_tags()
    return {
        **tags.values(),
        "workdir": str(ws.root),
        "home": str(home_dir(environ)),
        "triton_home": str(triton_home(environ)),
        "state_dir": str(ws.state_dir),
        "logs_dir": str(ws.logs_dir),
        "cache_dir": str(user_cache_dir(environ)),
        "empty_dir": str(ws.empty_dir),
        "python": str(target),
        "jobs": str(job_count),
        "link_jobs": str(link_jobs),
        **{f"builds.{name}.{key}": str(n) for name, counts in per_build.items()
           for key, n in zip(("jobs", "link_jobs"), counts, strict=True)},
        "arch": host.arch,
        "host.arch": host.arch,
        "target.arch": recipe.target_arch(host.arch),
        "variant": recipe.variant or "",
        "wheel_dir": str(wheel_dir or ws.root / "dist"),
    }
