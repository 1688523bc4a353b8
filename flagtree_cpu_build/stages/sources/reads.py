"""The values a sync reads from the files it checked out (``source_reads``), recorded in the lock."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...errors import SourceError
from ...lockfile import read_lock, update_lock
from ...source_reads import read_locks

if TYPE_CHECKING:
    from ...recipe import Recipe
    from ...stagekit.stage import RunOptions
    from ...workspace import Workspace


def record_reads(recipe: Recipe, ws: Workspace, options: RunOptions) -> list[str]:
    """The values the artifacts read from the files just checked out, recorded in the lock (at the commits it
    records), in words; one the lock records otherwise is a change, which --frozen refuses."""
    lock = read_lock(ws.lock_file)
    entries = read_locks(recipe, ws.root, lock)
    old = lock.reads if lock else {}
    changed = {key: entry for key, entry in entries.items() if key not in old or old[key].value != entry.value}
    if options.frozen and changed:
        raise SourceError("--frozen: values read from the sources' files differ from the lock's", details=tuple(
            f"{key}: read {e.value!r} from {e.source}'s {e.file}, the lock records "
            f"{old[key].value if key in old else 'nothing'}" for key, e in changed.items()),
            fix="run `flagtree-cpu sync` (without --frozen) and commit the updated lock file")
    if entries and not options.frozen and entries != old:
        update_lock(ws.lock_file, recipe.name, recipe.digest, lambda base: replace(base, reads=entries),
                    variant=recipe.variant)
    return [f"{e.value} read from {e.source}'s {e.file}" + (f" (was {old[key].value})" if key in old else "")
            for key, e in changed.items()]
