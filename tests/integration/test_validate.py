"""`flagtree-cpu validate` end to end: the bundled recipe's checks (the flagtree presets) run in a real
target interpreter.

The target is the fixture FlagTree, synced, linked and built by the tool itself into a venv that
also has torch and numpy; its triton package (tests/fixtures/projects/flagtree-base/python/triton)
runs @triton.jit kernels eagerly and fails the ways a broken FlagTree does, chosen with
FIXTURE_TRITON_MODE. The kernels, the subprocesses, the timeouts and the signals are all real.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import Result

from tests.support.cli import Workspace, new_workspace
from tests.support.envelope import result_of
from tests.support.fixes import without_context
from tests.support.gitworld import GitWorld
from tests.support.hermetic import make_hermetic
from tests.support.httpserver import LoopbackHTTPServer
from tests.support.tarballs import TOP, llvm_tarball
from tests.support.venvs import PREREQUISITES, TOOLS, build_venv, site_packages, tiny_wheel

# torch as this test machine has it; the bundled recipe pins the version FlagTree was validated with
RUNTIME = "python.runtime=[torch>=2.0, numpy]"
EVERY_KERNEL = ["prerequisites", "backend", "tle-rms-norm", "vector-add", "softmax", "decode-e2e"]


@dataclass
class Built:
    ws: Workspace
    python: Path  # the venv the fixture FlagTree was built into, with torch and numpy

    def validate(self, *args: str, sets: tuple[str, ...] = ()) -> Result:
        return self.ws.run("validate", "--python", str(self.python), *args, sets=sets)


@pytest.fixture(scope="module")
def built(git_world: GitWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """One FlagTree fixture workspace, built by the tool, for every test here: validate only reads it."""
    root = tmp_path_factory.mktemp("validate")
    (root / "home").mkdir()
    server = LoopbackHTTPServer()
    with pytest.MonkeyPatch.context() as mp:
        make_hermetic(mp, root / "home")
        mp.setenv("GIT_CONFIG_GLOBAL", str(git_world.gitconfig))
        mp.setenv("FIXTURE_BUILD_RECORD", str(root / "build-record.jsonl"))
        try:
            url = server.serve(f"/public/llvm-builds/{TOP}.tar.gz", llvm_tarball().data)
            ws = new_workspace(git_world, root / "ws", always_set=(f"artifacts.llvm.url={url}", PREREQUISITES,
                                                                   RUNTIME))
            python = build_venv(root / "venv", [*TOOLS, "torch", "numpy"])
            for step in (["sync"], ["link"], ["fetch"], ["build", "--ignore-host", "--python", str(python)]):
                result = ws.run(*step)
                assert result.exit_code == 0, (step, result.stderr)
        finally:
            server.close()
    yield Built(ws, python)


def report(result: Result) -> dict:
    return result_of(result.stdout)


def statuses(document: dict) -> dict[str, str]:
    return {r["kernel"]: r["status"] for r in document["results"]}


def by_kernel(document: dict, kernel: str) -> dict:
    return next(r for r in document["results"] if r["kernel"] == kernel)


def test_a_built_flagtree_passes_every_kernel(built: Built, tmp_path: Path) -> None:
    junit = tmp_path / "reports" / "validate.xml"
    result = built.validate("--junit", str(junit))
    assert result.exit_code == 0, result.stderr
    for kernel in EVERY_KERNEL:
        assert kernel in result.stderr
    assert "5 passed, 0 failed, 1 skipped" in result.stderr
    assert "10 TLE ops" in result.stderr and "98432 elements, 0 wrong" in result.stderr
    assert "no model given (--model PATH)" in result.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "0", "1")
    assert [case.get("name") for case in suite.iter("testcase")] == EVERY_KERNEL
    # every kernel that ran left its whole output in a log; the last report is kept for `status`
    logs = sorted(p.name.rsplit("-", 2)[0] for p in (built.ws.root / "logs").glob("validate-*.log"))
    assert {"validate-backend", "validate-tle-rms-norm", "validate-vector-add", "validate-softmax"} <= set(logs)
    last = json.loads((built.ws.root / ".flagtree-cpu" / "last-validation.json").read_text())
    assert last["ok"] is True and last["summary"] == {"pass": 5, "fail": 0, "skip": 1}


def test_json_report_carries_each_kernels_figures_and_the_recipes_expectations(built: Built) -> None:
    result = built.validate("--json", "--kernel", "backend", "--kernel", "tle-rms-norm", "--kernel", "vector-add",
                            sets=("checks.2.with.size=1000", "checks.1.with.dim=64"))
    assert result.exit_code == 0, result.stderr
    document = report(result)
    assert document["schema"] == "flagtree-cpu/validate/v1" and document["ok"] is True
    assert statuses(document) == {"prerequisites": "pass", "backend": "pass", "tle-rms-norm": "pass",
                                  "vector-add": "pass"}
    backend = by_kernel(document, "backend")["details"]
    assert backend["triton_version"] == "3.3.0" and "cpu" in backend["backends"]
    assert len(backend["builder_methods"]) == 10 and backend["missing"] == backend["extra"] == []
    assert by_kernel(document, "vector-add")["figure"] == "1000 elements, 0 wrong"
    rms = by_kernel(document, "tle-rms-norm")
    assert 0 < rms["details"]["max_error"] <= 0.0625  # bf16 rounding, not zero and not garbage
    assert "max error" in rms["figure"]


@pytest.mark.parametrize(("mode", "missing", "extra", "fix"), [
    ("missing-op", ["create_cpu_swiglu"], [], "flagtree-cpu build --force"),
    ("extra-op", [], ["create_cpu_gelu"], "`with: builder_methods`"),
])
def test_a_missing_or_extra_tle_op_fails_backend_naming_it(built: Built, monkeypatch: pytest.MonkeyPatch, mode: str,
                                                           missing: list[str], extra: list[str], fix: str) -> None:
    monkeypatch.setenv("FIXTURE_TRITON_MODE", mode)
    result = built.validate("--json", "--kernel", "backend")
    assert result.exit_code == 6
    backend = by_kernel(report(result), "backend")
    assert backend["status"] == "fail" and backend["required"] is True
    assert (backend["details"]["missing"], backend["details"]["extra"]) == (missing, extra)
    assert f"{'missing' if missing else 'unexpected'} builder methods: {(missing or extra)[0]}" in backend["message"]
    assert fix in backend["fix"]


def test_wrong_numbers_fail_each_numeric_kernel_and_the_junit_counts_them(built: Built, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_TRITON_MODE", "wrong-numbers")
    junit = tmp_path / "validate.xml"
    result = built.validate("--junit", str(junit))
    assert result.exit_code == 6
    assert "2 passed, 3 failed, 1 skipped" in result.stderr
    assert "98432 elements, 98432 wrong" in result.stderr
    assert "tle_ops.rms_norm does not match the float reference" in result.stderr
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("failures") == "3"
    failed = {case.get("name"): case.find("failure") for case in root.iter("testcase")
              if case.find("failure") is not None}
    assert set(failed) == {"tle-rms-norm", "vector-add", "softmax"}
    assert all(f.get("type") == "required" and "log: " in (f.text or "") for f in failed.values())
    assert "flagtree-cpu build --force" in (failed["vector-add"].text or "")
    skipped = [case.get("name") for case in root.iter("testcase") if case.find("skipped") is not None]
    assert skipped == ["decode-e2e"]
    vector_add = next(case for case in root.iter("testcase") if case.get("name") == "vector-add")
    assert "vector-add: FAIL" in (vector_add.findtext("system-out") or "")


def test_without_flagtree_backend_cpu_the_assembler_junk_is_explained(built: Built) -> None:
    # the recipe's run-time env is what gives kernels FLAGTREE_BACKEND=cpu; without it, GNU as rejects kernel.s
    result = built.validate("--json", "--kernel", "vector-add", sets=("runtime.env.set.FLAGTREE_BACKEND=nvidia",))
    assert result.exit_code == 6
    vector_add = by_kernel(report(result), "vector-add")
    assert vector_add["details"]["signature"] == "assembler-junk"
    assert "FLAGTREE_BACKEND=cpu was not set" in vector_add["message"]
    assert vector_add["fix"].startswith("export the run-time variables before running kernels")
    assert 'eval "$(flagtree-cpu env)"' in vector_add["fix"]
    assert any("junk at end of line" in line for line in vector_add["details"]["excerpt"])


def test_a_too_old_libstdcxx_gets_the_ld_preload_hint(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_TRITON_MODE", "glibcxx")
    result = built.validate("--kernel", "backend", "--kernel", "softmax")
    assert result.exit_code == 6
    assert result.stderr.count("needs a newer libstdc++/glibc than this system provides") == 2
    assert "LD_PRELOAD=" in result.stderr


def test_sigill_points_at_the_cpu_features(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_TRITON_MODE", "sigill")
    result = built.validate("--json", "--kernel", "softmax")
    assert result.exit_code == 6
    softmax = by_kernel(report(result), "softmax")
    assert softmax["figure"] == "SIGILL"
    assert "the recipe's target needs asimd, sve2, i8mm, bf16" in softmax["message"]
    assert softmax["fix"].startswith("flagtree-cpu doctor --only cpu.features")


def test_a_hanging_kernel_is_stopped_at_its_timeout(built: Built, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_TRITON_MODE", "hang")
    pidfile = tmp_path / "kernel.pid"
    monkeypatch.setenv("FIXTURE_TRITON_PIDFILE", str(pidfile))
    # the timeout counts from the kernel process's start, torch's import included: 10 s leaves a loaded
    # machine room to reach the launch (3 s did not, with other work on both cores)
    result = built.validate("--json", "--kernel", "vector-add", "--kernel", "backend", "--timeout", "10")
    assert result.exit_code == 6
    document = report(result)
    vector_add = by_kernel(document, "vector-add")
    assert vector_add["status"] == "fail" and vector_add["message"] == "timed out after 10 s (stopped)"
    assert by_kernel(document, "backend")["status"] == "pass"  # the next kernel still ran
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the hung kernel is gone, not orphaned
    log = Path(vector_add["log"]).read_text()
    assert "compiling add_kernel ..." in log and "# timed out: stopped after 10 s" in log


def test_a_missing_tle_link_says_run_link_and_link_repairs_it(built: Built) -> None:
    tle_ops = built.ws.flagtree / "third_party/cpu/language/cpu/tle_ops.py"
    target = os.readlink(tle_ops)
    tle_ops.unlink()
    try:
        result = built.validate("--json", "--kernel", "tle-rms-norm")
        assert result.exit_code == 6
        rms = by_kernel(report(result), "tle-rms-norm")
        assert rms["details"]["signature"] == "tle-missing"
        assert rms["fix"].startswith("flagtree-cpu link")
        assert built.ws.run("link").exit_code == 0  # the fix it gave
    finally:
        if not tle_ops.is_symlink():
            os.symlink(target, tle_ops)
    assert built.validate("--kernel", "tle-rms-norm").exit_code == 0


def test_an_interpreter_without_triton_says_build_first(built: Built, tmp_path: Path) -> None:
    bare = build_venv(tmp_path / "unbuilt", ["pip", "torch", "numpy"])
    result = built.ws.run("validate", "--json", "--python", str(bare), "--kernel", "backend", "--kernel", "softmax")
    assert result.exit_code == 6
    document = report(result)
    for kernel in ("backend", "softmax"):
        entry = by_kernel(document, kernel)
        assert entry["details"]["signature"] == "triton-missing", entry
        assert entry["fix"].startswith("flagtree-cpu build")


def test_missing_prerequisites_fail_with_the_exact_install_command_and_nothing_is_installed(
        git_world: GitWorld, tmp_path: Path) -> None:
    ws = new_workspace(git_world, tmp_path / "ws")  # the bundled recipe's own run-time prerequisites
    python = build_venv(tmp_path / "venv", ["pip"])
    before = sorted(p.name for p in site_packages(python).iterdir())
    result = ws.run("validate", "--json", "--python", str(python))
    assert result.exit_code == 6
    document = report(result)
    prerequisites = by_kernel(document, "prerequisites")
    assert prerequisites["status"] == "fail" and prerequisites["details"]["missing"] == ["torch", "numpy"]
    assert prerequisites["details"]["install"] == [
        f"{python} -m pip install torch==2.10.0+cpu --index-url https://download.pytorch.org/whl/cpu",
        f"{python} -m pip install numpy"]
    assert "flagtree-cpu validate --install-prereqs" in prerequisites["fix"]
    skipped = {r["kernel"]: r["message"] for r in document["results"] if r["status"] == "skip"}
    assert skipped["tle-rms-norm"] == skipped["softmax"] == "needs torch, which is missing (see prerequisites)"
    assert by_kernel(document, "backend")["status"] == "fail"  # it needs no torch, so it ran (and found no triton)
    assert sorted(p.name for p in site_packages(python).iterdir()) == before
    assert not list((ws.root / "logs").glob("prerequisites-*.log"))  # pip never ran


def test_install_prereqs_installs_from_the_recipes_index(built: Built, tmp_path: Path,
                                                        http_server: LoopbackHTTPServer) -> None:
    wheel = tiny_wheel(tmp_path, "flagtree-fixture-runtime", "1.0")
    http_server.serve(f"/files/{wheel.name}", wheel.read_bytes())
    http_server.serve("/simple/flagtree-fixture-runtime/",
                      f'<html><body><a href="/files/{wheel.name}">{wheel.name}</a></body></html>'.encode(),
                      **{"Content-Type": "text/html"})
    runtime = (f'python.runtime=[torch>=2.0, {{requirement: "flagtree-fixture-runtime==1.0", '
               f'index_url: "{http_server.url("/simple/")}"}}]')
    plain = built.validate("--json", "--kernel", "backend", sets=(runtime,))
    assert plain.exit_code == 6
    assert by_kernel(report(plain), "prerequisites")["details"]["missing"] == ["flagtree-fixture-runtime"]
    installed = built.validate("--json", "--kernel", "backend", "--install-prereqs", sets=(runtime,))
    assert installed.exit_code == 0, installed.stderr
    assert statuses(report(installed)) == {"prerequisites": "pass", "backend": "pass"}
    asked = len(http_server.requests_for(f"/files/{wheel.name}"))
    assert asked  # from the recipe's index, over loopback (uv asks a HEAD and ranges of it too: not only one GET)
    again = built.validate("--json", "--kernel", "backend", "--install-prereqs", sets=(runtime,))
    assert again.exit_code == 0
    assert len(http_server.requests_for(f"/files/{wheel.name}")) == asked  # satisfied: no installer ran again


def test_decode_e2e_is_optional_skipped_without_a_model_and_reported_with_one(built: Built, tmp_path: Path) -> None:
    skipped = built.validate("--json", "--kernel", "decode-e2e")
    assert skipped.exit_code == 0
    assert by_kernel(report(skipped), "decode-e2e")["status"] == "skip"
    model = tmp_path / "model"
    model.mkdir()
    junit = tmp_path / "validate.xml"
    ran = built.validate("--kernel", "decode-e2e", "--model", str(model), "--junit", str(junit))
    assert ran.exit_code == 0  # an optional kernel's failure is reported, not fatal
    assert "fail (optional)" in ran.stderr and "python -m pip install transformers" in ran.stderr
    failure = ET.parse(junit).getroot().find(".//testcase[@name='decode-e2e']/failure")
    assert failure is not None and failure.get("type") == "optional"


def test_usage_errors(built: Built, tmp_path: Path) -> None:
    typo = built.validate("--kernel", "softmx")
    assert typo.exit_code == 2 and "did you mean 'softmax'?" in typo.stderr
    only_backend = 'checks=[{uses: flagtree/backend, with: {triton_version: "==3.3.*"}}]'
    not_configured = built.validate("--check", "softmax", sets=(only_backend,))
    assert not_configured.exit_code == 2 and "has no check 'softmax'" in not_configured.stderr
    nowhere = built.ws.run("validate", "--python", str(tmp_path / "no" / "python"))
    assert nowhere.exit_code == 6
    assert "there is no Python at" in nowhere.stderr and "flagtree-cpu build" in without_context(nowhere.stderr)
    assert "Traceback" not in typo.stderr + not_configured.stderr + nowhere.stderr


def test_list_names_every_check_and_its_script(built: Built) -> None:
    listed = built.ws.run("validate", "--list", "--json")
    assert listed.exit_code == 0
    document = result_of(listed.stdout)
    checks = document["checks"]
    assert (Path(document["folder"]) / "flagtree" / "vector_add.py").is_file()
    assert [c["name"] for c in checks] == EVERY_KERNEL[1:]
    assert {c["kind"] for c in checks} == {"uses"} and checks[0]["preset"] == "flagtree/backend"
    assert all(Path(c["script"]).is_file() for c in checks)
    assert {c["name"]: c["required"] for c in checks}["decode-e2e"] is False
    assert [p["preset"] for p in document["presets"]][:2] == ["flagtree/backend", "flagtree/tle-rms-norm"]
    table = built.ws.run("validate", "--list")
    assert "tle_ops.rms_norm" in table.stdout and "optional" in table.stdout  # the listing is the product


def test_a_kernel_runs_by_hand_with_the_builds_python(built: Built) -> None:
    """The scripts are standalone: what README tells users to run when they want to see for themselves."""
    import subprocess

    from flagtree_cpu_build.presets import PRESETS

    env = {**os.environ, "FLAGTREE_BACKEND": "cpu"}
    result = subprocess.run([str(built.python), str(PRESETS["flagtree/vector-add"].path)], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("vector-add: PASS — 98432 elements, 0 wrong")


# --- PyPI's triton, for real ------------------------------------------------------------------


@pytest.fixture
def pypi_triton(git_world: GitWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    pytest.importorskip("triton", reason="PyPI's triton is installed on x86_64 Linux only")
    pytest.importorskip("torch")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    return new_workspace(git_world, tmp_path / "ws", always_set=(RUNTIME,))


def test_ordinary_kernels_pass_in_pypi_tritons_interpreter(pypi_triton: Workspace) -> None:
    """The vector-add and softmax kernels are real Triton: PyPI's triton runs them (TRITON_INTERPRET=1)."""
    result = pypi_triton.run("validate", "--json", "--python", sys.executable, "--kernel", "vector-add",
                             "--kernel", "softmax")
    assert result.exit_code == 0, result.stderr
    document = report(result)
    assert statuses(document) == {"prerequisites": "pass", "vector-add": "pass", "softmax": "pass"}
    assert by_kernel(document, "softmax")["details"]["max_error"] < 1e-5
    assert any(w.startswith("TRITON_INTERPRET=1: kernels run in Triton's Python interpreter")
               for w in document["warnings"])  # and it says what that means


