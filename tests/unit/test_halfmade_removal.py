"""halfmade.remove_tree: a half-made folder is removed even while a writer still adds files to it (a plain
``shutil.rmtree`` fails "Directory not empty" in 28 of 30 such races on this machine), and a partial folder
removed by its owner goes the same way. The writer is a thread here (unit tests start no process)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from flagtree_cpu_build.halfmade import remove_tree
from flagtree_cpu_build.partials import PartialFolder


@contextmanager
def writing_into(folder: Path) -> Iterator[None]:
    """A writer adding files to seven subfolders of ``folder`` as fast as it can, by absolute paths; it fails
    quietly once the folder is gone (it never re-creates ``folder`` itself)."""
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            sub = folder / f"d{i % 7}"
            try:
                if not sub.is_dir():
                    sub.mkdir()
                (sub / f"f{i}").write_bytes(b"x")
            except OSError:
                pass
            i += 1

    for d in range(7):
        (folder / f"d{d}").mkdir(parents=True)
        for i in range(50):
            (folder / f"d{d}" / f"x{i}").write_bytes(b"")
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join()


@pytest.mark.parametrize("trial", range(5))
def test_a_folder_is_removed_while_a_writer_still_adds_to_it(tmp_path: Path, trial: int) -> None:
    folder = tmp_path / "half"
    with writing_into(folder):
        remove_tree(folder)
        assert not folder.exists()


def test_a_partial_folder_is_removed_by_its_owner_while_a_writer_lingers(tmp_path: Path) -> None:
    folder = PartialFolder.create(tmp_path / "llvm")
    with writing_into(folder.tree):
        folder.remove()
        assert not folder.path.exists()


def test_a_link_at_a_half_made_folders_name_is_removed_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (target / "keep").mkdir(parents=True)
    link = tmp_path / ".x.flagtree-cpu-partial"
    link.symlink_to(target)
    remove_tree(link)
    assert not os.path.lexists(link) and (target / "keep").is_dir()
