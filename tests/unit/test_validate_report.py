"""validate's pure parts: the presets against their scripts and the recipe, run-time failure signatures,
the backend preset's triton version judgement, the JSON and JUnit reports."""

from __future__ import annotations

import ast
import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flagtree_cpu_build.diagnose import diagnose, signatures_for
from flagtree_cpu_build.errors import UsageError
from flagtree_cpu_build.presets import PRESETS, PRESETS_DIR, RESULT_MARKER
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.stages.validate.check_catalog import chosen_checks, preset_of
from flagtree_cpu_build.stages.validate.junit import write_junit
from flagtree_cpu_build.stages.validate.validate import KernelResult, ValidationReport

FLAGTREE = PRESETS_DIR / "flagtree"

# What users meet, as FlagTree's guide and FAQ quote it.
RUNTIME_LINES = {
    "assembler-junk": "/tmp/tmpk3l2/kernel.s:41: Error: junk at end of line, first unrecognized character is `@'",
    "tle-missing": "ModuleNotFoundError: No module named 'triton.language.extra.cpu.tle_ops'",
    "glibc-version": "ImportError: /lib/aarch64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found "
                     "(required by /home/u/FlagTree/python/triton/_C/libtriton.so)",
    "prerequisite-missing": "ModuleNotFoundError: No module named 'torch'",
    "triton-missing": "ModuleNotFoundError: No module named 'triton'",
}


RUN_SIGNATURES = signatures_for(load_recipe("flagtree-cpu-arm64"), "run")  # the recipe's, then the generic ones


@pytest.mark.parametrize("signature_id", sorted(RUNTIME_LINES))
def test_each_runtime_failure_is_recognized(signature_id: str) -> None:
    output = f"Traceback (most recent call last):\n  File \"kernel.py\", line 3\n{RUNTIME_LINES[signature_id]}\n"
    diagnosis = diagnose(output, signatures=RUN_SIGNATURES)
    assert diagnosis.signature is not None and diagnosis.signature.id == signature_id


def test_every_runtime_signature_has_a_sample() -> None:
    assert {s.id for s in RUN_SIGNATURES} == set(RUNTIME_LINES)


def test_the_missing_tle_import_forms_all_point_at_link() -> None:
    for line in ("ImportError: cannot import name 'tle_ops' from 'triton.language.extra.cpu'",
                 "ModuleNotFoundError: No module named 'triton.language.extra.cpu'"):
        diagnosis = diagnose(line, signatures=RUN_SIGNATURES)
        assert diagnosis.signature is not None and diagnosis.signature.fix.startswith("flagtree-cpu link")


def test_the_presets_match_their_scripts_and_the_recipe() -> None:
    scripts = {p.relative_to(PRESETS_DIR).as_posix() for p in PRESETS_DIR.glob("*/*.py")
               if not p.name.startswith("_")}
    assert {preset.script for preset in PRESETS.values()} == scripts
    recipe = load_recipe("flagtree-cpu-arm64")
    assert [preset_of(check).name for check in recipe.checks] == list(PRESETS)  # type: ignore[union-attr]
    assert [check.label for check in recipe.checks] == ["backend", "tle-rms-norm", "vector-add", "softmax",
                                                        "decode-e2e"]
    assert {check.label: check.required for check in recipe.checks}["decode-e2e"] is False


def test_the_scripts_print_the_marker_the_runner_reads() -> None:
    assert f'MARKER = "{RESULT_MARKER}"' in (FLAGTREE / "_common.py").read_text()


def test_preset_scripts_import_nothing_of_ours() -> None:
    """They run in the target interpreter, which does not have flagtree-cpu installed."""
    for script in PRESETS_DIR.glob("*/*.py"):
        tree = ast.parse(script.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0 and not (node.module or "").startswith("flagtree_cpu_build"), script.name
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("flagtree_cpu_build") for a in node.names), script.name


def test_an_unknown_check_gets_a_suggestion() -> None:
    recipe = load_recipe("flagtree-cpu-arm64")
    with pytest.raises(UsageError, match="did you mean 'tle-rms-norm'"):
        chosen_checks(recipe, ["tle-rmsnorm"])
    assert [c.label for c in chosen_checks(recipe, ["flagtree/softmax", "backend"])] == ["backend", "softmax"]


