"""examples/ci/github-actions.yml run for real, as far as this x86_64 machine can: the lock file made once
and committed where the workflow reads it, then the workflow's own commands against the git world and
the loopback HTTP server, with the environment the workflow sets."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.cli import new_workspace
from tests.support.envelope import result_of
from tests.support.gitworld import GitWorld
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.unit.test_ci_example import flagtree_cpu_invocations, workflow

TOOL = [sys.executable, "-m", "flagtree_cpu_build"]


def test_the_workflow_commands_build_from_the_committed_lock(world: GitWorld, tmp_path: Path,
                                                             http_server: LoopbackHTTPServer) -> None:
    tarball = llvm_tarball()
    url = http_server.serve(f"/public/llvm-builds/{TOP}.tar.gz", tarball.data)
    repo = tmp_path / "repo"  # the repository that keeps the workflow and the lock file
    committed = repo / "ci" / "flagtree-cpu.lock.yaml"
    dev = new_workspace(world, tmp_path / "dev-ws", always_set=(f"artifacts.llvm.url={url}",))

    # once, on a developer's machine: the header's command makes the lock where the workflow reads it
    made = subprocess.run([*TOOL, *dev.argv("--lock-file", str(committed), "setup", "--skip-build")],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    lock = committed.read_text()
    assert "flagtree-cpu:" in lock and "sha256:" in lock  # main resolved, the LLVM digest recorded
    assert not (dev.root / ".flagtree-cpu" / "lock.yaml").exists()

    # the CI job: a fresh workdir, the environment of the workflow's job
    job_env = workflow()["jobs"]["build-and-validate"]["env"]
    assert job_env["FLAGTREE_CPU_LOCK_FILE"].endswith("/ci/flagtree-cpu.lock.yaml")
    runner = new_workspace(world, tmp_path / "runner-ws", always_set=(f"artifacts.llvm.url={url}",))
    env = {**os.environ, "FLAGTREE_CPU_LOCK_FILE": str(committed), "FLAGTREE_CPU_WORKDIR": str(runner.root)}
    [setup] = [inv for inv in flagtree_cpu_invocations() if inv[1] == "setup"]
    # this machine cannot build (x86_64) or run apt-get: everything else is the workflow's command as written
    argv = [a for a in setup[1:] if a != "--install-system-packages"] + ["--skip-build"]
    (repo / "reports").mkdir(parents=True)
    result = subprocess.run([*TOOL, "--set", f"sources.flagtree.commit={runner.flagtree_commit}", "--set",
                             f"artifacts.llvm.url={url}", *argv], capture_output=True, text=True, env=env,
                            cwd=repo, timeout=300)
    assert result.returncode == 0, result.stderr
    report = result_of(result.stdout)
    assert report["ok"] is True and report["artifacts"]["llvm"]["sha256"] == tarball.sha256
    assert committed.read_text() == lock, "--frozen must never write the committed lock"
    junit = ET.parse(repo / "reports" / "validate.xml").getroot()
    assert junit.find(".//skipped") is not None  # the upload step always finds the file

    doctor = subprocess.run([*TOOL, "doctor", "--json", "--offline"], capture_output=True, text=True, env=env,
                            cwd=repo, timeout=120)
    assert result_of(doctor.stdout)["schema"] == "flagtree-cpu/doctor/v1"
