"""The recipe's steps around the build, wheel-only builds, cross recipes and pre-provisioned toolchains,
on the fixture FlagTree (whose setup.py records every run)."""

from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path

import pytest

from flagtree_cpu_build.build_stamp import say
from flagtree_cpu_build.context import ContextRequest, open_context
from flagtree_cpu_build.stagekit.stage import RunOptions
from flagtree_cpu_build.stages.build.plan import judge, plan_build
from flagtree_cpu_build.ui import UI
from tests.integration.test_build import BuildWorkspace, bws  # noqa: F401  (the fixture)

# A step command: appends what it saw to the fixture's build record (so the record shows the order of
# steps and setup.py runs) and, with a second argument, writes that file in its folder.
STEP_SCRIPT = """\
import json, os, sys, time
with open(os.environ["FIXTURE_BUILD_RECORD"], "a", encoding="utf-8") as out:
    out.write(json.dumps({"argv": [sys.argv[0], "step:" + sys.argv[1]], "cwd": os.getcwd(),
                          "env": dict(os.environ), "time": time.time()}) + "\\n")
print("step", sys.argv[1], "ran")
if len(sys.argv) > 2:
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        out.write("prepared\\n")
"""
FAIL_SCRIPT = """\
import sys
print("writing the generated header")
print("OSError: [Errno 28] No space left on device: 'gen/header.h'")
sys.exit(3)
"""


@pytest.fixture
def step_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "steps"
    folder.mkdir()
    (folder / "step.py").write_text(STEP_SCRIPT)
    (folder / "fail.py").write_text(FAIL_SCRIPT)
    (folder / "config").mkdir()
    (folder / "config" / "input.txt").write_text("first\n")
    return folder


def two_steps(folder: Path, *, first_command: str = "['{python}', step.py, prepare, prepared.txt]") -> str:
    """A pre-build step that writes prepared.txt (its input: config/*.txt) and a post-install step with
    an env of its own."""
    return (f"steps=[{{name: prepare, phase: pre-build, cwd: '{folder}', run: [{first_command}], "
            f"inputs: ['config/*.txt'], creates: [prepared.txt]}}, "
            f"{{name: record-env, phase: post-install, cwd: '{folder}', run: [['{{python}}', step.py, record-env]], "
            f"env: {{set: {{STEP_GREETING: hello}}, prepend: {{PATH: ['{folder}/bin']}}}}}}]")


def step_records(workspace: BuildWorkspace) -> list[str]:
    """The runs in order: step:NAME for a step, setup.py's command for a build."""
    names = []
    for record in workspace.records():
        argv = record["argv"]
        if argv[1].startswith("step:"):
            names.append(argv[1])
        elif {"editable_wheel", "bdist_wheel"} & set(argv[1:]):
            names.append("build")
    return names


def freshness(workspace: BuildWorkspace, sets: tuple[str, ...]) -> list[str]:
    """What status and `setup --dry-run` say about the build (why it would run; empty: up to date)."""
    argv = workspace.ws.argv(sets=sets)
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    ctx = open_context(ContextRequest(recipe="flagtree-cpu-arm64", overrides=tuple(overrides),
                                      workdir=str(workspace.ws.root), python=workspace.python), UI())
    reasons = [say(r) for r in judge(ctx, workspace.python).reasons]
    [plan] = plan_build(ctx, RunOptions(python=workspace.python), [])
    assert plan.current == (not reasons), (plan, reasons)  # the plan reads the same stamp
    return reasons


