"""Atomic writes and symlink swaps: one temporary name (fsynced when durable), gone after any failure."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from flagtree_cpu_build import atomic
from flagtree_cpu_build.atomic import replace_symlink, temporary_name, write_atomic


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


def test_write_atomic_replaces_the_file_with_text_or_bytes(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_atomic(path, "first ✓\n")
    assert path.read_text(encoding="utf-8") == "first ✓\n"
    write_atomic(path, b"\x00second")
    assert path.read_bytes() == b"\x00second"
    assert _leftovers(tmp_path) == []


def test_the_temporary_is_hidden_beside_the_file_and_names_the_process(tmp_path: Path) -> None:
    assert temporary_name(tmp_path / "lock.yaml") == tmp_path / f".lock.yaml.tmp-{os.getpid()}"
    names = []
    worker = threading.Thread(target=lambda: names.append(temporary_name(tmp_path / "lock.yaml")))
    worker.start()
    worker.join()
    assert names[0].name.startswith(f".lock.yaml.tmp-{os.getpid()}-")  # another thread, another temporary


def test_a_new_file_gets_the_umask_permissions_and_mode_is_exact(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "shared", "x")
        write_atomic(tmp_path / "secret", "x", mode=0o600)
        write_atomic(tmp_path / "wide", "x", mode=0o664)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "wide").stat().st_mode) == 0o664


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()],
                         ids=["disk-full", "ctrl-c"])
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   failure: BaseException) -> None:
    path = tmp_path / "lock.yaml"
    path.write_text("old\n")

    def fail(*args: object) -> None:
        raise failure

    monkeypatch.setattr(atomic.os, "fsync", fail)
    with pytest.raises(type(failure)):
        write_atomic(path, "new\n", durable=True)
    assert path.read_text() == "old\n"
    assert _leftovers(tmp_path) == []
    monkeypatch.setattr(atomic.os, "replace", fail)  # the same at the last step of a write that is not durable
    with pytest.raises(type(failure)):
        write_atomic(path, "new\n")
    assert path.read_text() == "old\n"
    assert _leftovers(tmp_path) == []


def test_only_a_durable_write_waits_for_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(atomic.os, "fsync", synced.append)
    write_atomic(tmp_path / "stamp.json", "{}\n")
    assert synced == []
    write_atomic(tmp_path / "lock.yaml", "sources: {}\n", durable=True)
    assert len(synced) == 1 and (tmp_path / "lock.yaml").read_text() == "sources: {}\n"


def test_a_write_into_a_missing_folder_raises_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing" / "file", "x")
    assert list(tmp_path.iterdir()) == []


def test_replace_symlink_creates_and_swaps_a_link(tmp_path: Path) -> None:
    link = tmp_path / "backend"
    replace_symlink(link, "../a")
    assert os.readlink(link) == "../a"
    replace_symlink(link, Path("../b"))
    assert os.readlink(link) == "../b"
    assert _leftovers(tmp_path) == []


def test_replace_symlink_over_a_folder_fails_and_leaves_no_temporary(tmp_path: Path) -> None:
    folder = tmp_path / "backend"
    (folder / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        replace_symlink(folder, "../a")
    assert folder.is_dir() and not folder.is_symlink()
    assert _leftovers(tmp_path) == []


def test_replace_symlink_clears_a_temporary_an_interrupted_swap_left(tmp_path: Path) -> None:
    link = tmp_path / "backend"
    os.symlink("stale", temporary_name(link))
    replace_symlink(link, "../a")
    assert os.readlink(link) == "../a"
    assert _leftovers(tmp_path) == []


def test_a_temporary_a_killed_writer_left_is_removed_by_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "last-setup.json"
    no_such_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # never a live process
    dead = tmp_path / f".last-setup.json.tmp-{no_such_pid}"
    dead_thread = tmp_path / f".last-setup.json.tmp-{no_such_pid}-77"
    live = tmp_path / ".last-setup.json.tmp-1"  # init's: a writer that is alive is never touched
    other = tmp_path / f".other.json.tmp-{no_such_pid}"  # another file's temporary: not this write's business
    for leftover in (dead, dead_thread, live, other):
        leftover.write_text("half")
    write_atomic(target, "{}")
    assert target.read_text() == "{}"
    assert not dead.exists() and not dead_thread.exists()
    assert live.exists() and other.exists()
