"""The workspace's JSON state files are read as what they may have become: a FIFO, a link to /dev/zero, a file of
any size. Each is treated as missing, said so, and (where the reader repairs) moved aside unopened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flagtree_cpu_build.state import MAX_STATE_BYTES, read_state


def special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:  # sparse: bigger than any state file, no disk spent
        with open(path, "wb") as file:
            file.truncate(MAX_STATE_BYTES + 1)


@pytest.mark.timeout(30)  # the old reader blocked on the FIFO forever and read /dev/zero until memory ran out
@pytest.mark.parametrize(("kind", "said"), [
    ("fifo", "is a FIFO (named pipe), not a regular file"),
    ("dev-zero", "is a symlink to /dev/zero, which is a character device, not a regular file"),
    ("huge", "is larger than 64 MiB, which no state file of ours is"),
])
def test_a_special_or_huge_state_file_is_missing_said_so_and_moved_aside(tmp_path: Path, kind: str, said: str) -> None:
    stamp = tmp_path / "build-editable.json"
    special(stamp, kind)
    notices: list[str] = []
    assert read_state(stamp, repair=True, notice=notices.append) is None
    [notice] = notices
    assert notice.startswith(f"{stamp} ") and said in notice and "moved to build-editable.json.damaged" in notice
    assert not os.path.lexists(stamp) and os.path.lexists(tmp_path / "build-editable.json.damaged")


def test_a_read_only_reader_leaves_it_where_it_is(tmp_path: Path) -> None:
    report = tmp_path / "last-validation.json"
    special(report, "fifo")
    notices: list[str] = []
    assert read_state(report, notice=notices.append) is None
    assert "is a FIFO (named pipe), not a regular file; it is treated as missing" in notices[0]
    assert report.is_fifo()