def test_steps_run_before_and_after_the_build_with_their_logs_and_env(bws: BuildWorkspace,  # noqa: F811
                                                                      step_dir: Path) -> None:
    result = bws.build(sets=(two_steps(step_dir),))
    assert result.exit_code == 0, result.stderr
    assert step_records(bws) == ["step:prepare", "build", "step:record-env"]
    assert (step_dir / "prepared.txt").read_text() == "prepared\n"
    assert "step prepare (pre-build): + " in result.stderr and "step record-env (post-install): + " in result.stderr
    logs = bws.ws.root / "logs"
    [prepare_log] = logs.glob("step-prepare-*.log")
    [record_log] = logs.glob("step-record-env-*.log")
    assert "step prepare ran" in prepare_log.read_text() and "# exit status 0" in prepare_log.read_text()
    assert f"# cwd: {step_dir}" in record_log.read_text()
    # the post-install step: the build environment plus its own changes
    [post] = [r for r in bws.records() if r["argv"][1] == "step:record-env"]
    [build] = [r for r in bws.records() if "editable_wheel" in r["argv"]]
    assert post["env"]["STEP_GREETING"] == "hello" and "STEP_GREETING" not in build["env"]
    assert post["env"]["FLAGTREE_BACKEND"] == "cpu" and post["env"]["LLVM_SYSPATH"] == build["env"]["LLVM_SYSPATH"]
    # the step's entry, behind the target interpreter's bin (which leads every build environment)
    assert post["env"]["PATH"].split(":")[:2] == [str(bws.python.parent), f"{step_dir}/bin"]
    assert post["cwd"] == str(step_dir)
    stamp = json.loads((bws.ws.root / ".flagtree-cpu" / "build-editable.json").read_text())
    assert list(stamp["components"]["steps"]) == ["prepare", "record-env"]


def test_an_unchanged_build_with_steps_runs_nothing_and_a_changed_input_runs_again(
        bws: BuildWorkspace, step_dir: Path) -> None:  # noqa: F811
    sets = (two_steps(step_dir),)
    assert bws.build(sets=sets).exit_code == 0
    again = bws.build(sets=sets)
    assert again.exit_code == 0 and "up to date" in again.stderr
    assert step_records(bws) == ["step:prepare", "build", "step:record-env"]
    assert freshness(bws, sets) == []
    (step_dir / "config" / "input.txt").write_text("second\n")
    assert [r.split(":")[0] for r in freshness(bws, sets)] == ["steps.prepare.inputs changed"]
    changed = bws.build(sets=sets)
    assert changed.exit_code == 0, changed.stderr
    assert "steps.prepare.inputs changed" in changed.stderr
    assert step_records(bws) == ["step:prepare", "build", "step:record-env"] * 2
    # a file a step creates that is gone: the build is stale, as with a missing product
    (step_dir / "prepared.txt").unlink()
    assert freshness(bws, sets) == ["what the steps create is missing: step prepare: prepared.txt"]
    recreated = bws.build(sets=sets)
    assert recreated.exit_code == 0 and "what the steps create is missing: step prepare: prepared.txt" in \
        recreated.stderr
    assert (step_dir / "prepared.txt").exists() and len(step_records(bws)) == 9
    # and a changed command is a changed step
    edited = bws.build(sets=(two_steps(step_dir, first_command="['{python}', step.py, prepare, prepared.txt, x]"),))
    assert edited.exit_code == 0 and "steps.prepare.run changed" in edited.stderr


def test_a_step_whose_verify_mark_is_not_left_fails_the_build_and_writes_no_stamp(
        bws: BuildWorkspace, step_dir: Path) -> None:  # noqa: F811
    """A post-install step that ran without error but did not leave its mark (a patch script that found no
    pattern) is a failed build; a mark it does leave keeps the build up to date."""
    mark = "{distribution: pybind11, file: pybind11/__init__.py, contains: %s}"
    step = (f"steps=[{{name: patch, phase: post-install, cwd: '{step_dir}', run: [['{{python}}', step.py, patch]], "
            f"verify: [{mark}]}}]")
    failed = bws.build(sets=(step % "NEVER-IN-PYBIND11",))
    assert failed.exit_code == 5, failed.stderr
    assert "the steps ran, but what they should have left is not there" in failed.stderr
    assert "step patch: pybind11's pybind11/__init__.py does not hold 'NEVER-IN-PYBIND11'" in failed.stderr
    assert not (bws.ws.root / ".flagtree-cpu" / "build-editable.json").exists()
    held = step % "__version__"  # pybind11/__init__.py holds it: the mark is there
    assert bws.build(sets=(held,)).exit_code == 0
    assert "up to date" in bws.build(sets=(held,)).stderr and freshness(bws, (held,)) == []


