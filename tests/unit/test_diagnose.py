"""Every known failure signature is recognized in a build log; unknown ones still get an excerpt."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from flagtree_cpu_build.diagnose import RUNTIME_SIGNATURES, SIGNATURES, diagnose, markdown_table, signatures_for
from flagtree_cpu_build.recipe import Diagnosis
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.stages.build.watch import Display
from flagtree_cpu_build.ui import UI

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "build-logs"
KEY_LINES = {
    "install-permission": '"/usr/local/lib/libsleef.so.3.8.0": Permission denied.',
    "nvidia-download": "cuda_nvcc-linux-sbsa-12.4.99-archive/bin/ptxas",
    "llvm-incomplete": 'provided by "MLIR"',
    "out-of-memory": "Killed signal terminated program cc1plus",
    "compiler-too-old": "unknown value 'armv9-a+sve2",
    "ninja-missing": '"-DCMAKE_MAKE_PROGRAM=" +',
    "pybind11-missing": "No module named 'pybind11'",
    "glibc-version": "GLIBCXX_3.4.32' not found",
    "cmake-too-old": "CMake 3.18 or higher is required",
    "disk-full": "No space left on device",
    "flagtree-offline-on": "please set FLAGTREE_OFFLINE_BUILD_DIR",
    "network-during-build": "Temporary failure in name resolution",
}


# FlagTree's own failures: the bundled recipe's `diagnosis.build`, not the generic table
FLAGTREE = {"install-permission", "nvidia-download", "compiler-too-old", "flagtree-offline-on"}
RECIPE = load_recipe("flagtree-cpu-arm64")


def test_every_signature_has_a_log_fixture() -> None:
    assert {s.id for s in SIGNATURES} == set(KEY_LINES) - FLAGTREE
    assert {s.id for s in RECIPE.diagnosis.build} == FLAGTREE
    assert {p.stem for p in LOGS.glob("*.log")} == {*KEY_LINES, "unknown", "ninja-transcript"}


def test_the_generic_signatures_name_no_flagtree_behaviour() -> None:
    for signature in (*SIGNATURES, *RUNTIME_SIGNATURES):
        text = f"{signature.cause} {signature.fix}"
        for word in ("FlagTree", "TRITON_", "FLAGTREE_", "armv9", "sleef", "NVIDIA", "TLE", "tle_ops", "LLVM_SYSPATH"):
            assert word not in text, (signature.id, word)


def test_the_recipes_signatures_come_first() -> None:
    build = signatures_for(RECIPE, "build")
    assert [s.id for s in build] == [s.id for s in RECIPE.diagnosis.build] + [s.id for s in SIGNATURES]
    run = signatures_for(RECIPE, "run")
    assert [s.id for s in run][:3] == ["assembler-junk", "tle-missing", "triton-missing"]
    assert run[3:] == RUNTIME_SIGNATURES
    assert signatures_for(None, "build") == SIGNATURES  # no recipe: the generic ones
    assert signatures_for(replace(RECIPE, diagnosis=Diagnosis()), "run") == RUNTIME_SIGNATURES


def test_the_flagtree_failures_are_unknown_without_the_recipe() -> None:
    diagnosis = diagnose((LOGS / "nvidia-download.log").read_text())
    assert diagnosis.signature is None or diagnosis.signature.id != "nvidia-download"


@pytest.mark.parametrize("line, expected", [
    ("kernel.s:12: Error: junk at end of line, first unrecognized character is `#'", "assembler-junk"),
    ("ModuleNotFoundError: No module named 'triton.language.extra.cpu'", "tle-missing"),
    ("ModuleNotFoundError: No module named 'triton'", "triton-missing"),
    ("ModuleNotFoundError: No module named 'numpy'", "prerequisite-missing"),
])
def test_run_failures_match_the_recipes_signatures_then_the_generic_ones(line: str, expected: str) -> None:
    diagnosis = diagnose(line, signatures=signatures_for(RECIPE, "run"))
    assert diagnosis.signature is not None and diagnosis.signature.id == expected


def test_the_readme_table_is_the_recipes_and_the_generic_signatures() -> None:
    rows = [line.split("|")[1].strip().strip("`") for line in markdown_table().splitlines()[2:]]
    assert rows == [s.id for s in signatures_for(RECIPE, "build")]


@pytest.mark.parametrize("signature_id", sorted(KEY_LINES))
def test_the_log_is_diagnosed_at_its_first_real_error(signature_id: str) -> None:
    text = (LOGS / f"{signature_id}.log").read_text()
    diagnosis = diagnose(text, signatures=signatures_for(RECIPE, "build"))
    assert diagnosis.signature is not None and diagnosis.signature.id == signature_id
    assert any(KEY_LINES[signature_id] in line for line in diagnosis.excerpt)
    assert text.splitlines()[diagnosis.line - 1] in diagnosis.excerpt
    assert len(diagnosis.excerpt) <= 7  # a focused excerpt, not the tail of the log


def test_an_unknown_failure_still_gets_its_first_error_excerpt() -> None:
    diagnosis = diagnose((LOGS / "unknown.log").read_text())
    assert diagnosis.signature is None
    assert diagnosis.cause() == "an unrecognized build failure"
    assert any("no member named 'frobnicate'" in line for line in diagnosis.excerpt)
    assert not any("See above for output" in line for line in diagnosis.excerpt)  # not the pip noise at the end


def test_fixes_name_something_to_do() -> None:
    for signature in (*signatures_for(RECIPE, "build"), *signatures_for(RECIPE, "run")):
        assert signature.fix and signature.cause
        signature.fix.format(jobs_half=4, log="/x.log")  # every placeholder in a fix can be filled


class RecordingTask:
    def __init__(self) -> None:
        self.updates: list[tuple[float, float | None, str]] = []

    def update(self, completed: float, total: float | None = None, detail: str = "") -> None:
        self.updates.append((completed, total, detail))


def test_ninja_lines_drive_the_progress_bar() -> None:
    task = RecordingTask()
    display = Display(task, UI(quiet=True), verbose=False)  # type: ignore[arg-type]
    for line in (LOGS / "ninja-transcript.log").read_text().splitlines():
        display.line(line)
    phases = [detail for _, _, detail in task.updates]
    assert phases[0] == "configuring"
    compiling = [(done, total) for done, total, detail in task.updates if detail == "compiling"]
    assert compiling[0] == (1.0, 40.0) and compiling[-1] == (40.0, 40.0)
    assert phases[-1] == "installing"
    display.idle(45)
    assert task.updates[-1][2] == "installing"  # logs keep the phase; a terminal also shows "quiet for 45 s"
