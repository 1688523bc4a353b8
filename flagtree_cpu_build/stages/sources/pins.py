"""Which commit each recipe source must be at: the recipe's pin, else the lock file's, else the
branch or tag resolved now on the server (``git ls-remote``). ``pinned`` is that rule, once: the sources
plan (``stages/sources/plan``) decides with it, sync acts on the plan, and `lock` resolves with it here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ...errors import SourceError
from ...gitcmd import remote_refs
from ...lockfile import Lock, SourceLock
from ...recipe import Recipe, Source

if TYPE_CHECKING:
    from ...stagekit.stage import RunOptions

_SHA = re.compile(r"[0-9a-f]{40}")
Origin = Literal["recipe", "lock", "ref", "read"]  # where a pin comes from ("read": another source's file)


@dataclass(frozen=True)
class Pin:
    name: str
    url: str
    ref: str | None
    commit: str
    resolved_from: Origin


def pinned(source: Source, entry: SourceLock | None, *, update: bool = False) -> tuple[str | None, Origin]:
    """The one rule for which commit a source must be at, and where it comes from: the recipe's pin, else the
    lock's entry when it was recorded for the same repository and ref (and the refs are not being resolved
    again, ``update``), else the ref's tip on the server — None here: only the caller knows whether it may ask."""
    if source.commit:
        return source.commit.lower(), "recipe"
    if source.pin_reader[0] is not None:  # read from the file once its source is checked out (sync, read_pin)
        if entry is not None and not update and same_repository(entry.url, source.url) and \
                entry.resolved_from == "read":
            return entry.commit, "lock"
        return None, "read"
    if entry is not None and not update and lock_applies(entry, source):
        return entry.commit, "lock"
    return None, "ref"


def resolve_pins(recipe: Recipe, lock: Lock | None, options: RunOptions, *, root: Path | None = None
                 ) -> dict[str, Pin]:
    """The commit of every source: the recipe's pin, else the lock's, else the ref resolved now; a commit read from
    another source's file (``commit_from``) is read in ``root``'s checkout of it."""
    decided = {name: pinned(recipe.sources[name], lock.sources.get(name) if lock else None, update=options.update)
               for name in recipe.sources_in_order()}
    refs: dict[str, str] = {}
    for name, (commit, _origin) in decided.items():
        if recipe.sources[name].ref_from is not None and root is not None:
            got, origin, ref = ref_pin(recipe, root, name, lock, options, may_ask=True)
            if ref is not None:
                decided[name], refs[name] = (got, origin), ref
            elif commit is None:  # not there, and the lock has nothing: raises, saying why
                read_pin(recipe, root, name, lock, options)
        elif recipe.sources[name].commit_from is not None and root is not None:
            from ...source_reads import read_commit

            read, problem = read_commit(recipe, root, name)  # the file as checked out now
            if read is not None:
                decided[name] = (read, "read")
            elif problem is not None or commit is None:  # not there: the lock's, when it has one
                read_pin(recipe, root, name)  # raises, saying why
    return with_read_refs(settle_pins(recipe, lock, decided, options), refs, lock)


def with_read_refs(pins: dict[str, Pin], refs: Mapping[str, str], lock: Lock | None) -> dict[str, Pin]:
    """The pins of ``ref_from`` sources carry the branch or tag read (the lock's entry records it): the one read now,
    else the one the lock recorded with the commit."""
    out = dict(pins)
    for name, pin in pins.items():
        entry = lock.sources.get(name) if lock else None
        ref = refs.get(name) or (entry.ref if entry is not None and pin.resolved_from == "lock" else None)
        if ref is not None:
            out[name] = replace(pin, ref=ref)
    return out


def ref_pin(recipe: Recipe, root: Path, name: str, lock: Lock | None, options: RunOptions, *,
            may_ask: bool) -> tuple[str | None, Origin, str | None]:
    """A ``ref_from`` source's commit: the branch or tag its file names, resolved once: the lock's commit when the
    lock recorded that name for this repository (and --update is not resolving again), else the server's answer
    (``may_ask``; --frozen and --offline refuse to ask). Returns (commit, origin, ref); ref None: the file is not
    checked out. Raises SourceError when the file names no branch or tag, or the name cannot be resolved."""
    from ...source_reads import read_ref

    source = recipe.sources[name]
    reader = source.ref_from
    assert reader is not None
    ref, problem = read_ref(recipe, root, name)
    if problem is not None:
        raise SourceError(problem, fix=f"correct sources.{name}.ref_from, or pin {reader.source} to a commit whose "
                          f"{reader.file} names a branch or tag of {source.url}")
    if ref is None:
        return None, "read", None
    entry = lock.sources.get(name) if lock else None
    if entry is not None and same_repository(entry.url, source.url) and entry.ref == ref and \
            entry.resolved_from == "read" and not (options.update and not options.frozen):
        return entry.commit, "lock", ref
    where = f"{reader.source}'s {reader.file} names {ref!r}"
    if options.frozen:
        locked = f"{entry.ref!r} at {entry.commit[:12]}" if entry is not None else "nothing"
        raise SourceError("--frozen: the lock file does not match the recipe",
                          details=(f"{name}: the lock records {locked}, {where}",),
                          fix="run `flagtree-cpu lock` (without --frozen) and commit the updated lock file")
    if options.offline:
        raise SourceError(f"source {name}: {where}, which needs the network to resolve, and --offline forbids it",
                          fix="run `flagtree-cpu lock` once with network")
    if not may_ask:
        return None, "read", ref
    return ls_remote(source.url, ref, name), "read", ref


