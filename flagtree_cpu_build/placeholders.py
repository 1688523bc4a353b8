"""The values of a recipe's placeholders (``{workdir}``, ``{python}``, ``{jobs}`` ...) in one workspace,
on one host.

It sits next to the recipe, above ``workspace``: the workspace says where things live and knows
nothing of recipes; this module reads both (and the host's cores and memory, for the job counts)
to fill in what ``recipe.resolve`` substitutes. The catalog of names and their meanings is
``recipe``'s ``PLACEHOLDERS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .buildenv import compute_jobs
from .host import HostFacts
from .recipe import Recipe
from .workspace import Workspace, home_dir, target_python, triton_home, user_cache_dir


def placeholder_values(
    recipe: Recipe,
    ws: Workspace,
    host: HostFacts,
    environ: Mapping[str, str],
    *,
    jobs: int | None = None,
    python: Path | None = None,
    wheel_dir: Path | None = None,
) -> dict[str, str]:
    """Values for recipe.PLACEHOLDERS in this workspace, on this host."""
    build = recipe.build
    counts = compute_jobs(
        host.cpu_count,
        host.mem_available,
        build.memory_per_job_gb if build else 2.0,
        build.memory_per_link_job_gb if build else 4.0,
        cores_per_job=build.cores_per_job if build else None,
    )
    job_count = jobs if jobs is not None else counts.jobs
    return {
        "workdir": str(ws.root),
        "home": str(home_dir(environ)),
        "triton_home": str(triton_home(environ)),
        "state_dir": str(ws.state_dir),
        "logs_dir": str(ws.logs_dir),
        "cache_dir": str(user_cache_dir(environ)),
        "empty_dir": str(ws.empty_dir),
        "python": str(python or target_python(ws, environ)),
        "jobs": str(job_count),
        "link_jobs": str(min(counts.link_jobs, job_count)),
        "arch": host.arch,
        "host.arch": host.arch,
        "target.arch": recipe.target_arch(host.arch),
        "variant": recipe.variant or "",
        "wheel_dir": str(wheel_dir or ws.root / "dist"),
    }
