"""The workspace's logs/ keeps the newest few files of each kind (logfiles.KEEP_PER_KIND)."""

from __future__ import annotations

from pathlib import Path

from flagtree_cpu_build.logfiles import KEEP_PER_KIND
from flagtree_cpu_build.proc import log_path


def _write(path: Path) -> Path:
    path.write_text("a run\n")
    return path


def test_each_kind_keeps_its_newest_files_and_never_the_one_just_named(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    mine = _write(logs / "notes.txt")  # the user's own file in logs/ is not ours
    others = [_write(log_path(logs, "venv")) for _ in range(2)]
    made = [_write(log_path(logs, "build")) for _ in range(KEEP_PER_KIND + 3)]
    left = sorted(logs.glob("build-*.log"))
    assert len(left) == KEEP_PER_KIND
    assert set(left) == set(made[-KEEP_PER_KIND:])  # the oldest three went, the newest (just named) stayed
    assert mine.is_file() and all(p.is_file() for p in others)


def test_a_kind_whose_name_extends_another_is_counted_apart(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    step = [_write(log_path(logs, "step-a")) for _ in range(3)]
    for _ in range(KEEP_PER_KIND + 1):
        _write(log_path(logs, "step"))
    assert all(p.is_file() for p in step)
    assert len(list(logs.glob("step-2*.log"))) == KEEP_PER_KIND
