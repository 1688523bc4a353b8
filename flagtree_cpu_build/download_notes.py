"""A partial download's note: which URL its bytes came from and the file's size, kept beside the ``.part``.

Resuming a ``.part`` from another URL could splice two files, so a part whose note is missing, damaged or
names another URL starts again. (Split from ``download.py``, which alone speaks HTTP; these only touch files.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .atomic import write_atomic
from .errors import ArtifactError
from .ui import UI


def source_note(part: Path) -> Path:
    """Which URL a .part file came from, and the file's size; resuming from another URL could splice two files."""
    return part.with_name(part.name + ".source")


def parse_source_note(part: Path) -> dict[str, Any] | None:
    """The .part's note, read only: {} when there is none, None when it is damaged (a folder, not JSON)."""
    note = source_note(part)
    if not note.exists() and not note.is_symlink():
        return {}
    try:
        text = note.read_text()
        data = json.loads(text) if text.lstrip().startswith("{") else {"url": text.strip()}  # an older note: the URL
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    valid = isinstance(data, dict) and isinstance(data.get("url"), str) and \
        isinstance(data.get("total", 0), (int, type(None)))
    return data if valid else None


def read_source_note(part: Path, ui: UI | None) -> dict[str, Any]:
    """The .part's note; a damaged one costs the part, which is then of unknown origin."""
    data = parse_source_note(part)
    if data is not None:
        return data
    if ui is not None and part.exists():
        ui.warn(f"{source_note(part)}, which records where {part.name} came from, is damaged; the partial "
                "download is discarded and starts again")
    discard_part(part)
    return {}


def write_source_note(part: Path, note: dict[str, Any]) -> None:
    path = source_note(part)
    make_way(path)
    write_atomic(path, json.dumps(note))


def discard_part(part: Path) -> None:
    """Forget a partial download and its note (their bytes are wrong, or of unknown origin)."""
    for path in (part, source_note(part)):
        make_way(path)
        path.unlink(missing_ok=True)


def make_way(path: Path, warn: Callable[[str], None] | None = None) -> None:
    """Where the cache keeps a file, an empty folder is removed (with a warning); a folder with contents is
    not provably ours, so it is named and left alone."""
    if not path.is_dir() or path.is_symlink():
        return
    try:
        path.rmdir()
    except OSError:
        raise ArtifactError(f"{path} should be a file of flagtree-cpu's download cache but is a folder with "
                            "contents; it is left alone", fix=f"look inside, then remove it: rm -r {path}") from None
    if warn is not None:
        warn(f"removed the empty folder {path}, which stood where the download cache keeps a file")