def test_a_failing_step_stops_the_build_and_names_itself(bws: BuildWorkspace, step_dir: Path) -> None:  # noqa: F811
    result = bws.build(sets=(two_steps(step_dir, first_command="['{python}', fail.py]"),))
    assert result.exit_code == 5
    assert "step prepare (pre-build) failed running" in result.stderr and "fail.py" in result.stderr
    assert "exit status 3" in result.stderr
    [log] = (bws.ws.root / "logs").glob("step-prepare-*.log")
    assert f"log: {log}" in result.stderr
    assert "cause: the disk is full" in result.stderr  # diagnosed from the step's log
    assert step_records(bws) == []  # the build command never ran
    assert not (bws.ws.root / ".flagtree-cpu" / "build-editable.json").exists()


def test_a_wheel_only_recipe_builds_a_wheel_and_installs_nothing(bws: BuildWorkspace,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    sets = ("build.mode=wheel-only", "build.argv=[]")
    result = bws.build(sets=sets)
    assert result.exit_code == 0, result.stderr
    [wheel] = (bws.ws.root / "dist").glob("triton-3.3.0-*.whl")  # {wheel_dir}'s default
    assert f"wheel:  {wheel}" in result.stderr
    assert step_records(bws) == ["build"] and any("bdist_wheel" in r["argv"] for r in bws.records())
    state = bws.ws.root / ".flagtree-cpu"
    assert (state / "build-wheel.json").exists() and not (state / "build-editable.json").exists()
    # no editable install: triton is not importable from the target interpreter ...
    probe = subprocess.run([str(bws.python), "-c", "import triton"], capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode != 0
    # ... and that is not a reason to build again (`distribution` is an editable build's)
    again = bws.build(sets=sets)
    assert again.exit_code == 0 and "up to date" in again.stderr and f"wheel:  {wheel}" in again.stderr
    assert freshness(bws, sets) == []  # status and setup read the wheel stamp too
    wheel.unlink()
    gone = bws.build(sets=sets)
    assert gone.exit_code == 0 and "is gone" in gone.stderr and wheel.exists()


def test_a_cross_recipe_builds_on_its_host_without_ignore_host(bws: BuildWorkspace) -> None:  # noqa: F811
    here = platform.machine()
    target = "x86_64" if here == "riscv64" else "riscv64"
    # a cross recipe asks of its host's compiler what that host's build adds: not FlagTree's aarch64 -march
    # (build checks the host's compiler first, as setup's preflight does)
    sets = (f"platform.host.arch=[{here}]", f"platform.target.arch={target}", "platform.host.requires.compilers=[]")
    result = bws.ws.run("build", "--python", str(bws.python), sets=sets)
    assert result.exit_code == 0, result.stderr
    assert step_records(bws) == ["build"]


def test_a_missing_toolchain_refuses_the_build_with_its_path_and_variant(
        bws: BuildWorkspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    sets = ("variants={cuda: {description: the CUDA build}}", "variant=cuda",
            "toolchains={cuda: {path: /nonexistent/cuda-12.4, expect: [bin/nvcc], fix: install the CUDA toolkit, "
            "env: {set: {CUDA_HOME: '{toolchains.cuda.path}'}}, when: {variant: [cuda]}}}")
    refused = bws.build(sets=sets)
    assert refused.exit_code == 5
    assert "toolchain cuda (variant cuda): /nonexistent/cuda-12.4 is missing" in refused.stderr
    assert "FLAGTREE_CPU_TOOLCHAIN_CUDA" in refused.stderr and "nothing was run" in refused.stderr
    assert bws.records() == []
    # this host's copy, elsewhere: the per-host variable points at it, and its env reaches the build
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text("")
    monkeypatch.setenv("FLAGTREE_CPU_TOOLCHAIN_CUDA", str(cuda))
    built = bws.build(sets=sets)
    assert built.exit_code == 0, built.stderr
    [entry] = [r for r in bws.build_records() if "editable_wheel" in r["argv"]]
    assert entry["env"]["CUDA_HOME"] == str(cuda)