def settle_pins(recipe: Recipe, lock: Lock | None, decided: Mapping[str, tuple[str | None, Origin]],
                options: RunOptions) -> dict[str, Pin]:
    """The pins of the sources ``decided`` names (as ``pinned`` decided: commit, origin), in its order: with
    --frozen the lock must already say each one; a ref whose tip is not known yet is resolved on the server,
    which --offline forbids. Raises SourceError naming every source the frozen lock does not answer for."""
    pins: dict[str, Pin] = {}
    frozen_problems = []
    for name, (commit, origin) in decided.items():
        source = recipe.sources[name]
        entry = lock.sources.get(name) if lock else None
        if origin in ("recipe", "read") and commit is not None:
            if options.frozen and (entry is None or entry.commit != commit):
                locked = entry.commit[:12] if entry else "nothing"
                reader = source.pin_reader[0]
                by = "the recipe pins" if origin == "recipe" or reader is None else \
                    f"{reader.source}'s {reader.file} names"
                frozen_problems.append(f"{name}: the lock records {locked}, {by} {commit[:12]}")
            pins[name] = Pin(name, source.url, source.ref, commit, origin)
        elif origin == "lock" and commit is not None:
            pins[name] = Pin(name, source.url, source.ref, commit, "lock")
        elif options.frozen:
            why = ("the lock has no entry" if entry is None else
                   f"the lock records {entry.url} @ {entry.ref}, the recipe says {source.url} @ {source.ref}")
            frozen_problems.append(f"{name}: follows {source.ref!r} and {why}")
        elif commit is not None:  # the ref's tip, asked of the server by whoever decided
            pins[name] = Pin(name, source.url, source.ref, commit, "ref")
        elif options.offline:
            raise SourceError(f"source {name} follows {source.ref!r}, which needs the network to resolve, "
                              "and --offline forbids it", fix="pin the commit in the recipe, or run "
                              "`flagtree-cpu lock` once with network")
        else:
            pins[name] = Pin(name, source.url, source.ref, ls_remote(source.url, source.ref or "HEAD", name), "ref")
    if frozen_problems:
        raise SourceError("--frozen: the lock file does not match the recipe", details=tuple(frozen_problems),
                          fix="run `flagtree-cpu lock` (without --frozen) and commit the updated lock file")
    return pins


def read_pin(recipe: Recipe, root: Path, name: str, lock: Lock | None = None,
             options: RunOptions | None = None) -> tuple[str, Origin]:
    """The commit of a source that reads it from another source's file (``commit_from``; ``ref_from``: the branch or
    tag it names, resolved by ``ref_pin``), read now that the other one is checked out. Raises SourceError when the
    file is not there or names no commit."""
    from ...source_reads import read_commit

    reader, key = recipe.sources[name].pin_reader
    assert reader is not None
    problem = None
    if key == "ref_from" and options is not None:
        commit, origin, _ref = ref_pin(recipe, root, name, lock, options, may_ask=True)
        if commit is not None:
            return commit, origin
    else:
        commit, problem = read_commit(recipe, root, name)
        if commit is not None:
            return commit, "read"
    raise SourceError(problem or f"source {name} reads its {key[:-5]} from {reader.source}'s {reader.file}, which "
                      "is not there", fix=f"check {reader.source} out (flagtree-cpu sync), or correct "
                      f"sources.{name}.{key}")


def lock_origin(pin: Pin, source: Source) -> Literal["recipe", "ref", "read"]:
    """What the lock records as the commit's origin (a commit taken from the lock was resolved or read then)."""
    if pin.resolved_from == "recipe":
        return "recipe"
    return "read" if source.pin_reader[0] is not None else "ref"


def lock_applies(entry: SourceLock, source: Source) -> bool:
    """Whether a lock entry answers for this source: recorded for the same repository and the same ref.
    (Another ref is another question; the plans and sync both ask it this way.)"""
    return same_repository(entry.url, source.url) and entry.ref == source.ref


def ls_remote(url: str, ref: str, name: str) -> str:
    if _SHA.fullmatch(ref):
        return ref
    refs = remote_refs(url, ref, source=name)
    for candidate in (f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", ref):
        if candidate in refs:
            return refs[candidate]
    raise SourceError(f"{url} has no branch or tag {ref!r}",
                      fix=f"check sources.{name}.ref; `git ls-remote {url}` lists what exists")


def same_repository(a: str, b: str) -> bool:
    """Whether two URLs name the same repository (case of the scheme, a trailing slash or .git aside)."""
    def norm(url: str) -> str:
        url = url.strip().rstrip("/").removesuffix(".git").rstrip("/")
        scheme, sep, rest = url.partition("://")
        return f"{scheme.lower()}{sep}{rest}" if sep else url

    return norm(a) == norm(b)
