"""Named builds outside the build stage (issue 29, follow-up of area `builds`): `env --build` shows the final
build's environment and `env --build --only NAME` another's, a named build's `cmake:` block reaches that build's
environment (and only its), and doctor judges every build's hazards and install prefixes.

The recipe builds nothing from its source (each build's `inputs` names none), so no sync is needed: each build's
command writes the variables it got into a file of the workspace."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.envelope import error_of, result_of

DUMP = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))"
RECIPE = """\
schema_version: 3
name: envs-demo
platform:
  host: {arch: [x86_64, aarch64, riscv64]}
sources:
  app: {url: "https://example.invalid/app.git", ref: main}
builds:
  framework:
    cwd: "{workdir}"
    argv: ["{python}", -c, "DUMP", framework.json]
    inputs: {sources: []}
    memory_per_job_gb: 1000000
    env: {set: {WHO: framework, MAX_JOBS: "{jobs}"}}
    cmake: {args_env: CMAKE_ARGS, define: {USE_CUDA: "OFF", "CMAKE_INSTALL_PREFIX:PATH": "/proc/sys/no-such-prefix"}}
    hazards:
      - {name: FRAMEWORK_HOME, why: "points the framework's build at another checkout"}
build:
  needs: [framework]
  cwd: "{workdir}"
  argv: ["{python}", -c, "DUMP", compiler.json]
  inputs: {sources: []}
  env: {set: {WHO: compiler}}
""".replace("DUMP", DUMP)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("named-everywhere")
    (root / "envs-demo.yaml").write_text(RECIPE)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    return root


def run(world: Path, ws: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, ["-r", str(world / "envs-demo.yaml"), "-w", str(ws), *args], env=env)


def test_env_build_shows_the_final_build_and_only_names_another(world: Path, tmp_path: Path) -> None:
    python = str(world / "venv/bin/python")
    final = run(world, tmp_path / "ws", "env", "--build", "--json", "--python", python)
    assert final.exit_code == 0, final.stderr
    assert result_of(final.stdout)["set"]["WHO"] == "compiler"
    assert "CMAKE_ARGS" not in result_of(final.stdout)["set"]
    other = run(world, tmp_path / "ws", "env", "--build", "--only", "framework", "--json", "--python", python)
    assert other.exit_code == 0, other.stderr
    shown = result_of(other.stdout)["set"]
    assert shown["WHO"] == "framework"
    assert shown["MAX_JOBS"] == "1"  # its own memory limit, not the final build's
    assert shlex.split(shown["CMAKE_ARGS"]) == ["-DUSE_CUDA=OFF",
                                                "-DCMAKE_INSTALL_PREFIX:PATH=/proc/sys/no-such-prefix"]


def test_env_only_names_a_build_of_the_recipe(world: Path, tmp_path: Path) -> None:
    wrong = run(world, tmp_path / "ws", "env", "--build", "--only", "framwork", "--json")
    assert wrong.exit_code == 2, wrong.stdout
    error = error_of(wrong.stdout)
    assert "no build named 'framwork'" in error["message"] and "framework" in error["message"], error
    alone = run(world, tmp_path / "ws", "env", "--only", "framework", "--json")
    assert alone.exit_code == 2, alone.stdout
    assert "--build" in error_of(alone.stdout)["fix"]


def test_a_named_builds_cmake_block_reaches_its_command_only(world: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    result = run(world, ws, "build", "--ignore-host", "--python", str(world / "venv/bin/python"))
    assert result.exit_code == 0, result.stderr
    framework = json.loads((ws / "framework.json").read_text())
    compiler = json.loads((ws / "compiler.json").read_text())
    assert shlex.split(framework["CMAKE_ARGS"]) == ["-DUSE_CUDA=OFF",
                                                    "-DCMAKE_INSTALL_PREFIX:PATH=/proc/sys/no-such-prefix"]
    assert "CMAKE_ARGS" not in compiler and compiler["WHO"] == "compiler"


def test_doctor_judges_a_named_builds_hazards_and_install_prefix(world: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    result = run(world, ws, "doctor", "--only", "workspace.build-env", "--only", "workspace.install-prefix",
                 "--json", env={"FRAMEWORK_HOME": "/elsewhere"})
    checks = {c["id"]: c for c in result_of(result.stdout)["checks"]}
    hazard = checks["workspace.build-env"]
    assert hazard["status"] == "warn", hazard
    assert "FRAMEWORK_HOME=/elsewhere points the framework's build" in hazard["detail"], hazard
    assert "(build framework)" in hazard["detail"], hazard
    prefix = checks["workspace.install-prefix"]
    assert prefix["status"] == "fail" and "/proc/sys/no-such-prefix is not writable" in prefix["detail"], prefix
