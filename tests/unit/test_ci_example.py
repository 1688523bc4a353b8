"""examples/ci/github-actions.yml: it parses, targets an Arm runner, caches what the README says,
and every flagtree-cpu command and flag it uses exists in this CLI."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from tests.support.envelope import result_of

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "ci" / "github-actions.yml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def run_scripts() -> list[str]:
    return [step["run"] for job in workflow()["jobs"].values() for step in job["steps"] if "run" in step]


MAIN_JOB = "build-and-validate"


def flagtree_cpu_invocations(scripts: list[str] | None = None) -> list[list[str]]:
    """Each `flagtree-cpu ...` command line in the main job's run steps (or in ``scripts``): continuation
    lines joined, up to a pipe or redirection. (The main job's: tests/integration/test_ci_workflow.py runs
    its one `setup`; `workflow_invocations` has every job's.)"""
    found = []
    for script in job_scripts(workflow()["jobs"][MAIN_JOB]) if scripts is None else scripts:
        for line in script.replace("\\\n", " ").splitlines():
            for match in re.finditer(r"(?:^|\$\(|&&|\|\|)\s*(flagtree-cpu\s[^|>)&]*)", line):
                found.append(shlex.split(match.group(1)))
    return found


def job_scripts(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def job_invocations(job: dict) -> list[list[str]]:
    return flagtree_cpu_invocations(job_scripts(job))


def workflow_invocations() -> list[list[str]]:
    """Every job's `flagtree-cpu ...` command lines."""
    return flagtree_cpu_invocations(run_scripts())


def value_after(invocation: list[str], flag: str) -> str:
    """The value of ``flag`` in an invocation (``--flag VALUE`` or ``--flag=VALUE``)."""
    for i, token in enumerate(invocation):
        if token == flag:
            return invocation[i + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    raise AssertionError(f"{' '.join(invocation)}: no {flag}")


def folder(path: str) -> str:
    """A folder as a workflow names it: ``wheelhouse/``, ``./wheelhouse`` and ``wheelhouse`` are one."""
    return path.strip().removeprefix("./").rstrip("/")


def step_using(job: dict, action: str) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses", "").startswith(action + "@")]


def publishing_job() -> tuple[str, dict, list[str]]:
    """(id, job, the `build --publish` invocation) of the one job that publishes a wheelhouse."""
    found = [(name, job, inv) for name, job in workflow()["jobs"].items() for inv in job_invocations(job)
             if inv[1] == "build" and any(t == "--publish" or t.startswith("--publish=") for t in inv)]
    assert len(found) == 1, found
    return found[0]


def installing_job() -> tuple[str, dict, list[str]]:
    """(id, job, the `setup --wheelhouse` invocation) of the one job that installs from it."""
    found = [(name, job, inv) for name, job in workflow()["jobs"].items() for inv in job_invocations(job)
             if inv[1] == "setup" and any(t == "--wheelhouse" or t.startswith("--wheelhouse=") for t in inv)]
    assert len(found) == 1, found
    return found[0]


def help_text(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_the_workflow_parses_and_runs_on_an_arm_runner() -> None:
    document = workflow()
    jobs = list(document["jobs"].values())
    assert jobs and all(job["runs-on"] == "ubuntu-24.04-arm" for job in jobs)
    steps = jobs[0]["steps"]
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache@"))
    assert "~/.cache/flagtree-cpu/downloads" in cache["with"]["path"] and "~/.triton/llvm" in cache["with"]["path"]
    assert "steps.recipe.outputs.digest" in cache["with"]["key"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and "reports/" in upload["with"]["path"]


def test_every_command_and_flag_it_uses_exists() -> None:
    invocations = workflow_invocations()
    assert len(invocations) >= 4, invocations
    assert {inv[1] for inv in invocations} >= {"setup", "build", "recipe", "doctor"}
    global_help = help_text()
    commands = {tuple(inv[1:3]) if inv[1] == "recipe" else (inv[1],) for inv in invocations}
    assert ("setup",) in commands
    for invocation in invocations:
        command = invocation[1:3] if invocation[1] == "recipe" else invocation[1:2]
        own_help = help_text(*command)
        for flag in (token.split("=", 1)[0] for token in invocation if token.startswith("--")):
            assert flag in own_help or flag in global_help, f"{' '.join(invocation)}: no {flag}"


def test_setup_in_ci_is_frozen_hash_checked_and_writes_junit() -> None:
    setup = next(inv for inv in flagtree_cpu_invocations() if inv[1] == "setup")
    assert {"--frozen", "--require-hashes", "--junit"} <= set(setup)
    assert "reports/validate.xml" in setup


def test_the_cache_key_step_reads_a_digest_that_recipe_show_prints() -> None:
    result = CliRunner().invoke(app, ["recipe", "show", "--json"])
    assert result.exit_code == 0, result.output
    digest = result_of(result.stdout)["digest"]
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    step = next(s for s in workflow()["jobs"]["build-and-validate"]["steps"] if s.get("id") == "recipe")
    assert '["digest"]' in step["run"] and "$GITHUB_OUTPUT" in step["run"]


def test_the_main_job_stays_first_and_builds_without_a_wheelhouse() -> None:
    assert list(workflow()["jobs"])[0] == MAIN_JOB
    invocations = flagtree_cpu_invocations()
    assert [inv[1] for inv in invocations].count("setup") == 1  # the one test_ci_workflow.py runs
    assert all("--wheelhouse" not in inv and "--publish" not in inv for inv in invocations)


def test_the_publish_job_publishes_into_the_folder_it_uploads() -> None:
    name, job, build = publishing_job()
    published = folder(value_after(build, "--publish"))
    assert published and "://" not in published  # --publish takes a folder, never a server URL
    assert "matrix" in job.get("strategy", {}), "one publishing job per recipe (a matrix)"
    # the wheel is built from the lock's pins: a frozen setup prepares sources, LLVM and links first
    setup = next(inv for inv in job_invocations(job) if inv[1] == "setup")
    assert {"--frozen", "--skip-build"} <= set(setup)
    uploads = [s for s in step_using(job, "actions/upload-artifact")
               if folder(s["with"]["path"]) == published]
    assert len(uploads) == 1, f"{name}: no upload of {published}/"
    upload = uploads[0]
    assert "${{ matrix." in upload["with"]["name"], "one artifact per matrix job (names must not collide)"
    assert upload["with"].get("if-no-files-found") == "error"
    assert "if" not in upload, "a wheelhouse is uploaded only when the build and publish succeeded"
    steps = job["steps"]
    assert steps.index(upload) > next(i for i, s in enumerate(steps) if "--publish" in s.get("run", ""))


def test_the_install_job_needs_the_publish_job_and_installs_from_its_artifact() -> None:
    publisher, publish_job, _ = publishing_job()
    name, job, setup = installing_job()
    needs = job.get("needs")
    assert publisher in ([needs] if isinstance(needs, str) else needs or []), f"{name} must need {publisher}"
    uploaded = next(s["with"]["name"] for s in step_using(publish_job, "actions/upload-artifact")
                    if "${{ matrix." in s["with"]["name"] and "wheelhouse" in s["with"]["name"])
    downloads = step_using(job, "actions/download-artifact")
    assert len(downloads) == 1, downloads
    download = downloads[0]
    assert download["with"]["name"] == uploaded
    assert folder(download["with"]["path"]) == folder(value_after(setup, "--wheelhouse"))
    # the artifact name's ${{ matrix.* }} must mean the same in both jobs
    assert job["strategy"]["matrix"] == publish_job["strategy"]["matrix"]
    steps = job["steps"]
    assert steps.index(download) < next(i for i, s in enumerate(steps) if "--wheelhouse" in s.get("run", ""))
    # a fresh runner still sets up from the lock and validates what it installed
    assert {"--frozen", "--require-hashes", "--junit"} <= set(setup) and "--skip-validate" not in setup


def test_the_wheelhouse_jobs_install_the_tool_and_cache_like_the_main_job() -> None:
    jobs = workflow()["jobs"]
    main_cache = step_using(jobs[MAIN_JOB], "actions/cache")[0]["with"]
    for name, job, _ in (publishing_job(), installing_job()):
        assert any("pip install" in s.get("run", "") for s in job["steps"]), name
        cache = step_using(job, "actions/cache")
        assert cache and cache[0]["with"] == main_cache, name
        assert job["env"]["FLAGTREE_CPU_LOCK_FILE"], name


# --- current practice (issue 28): pinned current actions, least privilege, no persisted token, fresh apt lists
# The oldest major version of each action the example may use: the first on the node24 runtime (node20 is
# deprecated on GitHub's runners), so an example copied today does not warn on every run.
CURRENT_MAJORS = {"actions/checkout": 5, "actions/setup-python": 6, "actions/cache": 5,
                  "actions/upload-artifact": 6, "actions/download-artifact": 7}
PINNED_USES = re.compile(r"^\s*(?:- )?uses: (?P<action>[\w.-]+/[\w.-]+)@(?P<ref>\S+)(?: +# (?P<comment>.*))?$")


def uses_lines() -> list[re.Match]:
    lines = [line for line in WORKFLOW.read_text().splitlines() if re.match(r"^\s*(?:- )?uses:", line)]
    matches = [PINNED_USES.match(line) for line in lines]
    assert all(matches), [line for line, m in zip(lines, matches, strict=True) if not m]
    return [m for m in matches if m]


def all_steps() -> list[tuple[str, int, dict]]:
    return [(name, i, step) for name, job in workflow()["jobs"].items() for i, step in enumerate(job["steps"])]


def test_every_action_is_pinned_by_commit_with_its_current_version_named() -> None:
    found = uses_lines()
    assert {m["action"] for m in found} == set(CURRENT_MAJORS), "a new action needs its minimum major here"
    for m in found:
        where = m.group(0).strip()
        assert re.fullmatch(r"[0-9a-f]{40}", m["ref"]), f"{where}: pin a full commit id, not a tag (a tag can move)"
        version = re.fullmatch(r"v(\d+)\.\d+\.\d+", m["comment"] or "")
        assert version, f"{where}: name the release the commit is, as `# vX.Y.Z` (update tools read it)"
        assert int(version[1]) >= CURRENT_MAJORS[m["action"]], f"{where}: older than the node24 releases"


def test_the_token_may_only_read_and_is_not_left_in_the_checkout() -> None:
    document = workflow()
    assert document.get("permissions") == {"contents": "read"}, "top-level `permissions: contents: read`"
    for name, job in document["jobs"].items():
        assert job.get("permissions", {"contents": "read"}) == {"contents": "read"}, name
    checkouts = [(name, step) for name, _, step in all_steps() if step.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == len(document["jobs"])
    for name, step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, f"{name}: checkout keeps the token"


def test_apt_lists_are_refreshed_before_system_packages_are_installed() -> None:
    for name, job in workflow()["jobs"].items():
        runs = [step.get("run", "") for step in job["steps"]]
        installs = [i for i, run in enumerate(runs) if "--install-system-packages" in run]
        for i in installs:
            assert any(re.search(r"\bapt-get update\b", run) for run in runs[:i]), \
                f"{name}: step {i} installs apt packages from lists no step refreshed"
