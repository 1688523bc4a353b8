"""One `fetch` error for every artifact that failed: one failed artifact does not stop the others.

Each artifact is published (or fails) on its own; the trees that were published are recorded in the lock, and
then the run stops with exit 4. One failure is raised as it is (its own words, fix and kind); several become one
error naming each, with each one's message and fix as details, so a user fixes them all in one pass instead of
discovering them one run at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ArtifactError


def all_failures(failures: Sequence[tuple[str, ArtifactError]], total: int) -> ArtifactError:
    if len(failures) == 1:
        return failures[0][1]
    names = [name for name, _ in failures]
    details: list[str] = []
    for name, error in failures:
        details.append(f"{name}: {error.message}")
        details += [f"  {line}" for line in error.details]
        if error.fix:
            details.append(f"  fix: {error.fix}")
    merged = ArtifactError(f"{len(failures)} of {total} artifacts could not be published: {', '.join(names)} "
                           "(the others were)", details=tuple(details),
                           fix="fix each as listed above, then run the same command again: what is published "
                           "already is not fetched again")
    merged.unresolved_hosts = tuple(dict.fromkeys(h for _, e in failures for h in e.unresolved_hosts))
    return merged
