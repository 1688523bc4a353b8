"""The lock's format version: a lock that holds only what version 1 knew is written as version 1 (an older
flagtree-cpu still reads it); one that holds `reads` or `requirements_files` is version 2; a version newer than
this tool is refused by its version, not by an unknown key."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from flagtree_cpu_build.errors import ExitCode, UsageError
from flagtree_cpu_build.lockfile import ReadLock, RequirementsFileLock, empty_lock, read_lock, write_lock


def _written_version(path: Path) -> int:
    return yaml.safe_load(path.read_text())["lock_version"]


def test_a_lock_without_reads_is_written_as_version_1_so_older_tools_read_it(tmp_path: Path) -> None:
    path = tmp_path / "lock.yaml"
    write_lock(path, empty_lock("r", "d" * 64))
    assert _written_version(path) == 1
    assert "reads" not in path.read_text() and "requirements_files" not in path.read_text()
    assert read_lock(path) is not None


@pytest.mark.parametrize("extra", [
    {"reads": {"artifacts.llvm.match": ReadLock(source="ft", file="cmake/llvm-hash.txt", commit="a" * 40,
                                                value="abcdef12")}},
    {"requirements_files": {"python.build[0]": RequirementsFileLock(source="ft", file="requirements.txt")}},
])
def test_a_lock_holding_version_2_keys_is_written_as_version_2_and_read_back(tmp_path: Path, extra: dict) -> None:
    path = tmp_path / "lock.yaml"
    lock = replace(empty_lock("r", "d" * 64), **extra)
    write_lock(path, lock)
    assert _written_version(path) == 2
    back = read_lock(path)
    assert back is not None and {k: getattr(back, k) for k in extra} == extra


def test_a_version_1_lock_with_reads_from_the_previous_release_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "lock.yaml"
    path.write_text("lock_version: 1\ntool_version: '0.1'\nrecipe: r\nrecipe_digest: " + "d" * 64 + "\n"
                    "reads:\n  artifacts.llvm.match: {source: ft, file: h.txt, commit: null, value: abc}\n")
    lock = read_lock(path)
    assert lock is not None and lock.reads["artifacts.llvm.match"].value == "abc"


def test_a_lock_from_a_newer_tool_is_refused_by_its_version(tmp_path: Path) -> None:
    path = tmp_path / "lock.yaml"
    path.write_text("lock_version: 3\ntool_version: '9.0'\nrecipe: r\nrecipe_digest: x\nfuture_key: {}\n")
    with pytest.raises(UsageError) as caught:
        read_lock(path)
    assert caught.value.exit_code == ExitCode.USAGE
    assert "lock version 3, which is newer than this flagtree-cpu" in str(caught.value)
    assert "future_key" not in str(caught.value)
    assert "upgrade flagtree-cpu" in caught.value.fix


@pytest.mark.parametrize("version", ["0", "true", "'2'", "[2]"])
def test_a_lock_version_that_is_no_version_is_named_as_not_a_lock(tmp_path: Path, version: str) -> None:
    path = tmp_path / "lock.yaml"
    path.write_text(f"lock_version: {version}\nrecipe: r\n")
    with pytest.raises(UsageError, match="not a flagtree-cpu lock"):
        read_lock(path)
