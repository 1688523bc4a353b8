"""The workspace's ``logs/`` folder: one file per run and kind (``build-20250101-120000.log``,
``setup-20250101-120000.json``), and only the newest few of each kind kept, so a no-op run repeated all day
does not grow the folder without end.

Pruning happens when a new file of that kind is named, and only among that kind. It is safe without a lock
of its own: every command that writes logs holds the workspace (``workspace.exclusive_use``), so no other
flagtree-cpu process is writing into this folder; inside one run, files of one kind are named one after
another, and the file just named is the newest, which is never removed. Only names of the tool's own pattern
are touched: anything else a user keeps in ``logs/`` stays.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

# how many files of one kind (build logs, setup reports, ...) a workspace keeps: the newest 10
KEEP_PER_KIND = 10

_NAME = re.compile(r"^(?P<kind>.+)-(?P<stamp>\d{8}-\d{6})(?:-(?P<n>\d+))?(?P<suffix>\.log|\.json)$")


def new_log_path(logs_dir: Path, kind: str, suffix: str = ".log") -> Path:
    """``logs/<kind>-<timestamp>[-<n>]<suffix>``, never one that exists and always after every file of its kind
    (a name freed by pruning is not taken again); the oldest of its kind beyond ``KEEP_PER_KIND`` (counting
    the new one) are removed."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    taken = [n for n_stamp, n, _ in _files_of(logs_dir, kind, suffix) if n_stamp == stamp]
    n = max(taken, default=0) + 1
    path = logs_dir / (f"{kind}-{stamp}{suffix}" if n == 1 else f"{kind}-{stamp}-{n}{suffix}")
    while path.exists():  # a name of another form in the way (a folder): step past it
        n += 1
        path = logs_dir / f"{kind}-{stamp}-{n}{suffix}"
    prune(logs_dir, kind, suffix, keep=KEEP_PER_KIND - 1, spare=path)
    return path


def _files_of(logs_dir: Path, kind: str, suffix: str) -> list[tuple[str, int, Path]]:
    """The files of one kind as (time in the name, number in the name, path), oldest first."""
    if not logs_dir.is_dir():
        return []
    found = []
    for entry in logs_dir.iterdir():
        match = _NAME.match(entry.name)
        if match and match["kind"] == kind and match["suffix"] == suffix:
            found.append((match["stamp"], int(match["n"] or 1), entry))
    return sorted(found)


def prune(logs_dir: Path, kind: str, suffix: str, *, keep: int, spare: Path) -> list[Path]:
    """Remove all but the newest ``keep`` files of ``kind`` (by the time in their names), never ``spare``.
    Returns what was removed. A file that vanished or cannot be removed is left to the next run."""
    ours = [(stamp, n, entry) for stamp, n, entry in _files_of(logs_dir, kind, suffix)
            if entry != spare and (entry.is_symlink() or entry.is_file())]  # a folder of that name is not ours
    removed = []
    for _, _, entry in ours[:max(0, len(ours) - keep)]:
        try:
            entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    return removed
