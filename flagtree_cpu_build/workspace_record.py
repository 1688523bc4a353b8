"""What a workspace is for: its recipe, variant and lock location, recorded when the workspace is made.

Like west's ``.west/config`` (which names a workspace's manifest), ``.flagtree-cpu/workspace.json`` says which
recipe the workspace was set up with, so a later command — by ``-w`` or from a folder inside it — uses that recipe
without being told, and a command given another recipe is refused instead of rewriting the first one's lock and
state. The recipe is named three ways: its name (what is compared), the sha256 of its file (what changed since),
and where it came from (a bundled name, or a file's path: what is loaded again).

The record is read like every file someone else may have put there: a regular file only, size-capped while
reading, strict JSON, every field checked for its type. A damaged record is a clear error (exit 2) with the way
out, never a traceback and never a guess. It is written atomically: a reader sees the old record or the new one.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import strict_json
from .atomic import write_atomic
from .errors import UsageError
from .regular_file import NotRegularFile, TooLarge, read_capped

RECORD_NAME = "workspace.json"
SCHEMA = "flagtree-cpu/workspace/v1"
MAX_RECORD_BYTES = 64 << 10  # a record is a few hundred bytes
Origin = Literal["bundled", "file"]


@dataclass(frozen=True)
class WorkspaceRecord:
    recipe: str  # the recipe's name (what `recipe list` shows; what a different --recipe is compared by)
    digest: str  # sha256 of the recipe file's bytes when recorded
    origin: Origin  # "bundled": loaded again by name; "file": loaded again from ``path``
    path: str  # the recipe file (absolute)
    variant: str | None = None  # the variant it was set up with (None: the recipe has none)
    lock_file: str | None = None  # --lock-file (absolute); None: the lock in the state folder

    @property
    def recipe_arg(self) -> str:
        """What --recipe would say to load this recipe again: the bundled name, or the file."""
        return self.recipe if self.origin == "bundled" else self.path

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "recipe": {"name": self.recipe, "sha256": self.digest, "origin": self.origin,
                                             "path": self.path},
                "variant": self.variant, "lock_file": self.lock_file}


def record_path(state_dir: Path) -> Path:
    return state_dir / RECORD_NAME


def read_record(state_dir: Path) -> WorkspaceRecord | None:
    """The record in ``state_dir``; None when there is none (a workspace made before records, or none yet).
    Anything else that is not a record of ours is a UsageError naming the file and the way out."""
    path = record_path(state_dir)
    try:
        data = read_capped(path, MAX_RECORD_BYTES)
    except FileNotFoundError:
        return None
    except TooLarge:
        raise _damaged(path, f"it is larger than {MAX_RECORD_BYTES >> 10} KiB, which no record of ours is") from None
    except NotRegularFile as exc:
        raise _damaged(path, f"it is {exc.kind}, not a regular file") from None
    except OSError as exc:
        raise _damaged(path, f"it cannot be read ({exc.strerror or exc})") from None
    try:
        document = strict_json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, ambiguous JSON, absurdly nested
        raise _damaged(path, f"it is not JSON ({str(exc)[:120]})") from None
    return _parsed(path, document)


def _parsed(path: Path, document: object) -> WorkspaceRecord:
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise _damaged(path, f"it is not a {SCHEMA} record")
    recipe = document.get("recipe")
    if not isinstance(recipe, dict):
        raise _damaged(path, "its 'recipe' is not an object")
    fields = {key: recipe.get(key) for key in ("name", "sha256", "origin", "path")}
    bad = [key for key, value in fields.items() if not isinstance(value, str) or not value or len(value) > 4096]
    if bad or fields["origin"] not in ("bundled", "file") or not Path(str(fields["path"])).is_absolute():
        raise _damaged(path, f"its recipe entry is not valid ({', '.join(bad) or 'origin or path'})")
    variant, lock_file = document.get("variant"), document.get("lock_file")
    for key, value in (("variant", variant), ("lock_file", lock_file)):
        if value is not None and (not isinstance(value, str) or not value or len(value) > 4096):
            raise _damaged(path, f"its {key!r} is not a string")
    if lock_file is not None and not Path(lock_file).is_absolute():
        raise _damaged(path, "its 'lock_file' is not an absolute path")
    return WorkspaceRecord(str(fields["name"]), str(fields["sha256"]), fields["origin"],  # type: ignore[arg-type]
                           str(fields["path"]), variant, lock_file)


def _damaged(path: Path, why: str) -> UsageError:
    quoted = shlex.quote(str(path))
    return UsageError(f"the workspace record {path} is damaged: {why}",
                      details=("it names the recipe, variant and lock this workspace was set up with",),
                      fix=f"mv {quoted} {shlex.quote(f'{path}.damaged')}, then run the command again with the "
                      "workspace's --recipe (and --variant): the next command that changes the workspace records "
                      "them again")


def write_record(state_dir: Path, record: WorkspaceRecord) -> None:
    write_atomic(record_path(state_dir), json.dumps(record.to_json(), indent=2) + "\n")
