"""Every known failure signature is recognized in a build log; unknown ones still get an excerpt."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_cpu_build.build import _Display
from flagtree_cpu_build.diagnose import SIGNATURES, diagnose
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


def test_every_signature_has_a_log_fixture() -> None:
    assert {s.id for s in SIGNATURES} == set(KEY_LINES)
    assert {p.stem for p in LOGS.glob("*.log")} == {*KEY_LINES, "unknown", "ninja-transcript"}


@pytest.mark.parametrize("signature_id", sorted(KEY_LINES))
def test_the_log_is_diagnosed_at_its_first_real_error(signature_id: str) -> None:
    text = (LOGS / f"{signature_id}.log").read_text()
    diagnosis = diagnose(text)
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
    for signature in SIGNATURES:
        assert signature.fix and signature.cause
        signature.fix.format(jobs_half=4, log="/x.log")  # every placeholder in a fix can be filled


class RecordingTask:
    def __init__(self) -> None:
        self.updates: list[tuple[float, float | None, str]] = []

    def update(self, completed: float, total: float | None = None, detail: str = "") -> None:
        self.updates.append((completed, total, detail))


def test_ninja_lines_drive_the_progress_bar() -> None:
    task = RecordingTask()
    display = _Display(task, UI(quiet=True), verbose=False)  # type: ignore[arg-type]
    for line in (LOGS / "ninja-transcript.log").read_text().splitlines():
        display.line(line)
    phases = [detail for _, _, detail in task.updates]
    assert phases[0] == "configuring"
    compiling = [(done, total) for done, total, detail in task.updates if detail == "compiling"]
    assert compiling[0] == (1.0, 40.0) and compiling[-1] == (40.0, 40.0)
    assert phases[-1] == "installing"
    display.idle(45)
    assert task.updates[-1][2] == "installing"  # logs keep the phase; a terminal also shows "quiet for 45 s"