@pytest.fixture(scope="module")
def backend_script():  # type: ignore[no-untyped-def]
    """The backend preset's script as a module (it imports its neighbour _common)."""
    sys.path.insert(0, str(FLAGTREE))
    try:
        spec = importlib.util.spec_from_file_location("flagtree_backend_preset", FLAGTREE / "backend.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(FLAGTREE))


@pytest.mark.parametrize(("wanted", "found", "fits"), [
    ("==3.3.*", "3.3.0", True),
    ("==3.3.*", "3.3.1+git3911e5b", True),
    ("==3.3.*", "3.4.0", False),
    ("==3.3.*", "not-a-version", False),
    (">=2.0,<3", "2.5.1", True),
    (">=2.0,<3", "3.0", False),
    ("==3.3", "3.3.0", True),
    ("!=3.3.0", "3.3.0", False),
])
def test_the_triton_version_is_judged_against_the_recipes_range(backend_script, wanted: str, found: str,  # type: ignore[no-untyped-def]
                                                                fits: bool) -> None:
    """The backend preset judges the range itself, with packaging when the target has it and without."""
    assert backend_script.version_fits(wanted, found) is fits
    assert backend_script._fits_without_packaging(wanted, found) is fits


def _report(*results: KernelResult) -> ValidationReport:
    return ValidationReport("flagtree-cpu-arm64", Path("/venv/bin/python"), results, (), 3.5,
                            "2026-11-21T10:00:00+00:00")


def test_only_required_failures_fail_the_run() -> None:
    optional = KernelResult("decode-e2e", "fail", False, message="below the floor")
    assert not _report(KernelResult("backend", "pass", True), optional).failed
    required = KernelResult("softmax", "fail", True, message="differs")
    assert _report(required, optional).failed == [required]
    document = _report(required, optional).to_json()
    assert document["ok"] is False and document["summary"] == {"pass": 0, "fail": 2, "skip": 0}


def test_junit_is_valid_xml_even_with_terminal_escapes_in_the_output(tmp_path: Path) -> None:
    results = (
        KernelResult("backend", "pass", True, figure="10 TLE ops", seconds=0.4, output="\x1b[32mok\x1b[0m \x00"),
        KernelResult("softmax", "fail", True, message="max error 0.5 <limit>", fix="rebuild & retry",
                     log=Path("/ws/logs/validate-softmax.log")),
        KernelResult("decode-e2e", "fail", False, message="transformers missing"),
        KernelResult("tle-rms-norm", "skip", True, message="needs torch"),
    )
    target = tmp_path / "out" / "junit.xml"
    write_junit(_report(*results), target)
    root = ET.parse(target).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("4", "2", "0",
                                                                                                      "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["backend"].findtext("system-out") == "\ufffd[32mok\ufffd[0m \ufffd"
    failure = cases["softmax"].find("failure")
    assert failure is not None and failure.get("type") == "required"
    assert failure.get("message") == "max error 0.5 <limit>"
    assert "fix: rebuild & retry" in (failure.text or "") and "log: /ws/logs/validate-softmax.log" in failure.text
    assert cases["decode-e2e"].find("failure").get("type") == "optional"  # type: ignore[union-attr]
    assert cases["tle-rms-norm"].find("skipped").get("message") == "needs torch"  # type: ignore[union-attr]
    assert not list(target.parent.glob("*.tmp"))


def test_a_failed_validation_is_one_error_with_the_first_kernels_log_and_diagnosis(tmp_path: Path) -> None:
    """What `validate` and setup's validate stage raise: the envelope's error carries log and diagnosis."""
    log = tmp_path / "validate-vector-add.log"
    failed = KernelResult("vector-add", "fail", True, message="FLAGTREE_BACKEND=cpu was not set", fix="eval ...",
                          log=log, details={"signature": "assembler-junk", "excerpt": ["junk at end of line"]})
    optional = KernelResult("decode-e2e", "fail", False, message="too slow")
    passed = KernelResult("backend", "pass", True)
    report = ValidationReport("r", Path("/venv/bin/python"), (passed, failed, optional), (), 1.0, "now")
    error = report.failure("fix it")
    assert error.exit_code == 6 and error.message == "1 required validation check failed" and error.fix == "fix it"
    assert error.log == str(log)
    assert error.diagnosis == {"signature": "assembler-junk", "cause": "FLAGTREE_BACKEND=cpu was not set",
                               "line": None, "excerpt": ["junk at end of line"]}
    assert any("decode-e2e" in d for d in error.details) is False  # an optional kernel does not fail the run
