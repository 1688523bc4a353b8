"""The workspace's own JSON state files — build stamps, last validation and setup reports.

Each is a record of facts the tool can always establish again: a missing build stamp means
"build", a missing validation report means "validate". So a damaged one (truncated by a full
disk, not JSON, a folder, a FIFO or a link to a device where the file belongs) is treated as
absent — never an unexpected error, a hang or a read without end. Commands that change the
workspace move it aside as ``<name>.damaged`` first (the user's bytes are kept for a bug
report), and say so; read-only commands only report it. Writes are atomic: a reader sees the
old file or the new one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .atomic import write_atomic
from .errors import UsageError
from .regular_file import NotRegularFile, read_regular

Notice = Callable[[str], None]
MAX_STATE_BYTES = 64 << 20  # a stamp or a report is kilobytes


def read_state(path: Path, *, needs: Sequence[str] = (), repair: bool = False,
               notice: Notice | None = None) -> dict[str, Any] | None:
    """The JSON object at ``path`` with the keys in ``needs``; None when absent or damaged.

    A damaged file is reported through ``notice``; with ``repair`` it is also moved aside so the
    state is rebuilt cleanly by the command that reads it."""
    try:
        data = read_regular(path, MAX_STATE_BYTES)  # a FIFO or a link to /dev/zero there must not hang or eat memory
        if len(data) > MAX_STATE_BYTES:
            raise ValueError(f"it is larger than {MAX_STATE_BYTES >> 20} MiB, which no state file of ours is")
        document = json.loads(data.decode("utf-8"))
        if isinstance(document, dict) and all(key in document for key in needs):
            return document
        problem = "does not hold what flagtree-cpu wrote there"
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        problem = "is a folder, not a file"
    except NotRegularFile as exc:
        problem = f"is {exc.kind}, not a regular file"
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        problem = f"cannot be read ({type(exc).__name__}: {exc})"
    moved = _move_aside(path) if repair else None
    if notice is not None:
        what = f"moved to {moved.name}; " if moved else ""
        notice(f"{path} {problem}; {what}it is treated as missing and made again")
    return None


def write_state(path: Path, document: Any) -> None:
    """Write ``document`` as JSON atomically; a folder in the way is moved aside first (it is state, not
    the user's: the path is the tool's own)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        _move_aside(path)
    write_atomic(path, json.dumps(document, indent=2, default=str) + "\n")


def make_state_dir(path: Path) -> None:
    """A folder of the tool's own state; a file in its place is moved aside (it can only be damage)."""
    if path.exists() and not path.is_dir():
        _move_aside(path)
    path.mkdir(parents=True, exist_ok=True)


def _move_aside(path: Path) -> Path:
    """Rename a damaged state file to ``<name>.damaged`` (``.damaged-2`` ... when taken); never deletes."""
    target = path.with_name(path.name + ".damaged")
    n = 1
    while target.exists() or target.is_symlink():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{n}")
    try:
        os.rename(path, target)
    except OSError as exc:
        raise UsageError(f"the state file {path} is damaged and cannot be moved aside ({exc.strerror})",
                         fix=f"move it away yourself (mv {path} {path}.damaged) and run the command again") from exc
    return target
