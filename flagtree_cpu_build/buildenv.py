"""PURE: the build and run environments, computed from recipe + host facts + paths.

Nothing here reads the machine or starts processes; callers pass the facts in, so every
rule is unit-tested with plain numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

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
