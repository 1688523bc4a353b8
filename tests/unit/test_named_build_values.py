"""Named builds in the placeholders (issue 29, follow-up of area `builds`): `{jobs}` and `{link_jobs}` in a build's
fields come from that build's own limits (`memory_per_job_gb`, `memory_per_link_job_gb`), not from `build:`'s; the
recipe-wide ones (steps, checks) are the final build's."""

from __future__ import annotations

from pathlib import Path

from flagtree_cpu_build.host import HostFacts
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve
from flagtree_cpu_build.recipe.files import parse_recipe
from flagtree_cpu_build.workspace import Workspace

HOST = HostFacts("linux", "x86_64", "ubuntu", "22.04", "Ubuntu", 8, 32 * 2**30, 16 * 2**30)
RECIPE = """\
schema_version: 3
name: jobs-demo
platform:
  host: {arch: [x86_64, aarch64]}
sources:
  app: {url: "https://example.invalid/app.git", ref: main}
builds:
  framework:
    cwd: "{workdir}"
    argv: [make, "-j{jobs}"]
    memory_per_job_gb: 8
    memory_per_link_job_gb: 16
    env: {set: {MAX_JOBS: "{jobs}", LINK_JOBS: "{link_jobs}"}}
build:
  needs: [framework]
  cwd: "{workdir}"
  argv: [make, "-j{jobs}"]
  env: {set: {MAX_JOBS: "{jobs}", LINK_JOBS: "{link_jobs}"}}
checks:
  - {name: jobs, argv: [echo, "{jobs}"]}
"""


def _resolved(tmp_path: Path, jobs: int | None = None):
    ws = Workspace(tmp_path / "ws")
    recipe = parse_recipe(RECIPE, "t.yaml")
    return resolve(recipe, ws.root, placeholder_values(recipe, ws, HOST, {"HOME": str(tmp_path)}, jobs=jobs), {})


def test_a_named_builds_jobs_come_from_its_own_memory_limits(tmp_path: Path) -> None:
    recipe = _resolved(tmp_path)
    framework = recipe.builds["framework"]
    assert framework.env.set == {"MAX_JOBS": "2", "LINK_JOBS": "1"}  # 16 GiB at 8 GB a job, 16 GB a link job
    assert framework.argv == ("make", "-j2")
    assert recipe.build.env.set == {"MAX_JOBS": "8", "LINK_JOBS": "4"}  # the defaults: 2 GB, 4 GB
    assert recipe.checks[0].argv == ("echo", "8")  # recipe-wide: the final build's


def test_jobs_given_on_the_command_line_hold_for_every_build(tmp_path: Path) -> None:
    recipe = _resolved(tmp_path, jobs=3)
    assert recipe.builds["framework"].env.set["MAX_JOBS"] == "3"
    assert recipe.build.env.set["MAX_JOBS"] == "3"
    assert recipe.builds["framework"].env.set["LINK_JOBS"] == "1"  # its own link limit still applies


def test_with_only_named_builds_the_final_ones_limits_are_the_recipes(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    text = RECIPE.replace("build:\n  needs: [framework]", "  compiler:\n    needs: [framework]").replace(
        "\n  cwd: \"{workdir}\"\n  argv: [make, \"-j{jobs}\"]\n  env: {set: {MAX_JOBS: \"{jobs}\", LINK_JOBS: "
        "\"{link_jobs}\"}}\ncheck", "\n    cwd: \"{workdir}\"\n    argv: [make]\n    memory_per_job_gb: 4\ncheck")
    recipe = parse_recipe(text, "t.yaml")
    assert list(recipe.builds) == ["framework", "compiler"], text
    values = placeholder_values(recipe, ws, HOST, {"HOME": str(tmp_path)})
    assert values["jobs"] == "4"  # 16 GiB at compiler's 4 GB a job
    assert resolve(recipe, ws.root, values, {}).checks[0].argv == ("echo", "4")
