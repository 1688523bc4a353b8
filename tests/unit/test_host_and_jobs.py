"""Host facts from file snapshots, and the jobs formula."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.buildenv import GIB, compute_jobs
from flagtree_cpu_build.host import parse_meminfo, parse_os_release, read_host

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"


def test_os_release_values_are_unquoted() -> None:
    parsed = parse_os_release('ID="almalinux"\nVERSION_ID=\'9.4\'\n# comment\nNAME=AlmaLinux\nbroken line\n')
    assert parsed == {"ID": "almalinux", "VERSION_ID": "9.4", "NAME": "AlmaLinux"}


def test_meminfo_kilobytes_become_bytes() -> None:
    parsed = parse_meminfo("MemTotal:  1024 kB\nHugePages_Total:   0\nnonsense\n")
    assert parsed == {"MemTotal": 1024 * 1024, "HugePages_Total": 0}


@pytest.mark.parametrize("snapshot, os_id, arch, cpus, available_gib", [
    ("cix-p1-biglittle", "ubuntu", "aarch64", 12, 26.62),
    ("graviton3-neoverse-v1", "ubuntu", "aarch64", 4, 6.67),
    ("x86_64-debian", "debian", "x86_64", 2, 19.18),
    ("almalinux-9-aarch64", "almalinux", "aarch64", 4, 5.0),
])
def test_read_host_from_a_snapshot(snapshot: str, os_id: str, arch: str, cpus: int,
                                   available_gib: float | None) -> None:
    facts = read_host(HOSTS / snapshot)
    assert (facts.os_id, facts.arch, facts.cpu_count) == (os_id, arch, cpus)
    if available_gib is None:
        assert facts.mem_available is None
    else:
        assert facts.mem_available / GIB == pytest.approx(available_gib, abs=0.01)


def test_read_host_without_files_is_not_an_error(tmp_path: Path) -> None:
    facts = read_host(tmp_path)
    assert (facts.os_id, facts.mem_available) == ("", None)


@pytest.mark.parametrize("cores, gib, expected, limit", [
    (12, 32, (12, 8), "CPUs"),       # a big board: every core, 8 link jobs at 4 GB
    (12, 8, (4, 2), "memory"),       # 8 GiB at 2 GB per job: memory limits it to 4
    (8, 1.5, (1, 1), "memory"),      # too little memory still builds, one job at a time
    (1, 64, (1, 1), "CPUs"),
])
def test_jobs_from_cores_and_memory(cores: int, gib: float, expected: tuple[int, int], limit: str) -> None:
    counts = compute_jobs(cores, int(gib * GIB), 2.0, 4.0)
    assert (counts.jobs, counts.link_jobs) == expected
    assert f"limited by {limit}" in counts.reason


def test_jobs_with_unknown_memory_use_cores_and_one_link_job() -> None:
    counts = compute_jobs(6, None, 2.0, 4.0)
    assert (counts.jobs, counts.link_jobs) == (6, 1)


@pytest.mark.parametrize("cores, gib, per_core, expected, limit", [
    (12, 64, 3, 4, "CPUs per job"),   # a "cores / 3" project on a big box: 4 jobs, not 12
    (12, 6, 3, 3, "memory"),          # memory is the smaller limit: it wins
    (2, 64, 3, 1, "CPUs per job"),    # fewer cores than one job wants still builds, one job
    (8, 64, 0.5, 8, "CPUs"),          # a fraction never raises jobs above the cores
])
def test_cores_per_job_limits_jobs_and_the_smaller_limit_wins(cores: int, gib: float, per_core: float,
                                                              expected: int, limit: str) -> None:
    counts = compute_jobs(cores, int(gib * GIB), 2.0, 4.0, cores_per_job=per_core)
    assert counts.jobs == expected
    assert f"limited by {limit}" in counts.reason


def test_cores_per_job_limits_jobs_when_memory_is_unknown() -> None:
    assert compute_jobs(12, None, 2.0, 4.0, cores_per_job=3).jobs == 4


def test_the_jobs_placeholder_follows_cores_per_job(tmp_path: Path) -> None:
    from flagtree_cpu_build.placeholders import placeholder_values
    from flagtree_cpu_build.recipe.files import parse_recipe
    from flagtree_cpu_build.workspace import Workspace

    recipe = parse_recipe(JOBS_RECIPE, "r.yaml")
    host = read_host(HOSTS / "cix-p1-biglittle")  # 12 CPUs, 26.6 GiB available
    values = placeholder_values(recipe, Workspace(tmp_path / "ws"), host, {"HOME": str(tmp_path)})
    assert values["jobs"] == "4"


def test_a_cores_per_job_of_zero_is_a_located_problem() -> None:
    from flagtree_cpu_build.errors import RecipeError
    from flagtree_cpu_build.recipe.files import parse_recipe

    with pytest.raises(RecipeError) as info:
        parse_recipe(JOBS_RECIPE.replace("cores_per_job: 3", "cores_per_job: 0"), "r.yaml")
    [problem] = info.value.problems
    assert (problem.key, problem.line) == ("build.cores_per_job", 13)
    assert "must be more than 0" in problem.message


JOBS_RECIPE = """\
schema_version: 3
name: per-core
platform:
  host:
    arch: [aarch64]
sources:
  main:
    url: https://example.invalid/main.git
    ref: main
build:
  cwd: "{sources.main.path}"
  argv: [make, "-j{jobs}"]
  cores_per_job: 3
"""