def test_pypi_triton_is_not_flagtree(pypi_triton: Workspace) -> None:
    result = pypi_triton.run("validate", "--json", "--python", sys.executable, "--kernel", "backend",
                             "--kernel", "tle-rms-norm")
    assert result.exit_code == 6
    document = report(result)
    backend = by_kernel(document, "backend")
    assert "backend(s) not registered: cpu" in backend["message"]
    assert len(backend["details"]["missing"]) == 10
    assert "not FlagTree's CPU build" in backend["fix"]
    # not "run flagtree-cpu link": that is the fix for FlagTree's own triton without its TLE link (below)
    tle = by_kernel(document, "tle-rms-norm")
    assert tle["status"] == "fail" and "no cpu backend" in tle["figure"], tle
    assert "not FlagTree's CPU build" in tle["fix"] and "flagtree-cpu link" not in tle["fix"], tle


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_interrupted_validation_stops_the_kernel(built: Built, signum: int, code: int) -> None:
    """Ctrl-C, or SIGTERM to the tool alone (as CI runners and `timeout` send it), during a kernel: exit
    130 / 143 and no kernel left running (the CLI in its own process, the kernel in its own group)."""
    import subprocess

    env = {**os.environ, "FIXTURE_TRITON_MODE": "hang", "FIXTURE_TRITON_PIDFILE": str(built.ws.root / "hang.pid")}
    argv = [sys.executable, "-m", "flagtree_cpu_build", "-w", str(built.ws.root), "--set",
            f"sources.flagtree.commit={built.ws.flagtree_commit}", "--set", RUNTIME, "validate", "--python",
            str(built.python), "--kernel", "vector-add"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pidfile = built.ws.root / "hang.pid"
    deadline = time.monotonic() + 60
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pidfile.exists(), "the kernel never started"
    time.sleep(0.2)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr and ("SIGTERM" in stderr) == (signum == signal.SIGTERM)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)
    pidfile.unlink()
