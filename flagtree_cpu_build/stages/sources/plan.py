"""Which commit each source must be at, and what `sync` would do to get there.

The one rule for "which commit" is ``pins.pinned``: the recipe's pin, else the lock's entry when it
was recorded for the same repository *and* the same ref (a changed ref is a new question), else the
ref's tip, asked of the server only when the caller may use the network (``setup --dry-run`` online,
and sync). Each item carries its decision (``data["pin"]``, ``data["pinned_by"]``; ``planned_pin``
reads them back), and sync moves each source to exactly that: so status, doctor and build's
preflight can never call a checkout current that sync would move.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import SourceError
from ...stagekit.plan import PlanItem

if TYPE_CHECKING:
    from ...lockfile import Lock, SourceLock
    from ...recipe import Source
    from ...stagekit.stage import RunOptions, StageContext
    from .pins import Origin


def wanted_commit(source: Source, entry: SourceLock | None, *, update: bool = False) -> str | None:
    """The commit the recipe or the lock pins; None when the ref must be resolved on the server."""
    from .pins import pinned

    return pinned(source, entry, update=update)[0]


def planned_pin(item: PlanItem) -> tuple[str | None, Origin]:
    """The commit the item's source is to be at, and where it comes from ("recipe", "lock", or "ref": the ref's tip
    then, None when the plan did not ask the server)."""
    return item.data.get("pin"), item.data["pinned_by"]


def plan_sources(ctx: StageContext, lock: Lock | None, options: RunOptions, *,
                 count_changes: bool = True) -> list[PlanItem]:
    """``count_changes=False`` (build's preflight, which only asks "current?") skips counting the local
    changes of a checkout that is at its pin: they decide nothing there, and git status is the slow part.

    Planned for sync's run (``options.for_run``), the submodules are not asked either: the run brings them to
    their recorded commits itself, so the answer would decide nothing and cost a recursive git walk."""
    return [_with_skipped(ctx, _plan_one(ctx, name, lock, options, count_changes))
            for name in ctx.recipe.sources_in_order()]


def skipped_note(labels: tuple[str, ...]) -> str:
    """Why the patches a source's recipe entry lists are not applied on this host (``Patch.when``)."""
    return "; ".join(f"patch {label} not applied: its `when` does not hold here" for label in labels)


def _with_skipped(ctx: StageContext, item: PlanItem) -> PlanItem:
    from dataclasses import replace

    skipped = ctx.recipe.sources[item.subject].skipped_patches
    return replace(item, detail=f"{item.detail}; {skipped_note(skipped)}") if skipped else item


def _plan_one(ctx: StageContext, name: str, lock: Lock | None, options: RunOptions, count_changes: bool) -> PlanItem:
    from ...errors import FlagtreeCpuError
    from ...gitcmd import has_commit, head, modified_files, submodules_off
    from .pins import pinned

    source = ctx.recipe.sources[name]
    checkout = ctx.workspace.root / ctx.recipe.source_path(name)
    wanted, pinned_by = pinned(source, lock.sources.get(name) if lock else None, update=options.update)
    read_ref = None
    if source.commit_from is not None or source.ref_from is not None:
        read = _read_item(ctx, name, checkout, lock, options)
        if isinstance(read, PlanItem):
            return read
        wanted, pinned_by, read_ref = read or (wanted, pinned_by, None)
    tip = None
    if wanted is None and pinned_by != "read" and options.ask_network and not options.offline:
        tip = _tip(source.url, source.ref or "HEAD", name, for_run=options.for_run)
    data: dict[str, object] = {"path": str(checkout), "pin": wanted or tip, "pinned_by": pinned_by}
    if wanted is None and pinned_by == "read":  # its commit is read once the other source is checked out
        reader, key = source.pin_reader
        assert reader is not None
        there = (checkout / ".git").exists()
        what = "commit" if key == "commit_from" else "branch or tag"
        named = f"{what} {read_ref!r} {reader.source}'s {reader.file} names" if read_ref else \
            f"{what} {reader.source}'s {reader.file} names"
        return PlanItem("sources", name, "differs" if there else "missing",
                        f"its {what} is read from {reader.source}'s {reader.file} after {reader.source} is synced"
                        if read_ref is None else f"the {named}, resolved when synced",
                        f"{'move' if there else 'clone'} {name} to the {named}",
                        f"{what} read from {reader.source}'s {reader.file}", data, "updated" if there else "created")
    if wanted is None and options.offline:  # only the server can say the ref's tip: the run stops (pins.settle_pins)
        return PlanItem("sources", name, "differs", f"follows {source.ref!r}; nothing locked for it",
                        f"stop: {name} follows {source.ref!r}, which needs the network to resolve, and --offline "
                        "forbids it", "not pinned, not in the lock file", data, "stop", SourceError)
    pin = f"@{(wanted or tip or '')[:7]}" if wanted or tip else f"({source.ref}, resolved when cloned)"
    if not (checkout / ".git").exists():
        if checkout.exists() and not (checkout.is_dir() and not any(checkout.iterdir())):
            return PlanItem("sources", name, "conflict", f"{checkout} exists but is not a git checkout",
                            f"stop: move {checkout} away", "something is in the way", data, "stop", SourceError)
        unreachable = _offline_without(ctx, source.url, target=wanted, options=options)
        if unreachable:
            return PlanItem("sources", name, "missing", f"not checked out at {checkout}",
                            f"stop: {name} is not checked out at {checkout} and --offline forbids cloning it: "
                            f"{unreachable}", "missing", data, "stop", SourceError)
        return PlanItem("sources", name, "missing", f"not checked out at {checkout}", f"clone {name} {pin}",
                        "missing", data, "created")
    at = head(checkout) or ""
    target = wanted or tip
    changed: list[str] = []
    if count_changes or at != target:  # at another commit, local changes decide between moving and stopping
        try:
            changed = _users_changes(ctx, name, lock) if source.patches else modified_files(checkout)
        except FlagtreeCpuError as exc:  # a checkout git cannot read: a change nobody should build on
            changed = [f"(git status failed: {exc.message})"]
        data["modified_files"] = len(changed)
    data["head"] = at or None
    dirty = f"; {len(changed)} modified tracked file{'s' if len(changed) != 1 else ''}" if changed else ""
    if target is None:
        why = "not in the lock file" if not lock or name not in lock.sources else "the recipe's ref or url changed"
        return PlanItem("sources", name, "differs", f"at {at[:12]}; nothing locked for {source.ref!r}{dirty}",
                        f"pin {name} to the tip of {source.ref}", why, data, "updated")
    if at != target:
        if changed:
            return PlanItem("sources", name, "dirty", f"at {at[:12]}, the pin is {target[:12]}{dirty}",
                            f"stop: {name} has local changes (commit or stash them, or --allow-dirty)",
                            "at another commit", data, "stop", SourceError)
        reason = "at another commit" if wanted else f"the tip of {source.ref!r} is another commit"
        if options.offline and not has_commit(checkout, target):  # a move offline takes only what it holds
            return PlanItem("sources", name, "differs", f"at {at[:12]}, the pin is {target[:12]}",
                            f"stop: commit {target[:12]} of {name} is not in {checkout} and --offline forbids "
                            "fetching it", reason, data, "stop", SourceError)
        return PlanItem("sources", name, "differs", f"at {at[:12]}, the pin is {target[:12]}",
                        f"move {name} {at[:7]} -> {target[:7]}", reason, data, "updated")
    # none: sync leaves them alone; for the run: it checks them itself
    wrong = submodules_off(checkout) if source.submodules != "none" and not options.for_run else []
    if wrong:
        return PlanItem("sources", name, "differs", f"at its pin; {len(wrong)} submodule(s) are not at their "
                        f"recorded commits ({', '.join(wrong[:2])})", f"update {name}'s submodules",
                        "submodules moved", data, "updated")
    return PlanItem("sources", name, "ok", f"at {at[:12]}{dirty}", data=data)


def _read_item(ctx: StageContext, name: str, checkout: Path, lock: Lock | None, options: RunOptions
               ) -> tuple[str | None, Origin, str | None] | PlanItem | None:
    """A source whose commit (``commit_from``) or branch or tag (``ref_from``) another source's file names: the
    commit read now, an item that stops (the file names no commit, or no ref that can be resolved), or None (the file
    is not there yet: the lock's, else read during sync)."""
    from ...source_reads import read_commit
    from .pins import ref_pin

    if ctx.recipe.sources[name].ref_from is not None:
        try:
            commit, origin, ref = ref_pin(ctx.recipe, ctx.workspace.root, name, lock, options,
                                          may_ask=options.ask_network and not options.offline)
        except SourceError as exc:
            said = ": ".join([exc.message, *exc.details])
            return PlanItem("sources", name, "conflict", said, f"stop: {said}",
                            "the branch or tag cannot be resolved", {"path": str(checkout), "pin": None,
                                                                     "pinned_by": "read"}, "stop", SourceError)
        return (commit, origin, ref) if ref is not None else None
    commit, problem = read_commit(ctx.recipe, ctx.workspace.root, name)
    if problem is not None:
        return PlanItem("sources", name, "conflict", problem, "stop: correct the rule or pin the other source",
                        "the commit cannot be read", {"path": str(checkout), "pin": None, "pinned_by": "read"},
                        "stop", SourceError)
    return (commit, "read", None) if commit is not None else None


def _offline_without(ctx: StageContext, url: str, *, target: str | None, options: RunOptions) -> str | None:
    """Why an offline sync could not get ``target`` of ``url`` (None when it can, or when not offline): the run
    clones and fetches only from the git cache (--git-cache, or the mirrors a bundle import seeded)."""
    if not options.offline:
        return None
    from ...gitcache import GitCache, chosen_git_cache
    from ...gitcmd import has_commit

    root = chosen_git_cache(ctx.workspace, options.git_cache)
    if root is None:
        return "no git cache to take it from (--git-cache DIR, or `bundle import` a bundle that carries it)"
    mirror = GitCache(root, ctx.ui).mirror_path(url)
    if not (mirror / "HEAD").is_file():
        return f"the git cache {root} holds no mirror of {url}"
    if target and not has_commit(mirror, target):
        return f"the git cache's mirror {mirror} does not hold {target[:12]}"
    return None


def _users_changes(ctx: StageContext, name: str, lock: Lock | None) -> list[str]:
    """Modified tracked files other than the recipe's own patches (sync takes those back before it moves)."""
    from .source_patches import changes_besides_patches

    recorded = {p.file: p.sha256 for p in lock.sources[name].patches} if lock and name in lock.sources else None
    return changes_besides_patches(ctx.recipe, name, ctx.workspace.root, ctx.workspace.recipe_state / "patches",
                                   recorded)


def _tip(url: str, ref: str, name: str, *, for_run: bool) -> str | None:
    """The ref's commit on the server now (what sync would move to), or None when it cannot be asked.

    Planned for the run, a host without DNS answer stops here: sync would only ask it again."""
    from ...errors import FlagtreeCpuError
    from .pins import ls_remote

    try:
        return ls_remote(url, ref, name)
    except FlagtreeCpuError as exc:
        if for_run and exc.unresolved_hosts:
            raise
        return None

