"""Putting what a bundle import extracted in place: the locks compared and written, files moved into place.

(From ``importer``, which decides what is lacking and in which order it is seeded.)
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from ..atomic import temporary_name, write_atomic
from ..lockfile import Lock
from ..stagekit.stage import Action, Status


def conflicts(existing: Lock, bundled: Lock) -> list[str]:
    """Where the workspace's lock and the bundle's pin the same thing differently."""
    found = []
    for name, entry in bundled.sources.items():
        mine = existing.sources.get(name)
        if mine is not None and mine.commit != entry.commit:
            found.append(f"source {name}: this workspace has {mine.commit[:12]}, the bundle {entry.commit[:12]}")
    for name, art in bundled.artifacts.items():
        have = existing.artifacts.get(name)
        if have is not None and (have.url, have.sha256) != (art.url, art.sha256):
            found.append(f"artifact {name}: this workspace has {have.sha256[:12]} ({have.url}), the bundle "
                         f"{art.sha256[:12]} ({art.url})")
    return found


def written(path: Path, text: str, subject: str, status: Status, how: str) -> Action:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text, durable=True)  # the bundle's bytes: the lock as its maker wrote it
    return Action(subject, status, f"{path} {how}", {"path": str(path)})


def move_into(src: Path, dest: Path) -> None:
    """``src`` at ``dest`` in one step (a copy beside ``dest`` first when they are on two file systems)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        tmp = temporary_name(dest)
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
