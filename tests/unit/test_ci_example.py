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


def flagtree_cpu_invocations() -> list[list[str]]:
    """Each `flagtree-cpu ...` command line in the run: scripts, continuation lines joined, up to a
    pipe or redirection."""
    found = []
    for script in run_scripts():
        for line in script.replace("\\\n", " ").splitlines():
            for match in re.finditer(r"(?:^|\$\(|&&|\|\|)\s*(flagtree-cpu\s[^|>)&]*)", line):
                found.append(shlex.split(match.group(1)))
    return found


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
    invocations = flagtree_cpu_invocations()
    assert len(invocations) >= 4, invocations
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
