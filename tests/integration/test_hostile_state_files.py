"""The workspace's own state files and the source files a recipe probes are read as what they may be: a FIFO, a
link to /dev/zero, a file of any size. None of them hangs a command or is read without end.

Reading a FIFO nobody writes waits forever, so the commands run as processes with a timeout only a hang reaches.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Workspace, new_workspace
from tests.support.gitworld import GitWorld

HANG = 60  # seconds: each run takes about one; only a process blocked on a FIFO or reading /dev/zero gets here
STATE_FILES = ("last-validation.json", "last-setup.json", "build-editable.json")


def make_special(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:  # a sparse file bigger than any state file: no disk is spent on it
        with open(path, "wb") as file:
            file.truncate(200 << 20)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flagtree_cpu_build", *args], capture_output=True, text=True,
                          timeout=HANG, stdin=subprocess.DEVNULL, check=False)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_state_files_that_are_special_or_huge_are_treated_as_missing(tmp_path: Path, kind: str) -> None:
    ws = tmp_path / "ws"
    for name in STATE_FILES:
        make_special(ws / ".flagtree-cpu" / name, kind)
    result = run_cli("-w", str(ws), "status")
    assert result.returncode == 0, result.stderr
    assert "no validation report in this workspace" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr


def test_setup_replaces_a_fifo_where_its_report_goes_without_opening_it(world: GitWorld, tmp_path: Path) -> None:
    ws = new_workspace(world, tmp_path / "ws", always_set=("artifacts={}", "build=null"))
    report = ws.root / ".flagtree-cpu" / "last-setup.json"
    make_special(report, "fifo")
    process = ws.process("setup", "--skip-build", "--ignore-host")
    _, stderr = process.communicate(timeout=HANG)
    assert process.returncode == 0, stderr
    assert report.is_file() and not report.is_symlink()  # the new report, where the FIFO was


def test_a_probed_source_file_bigger_than_any_probe_reads_is_a_located_failure(world: GitWorld, tmp_path: Path) -> None:
    huge = "x" * (17 << 20)  # a compressible 17 MiB: git keeps it in kilobytes
    commit = world.advance("flagtree-cpu", "main", "third_party/cpu/triton_cpu.cc", huge, "a file no probe expects")
    ws = Workspace(world, tmp_path / "ws", world["flagtree"].commits["cpu-backend"],
                   (f"sources.flagtree-cpu.commit={commit}",))
    result = ws.run("sync")
    assert result.exit_code == 3, result.stderr
    assert "flagtree-cpu: third_party/cpu/triton_cpu.cc is larger than 16 MiB, which no file a recipe probes is" \
        in result.stderr
