"""The sync stage: every recipe source checked out at its pinned commit — never at the cost
of the user's work.

Sync acts on its plan (``stages/sources/plan``, made once for the run by ``registry.run_stage``, for
`sync` and setup alike): for each planned source (parents before the sources nested inside them), at the
commit the plan decided, clone it if missing (through the git cache when there is one), or move
an existing checkout to its pin after checking that nothing would be lost; bring submodules to
their recorded gitlinks; verify HEAD. Once every source is there, apply the recipe's patches
(a patch may come from another source's checkout), record everything in the lock file, and run
the recipe's compatibility checks. What this module refuses to do, and why:

* move a checkout with changes to tracked files (they would mix with another version)
  unless ``--allow-dirty`` — and even then git itself refuses if they conflict;
* move a detached HEAD whose commits no branch, tag or remote keeps, unless ``--force``;
* touch a checkout whose ``origin`` is another repository than the recipe's;
* delete or ``reset --hard`` anything. The only folders it removes are its own leftovers of an
  interrupted clone (``partials``: also those older versions left), and the only files it
  overwrites are those its own interrupted checkout left half written (``checkouts``).

The plan decides each pin by the rule in ``pins`` (``pinned``); ``pins.settle_pins`` holds it to
--frozen and --offline and asks the server for a tip the plan could not. Submodules are brought to
their gitlinks by ``submodules``, and recipe patches are applied and taken back by ``source_patches``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ...atomic import replace_symlink
from ...errors import SourceError
from ...gitcache import GitCache, chosen_git_cache
from ...gitcmd import effective_url, has_commit, head, modified_files, remote_url, unkept_commits
from ...gitops import clone, fetch_commit, fetch_origin, init_with_origin, set_ref
from ...lockfile import Lock, PatchLock, SourceLock, empty_lock, read_lock, update_lock, write_lock
from ...partials import PartialFolder, clear_leftovers
from ...probes import check_sources
from ...recipe import Recipe, Source
from ...source_reads import read_locks
from ...stagekit.plan import PlanItem
from ...stagekit.stage import Action, RunOptions, StageContext, StageResult
from ...workspace import Workspace
from .checkouts import finish_move, interrupted_move, interrupted_submodule_moves, move_to, settle
from .pins import Pin, lock_origin, read_pin, ref_pin, resolve_pins, same_repository, settle_pins, with_read_refs
from .plan import planned_pin, skipped_note
from .reads import record_reads
from .source_patches import SourcePatches
from .submodules import SubmoduleSync

PIN_REF = "refs/flagtree-cpu/pinned"  # keeps the pinned commit reachable (shallow clones, gc)


# --- the stage -------------------------------------------------------------------------------


def run_lock(ctx: StageContext, options: RunOptions) -> StageResult:
    """Resolve every source to a commit and write the lock file, without checking anything out."""
    start = time.monotonic()
    ws, recipe = ctx.workspace, ctx.recipe
    old = read_lock(ws.lock_file)
    pins = resolve_pins(recipe, old, options, root=ws.root)
    lock = old or empty_lock(recipe.name, recipe.digest, recipe.variant)
    actions, sources = [], {}
    for name, pin in pins.items():
        entry = lock.sources.get(name)
        if entry and entry.commit == pin.commit:
            sources[name] = entry
            actions.append(Action(name, "ok", f"{pin.commit[:12]} ({_origin_word(pin)})", _pin_data(pin)))
            continue
        sources[name] = SourceLock(url=pin.url, ref=pin.ref, commit=pin.commit,
                                   resolved_from=lock_origin(pin, recipe.sources[name]))
        status = "created" if entry is None else "updated"
        was = f" (was {entry.commit[:12]})" if entry else ""
        actions.append(Action(name, status, f"{pin.commit[:12]} ({_origin_word(pin)}){was}", _pin_data(pin)))
    # the trees already published and verified: their digests too, or `--frozen` refuses the lock just written
    from ..artifacts import published_locks

    published = published_locks(recipe, old, options, ws.root)
    for name, entry in published.items():
        if lock.artifacts.get(name) != entry:
            actions.append(Action(name, "updated" if name in lock.artifacts else "created",
                                  f"sha256 {entry.sha256[:12]} (published and verified here)",
                                  {"sha256": entry.sha256}))
    new = replace(lock, recipe=recipe.name, recipe_digest=recipe.digest, variant=recipe.variant, sources=sources,
                  artifacts={**lock.artifacts, **published})
    new = replace(new, reads={**lock.reads, **read_locks(recipe, ws.root, new)})
    if not options.frozen and new != old:
        write_lock(ws.lock_file, new)
    return StageResult("lock", tuple(actions), seconds=time.monotonic() - start)


def run_sync(ctx: StageContext, options: RunOptions, plan: Sequence[PlanItem]) -> StageResult:
    """Every source of ``plan`` (the sources plan, made for this run: ``registry.run_stage``) at the commit the
    plan decided for it."""
    start = time.monotonic()
    ws, recipe = ctx.workspace, ctx.recipe
    items = [item for item in plan if item.area == "sources"]
    if sorted(i.subject for i in items) != sorted(recipe.sources):
        raise ValueError(f"the sources plan names {[i.subject for i in items]}, the recipe {list(recipe.sources)}")
    old = read_lock(ws.lock_file)
    # a commit read from another source's file (commit_from) is read when that source is checked out, below
    reading = {i.subject for i in items if recipe.sources[i.subject].pin_reader[0] is not None}
    pins = settle_pins(recipe, old, {i.subject: planned_pin(i) for i in items if i.subject not in reading}, options)
    options = replace(options, git_cache=chosen_git_cache(ws, options.git_cache))
    cache = GitCache(options.git_cache, ctx.ui) if options.git_cache else None
    actions, warnings, entries = [], [], {}
    syncers = []
    for i in items:  # in order: the source whose file names a commit is checked out before the one it names
        if i.subject in reading:
            pins.update(_read_pin(recipe, ws.root, i.subject, old, options))
        syncer = _SourceSync(recipe.sources[i.subject], pins[i.subject], Path(i.data["path"]), ctx, options, cache,
                             old.sources.get(i.subject) if old else None)
        syncer.checkout()
        syncers.append(syncer)
    for syncer in syncers:  # every checkout is in place: a patch may come from another source
        action, entry, warning = syncer.finish()
        actions.append(action)
        entries[syncer.name] = entry
        if warning:
            warnings.append(warning)
    if not options.frozen:
        update_lock(ws.lock_file, recipe.name, recipe.digest,
                    lambda base: replace(base, recipe=recipe.name, recipe_digest=recipe.digest, sources=entries),
                    variant=recipe.variant)
    checks = check_sources(recipe, ws)
    read = record_reads(recipe, ws, options)
    actions.append(Action("compatibility checks", "ok", "; ".join([f"{checks} passed", *read]),
                          {"check": True}))  # not an item
    return StageResult("sync", tuple(actions), tuple(warnings), time.monotonic() - start)


def _read_pin(recipe: Recipe, root: Path, name: str, old: Lock | None, options: RunOptions) -> dict[str, Pin]:
    """The pin of a source whose commit (commit_from) or branch or tag (ref_from) another checkout's file names."""
    if recipe.sources[name].ref_from is not None:
        commit, origin, ref = ref_pin(recipe, root, name, old, options, may_ask=True)
        if commit is not None and ref is not None:
            return with_read_refs(settle_pins(recipe, old, {name: (commit, origin)}, options), {name: ref}, old)
    return settle_pins(recipe, old, {name: read_pin(recipe, root, name, old, options)}, options)


def _origin_word(pin: Pin) -> str:
    return {"recipe": "pinned by the recipe", "lock": f"{pin.ref or 'read'} from the lock",
            "ref": f"{pin.ref} resolved now", "read": "read from a source's file"}[pin.resolved_from]


def _pin_data(pin: Pin) -> dict[str, str | None]:
    return {"commit": pin.commit, "ref": pin.ref, "resolved_from": pin.resolved_from}


# --- one source --------------------------------------------------------------------------------


class _SourceSync:
    def __init__(self, source: Source, pin: Pin, dest: Path, ctx: StageContext,
                 options: RunOptions, cache: GitCache | None, locked: SourceLock | None = None):
        self.name, self.source, self.pin, self.dest = pin.name, source, pin, dest
        self.ui = ctx.ui
        self.ws: Workspace = ctx.workspace
        self.options, self.cache = options, cache
        self.patches = SourcePatches(pin.name, ctx.recipe, ctx.workspace.root, ctx.workspace.recipe_state / "patches",
                                     {p.file: p.sha256 for p in locked.patches} if locked else {})
        self.notes: list[str] = []
        self.path = dest  # the checkout (where a --source-path link points), known once checkout() ran
        self.status, self.detail, self.submodules = "ok", "", []

    def checkout(self) -> None:
        """The checkout at its pin, submodules at their gitlinks (patches come after every source is there)."""
        if self.name in self.options.sync.source_paths:
            self.notes.append(self._link_existing_clone(self.options.sync.source_paths[self.name]))
        checkout = self.path = self.dest.resolve() if self.dest.is_symlink() else self.dest
        if self.dest.is_symlink() and not checkout.exists():
            # never clone into wherever an old --source-path link points
            raise SourceError(f"{self.dest} links to {os.readlink(self.dest)}, which no longer exists",
                              fix=f"point it at a clone with --source-path {self.name}=PATH, or remove the link "
                              f"(rm {self.dest}) to let flagtree-cpu clone there")
        # a clone of ours a killed run left half made (also under an older version's name); beside the workspace's
        # path only, never beside a clone of the user's that --source-path links to
        clear_leftovers(self.dest, f"an interrupted clone of {self.name}", on_wait=self.ui.info, kind="clone")
        status, detail = self._bring_to_pin(checkout)
        submodules, moved, finished = self._sync_submodules(checkout)
        if moved and status == "ok":
            status, detail = "updated", detail + "; submodules moved to their gitlinks"
        detail += finished
        if head(checkout) != self.pin.commit:
            raise SourceError(f"{checkout} is not at {self.pin.commit} after checkout",
                              fix="re-run with --verbose and report it")
        self.status, self.detail, self.submodules = status, detail, submodules

    def finish(self) -> tuple[Action, SourceLock, str | None]:
        """Patches applied; the lock entry, the action and a warning about the user's own changes."""
        checkout, status, detail, submodules, notes = self.path, self.status, self.detail, self.submodules, self.notes
        patches = self.patches.apply(checkout)
        if any(p.applied_now for p in patches) and status == "ok":
            status = "updated"
        if patches:
            detail += f"; {len(patches)} patch{'es' if len(patches) > 1 else ''}"
        if self.source.skipped_patches:
            detail += f"; {skipped_note(self.source.skipped_patches)}"
        warning = self._dirty_warning(checkout) if status == "ok" else None
        if self.options.git_cache:
            detail += " (git cache)"
        if notes:
            detail = "; ".join(notes + [detail])
        entry = SourceLock(
            url=self.pin.url, ref=self.pin.ref, commit=self.pin.commit,
            # a commit taken from the lock was resolved from the ref when the lock was written
            resolved_from=lock_origin(self.pin, self.source),
            submodules=tuple(submodules),
            patches=tuple(PatchLock(file=p.file, sha256=p.sha256) for p in patches),
        )
        data = {**_pin_data(self.pin), "path": str(checkout)}
        return Action(self.name, status, detail, data), entry, warning

    def _bring_to_pin(self, checkout: Path) -> tuple[str, str]:
        if self._needs_clone(checkout):
            self._clone(checkout)
            return "created", f"cloned at {self.pin.commit[:12]}"
        self._check_origin(checkout)
        current = head(checkout)
        interrupted = interrupted_move(checkout)  # a checkout of ours that did not finish
        if current == self.pin.commit and interrupted is None:
            return "ok", f"at {self.pin.commit[:12]}"
        self._move(checkout, interrupted)
        was = "an interrupted checkout finished; " if interrupted is not None else ""
        return "updated", f"{was}moved {current[:12] if current else '(no commit)'} -> {self.pin.commit[:12]}"

    # -- existing clones and safety -----------------------------------------------------------

    def _link_existing_clone(self, target: Path) -> str:
        target = target.expanduser().resolve()
        if not (target / ".git").exists():
            raise SourceError(f"--source-path {self.name}={target}: that folder is not a git checkout",
                              fix="give the top folder of a clone of " + self.source.url)
        dest = self.dest
        if dest.is_symlink():
            if dest.resolve() == target:
                return f"uses {target}"
        elif dest.exists():
            if dest.is_dir() and not any(dest.iterdir()):
                dest.rmdir()  # an empty folder holds nothing of the user's
            else:
                raise SourceError(
                    f"{dest} is a real folder (a clone, or your files), not a link; flagtree-cpu never deletes it",
                    fix=f"to use {target} instead, move it away first (mv {dest} {dest}.old); or drop "
                    f"--source-path to keep using {dest}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        replace_symlink(dest, os.path.relpath(target, dest.parent.resolve()))  # never a moment without the link
        return f"linked to {target}"

    def _needs_clone(self, checkout: Path) -> bool:
        if not checkout.exists():
            return True
        if (checkout / ".git").exists():
            return False
        if checkout.is_dir() and not any(checkout.iterdir()):
            return True
        raise SourceError(f"{checkout} exists but is not a git checkout; flagtree-cpu will not clone over it",
                          fix=f"move it away (mv {checkout} {checkout}.old), or point flagtree-cpu at an existing "
                          f"clone with --source-path {self.name}=PATH")

    def _check_origin(self, checkout: Path) -> None:
        origin = remote_url(checkout)
        if origin is not None and same_repository(origin, self.source.url):
            return
        if origin is not None:  # the same repository reached through the user's url.insteadOf rules?
            mine = effective_url(origin, cwd=checkout) or ""
            wanted = effective_url(self.source.url, cwd=checkout) or ""
            if same_repository(mine, wanted):
                return
        found = f"a clone of {origin}" if origin is not None else "a checkout without an 'origin' remote"
        raise SourceError(f"{checkout} is {found}, not of {self.source.url}; flagtree-cpu will not move it",
                          fix=f"move it away so flagtree-cpu can clone the recipe's repository, or use it on "
                          f"purpose with --set sources.{self.name}.url={origin or '<its url>'}")

    def _check_safe_to_move(self, checkout: Path, target: str) -> None:
        """A submodule about to move to its gitlink: our patches inside it are ours to take back first."""
        self.patches.revert_inside(self.path, checkout)
        self._check_no_changes(checkout, target)
        self._check_no_lost_commits(checkout, target)

    def _check_no_changes(self, checkout: Path, target: str) -> None:
        # a submodule our interrupted update left half done is judged (finished or refused) on its own
        pending = interrupted_submodule_moves(checkout)
        modified = [path for path in modified_files(checkout) if path not in pending]
        if modified and not self.options.allow_dirty:
            shown = modified[:20] + ([f"... and {len(modified) - 20} more"] if len(modified) > 20 else [])
            raise SourceError(
                f"{checkout} has changes to {len(modified)} tracked file{'s' if len(modified) > 1 else ''}; "
                f"moving it to {target[:12]} would mix them with another version",
                details=tuple(shown),
                fix=f"commit or stash them (git -C {checkout} stash), or re-run with --allow-dirty to move "
                "anyway (git still refuses if they conflict; nothing is discarded)")

    def _check_no_lost_commits(self, checkout: Path, target: str) -> None:
        lost = unkept_commits(checkout)  # earlier pins (refs/flagtree-cpu/*) keep theirs
        if lost and not self.options.force:
            raise SourceError(
                f"{checkout} has {len(lost)} commit{'s' if len(lost) > 1 else ''} that no branch, tag or remote "
                f"keeps; moving it to {target[:12]} would leave them unreachable",
                details=tuple(lost),
                fix=f"keep them on a branch (git -C {checkout} branch my-work {lost[0].split()[0]}), or re-run "
                "with --force (git's reflog still holds them for about 90 days)")

    # -- clone and move --------------------------------------------------------------------------

    def _config(self, urls: list[str]) -> list[tuple[str, str]]:
        return self.cache.rewrites(urls) if self.cache else []

    def _clone(self, dest: Path) -> None:
        if self.cache:
            self.cache.ensure(self.source.url, self.pin.commit, offline=self.options.offline)
        elif self.options.offline:
            raise SourceError(f"source {self.name} is not checked out at {dest} and --offline forbids cloning",
                              fix="sync once with network, or use --git-cache with a cache filled elsewhere")
        folder = PartialFolder.create(dest, tree=dest.name)  # a later run knows it, and whether we are gone
        try:
            with folder.writing():
                self._clone_into(folder.tree)
            if dest.is_dir():
                dest.rmdir()  # _needs_clone accepted it only because it is empty
            folder.publish(dest)
        except BaseException:
            folder.remove()  # ours, and useless half-made; our git has been stopped
            raise

    def _clone_into(self, partial: Path) -> None:
        url, commit = self.source.url, self.pin.commit
        config = self._config([url])
        with self.ui.progress(f"cloning {self.name}") as task:
            if self.source.shallow and not self.cache:
                init_with_origin(partial, url)
                if not fetch_commit(partial, commit, url=url, depth=1, progress=task):
                    # the server does not serve commits by id: fetch normally
                    fetch_origin(partial, url=url, source=self.name, progress=task)
            else:
                clone(url, partial, filter_spec=None if self.cache else self.source.filter, config=config,
                      progress=task, source=self.name)
        self._ensure_commit(partial, config)
        self._checkout(partial, commit)

    def _move(self, checkout: Path, interrupted: list[str] | None) -> None:
        """Move to the pin; ``interrupted``: the commits of a checkout of ours that did not finish,
        whose half-written files are ours to overwrite (but no one else's: ``finish_move``)."""
        settle(checkout, say=self.ui.info)  # a git still working there, or the lock of one that was killed
        self.patches.revert_all(checkout)  # our own changes do not count as the user's
        finishing = interrupted is not None and not self.options.allow_dirty
        if not finishing:
            self._check_no_changes(checkout, self.pin.commit)
        self._check_no_lost_commits(checkout, self.pin.commit)
        self._ensure_commit(checkout, self._config([self.source.url]))
        self._checkout(checkout, self.pin.commit, finish=interrupted if finishing else None)

    def _ensure_commit(self, repo: Path, config: list[tuple[str, str]]) -> None:
        commit, url = self.pin.commit, self.source.url
        if has_commit(repo, commit):
            return
        if self.options.offline:
            raise SourceError(f"commit {commit[:12]} of {self.name} is not in {repo} and --offline forbids "
                              "fetching it", fix="sync once with network (or from a filled --git-cache)")
        if self.cache:
            self.cache.ensure(url, commit)
            config = self._config([url])
        # fetch the pinned commit directly where the server allows it; else fetch normally
        with self.ui.progress(f"fetching {self.name}") as task:
            if not fetch_commit(repo, commit, url=url, config=config, progress=task) or not has_commit(repo, commit):
                fetch_origin(repo, url=url, config=config, source=self.name, progress=task)
        if not has_commit(repo, commit):
            raise SourceError(f"commit {commit} of source {self.name} is not in {url}",
                              fix=f"check sources.{self.name}.commit; it may have been force-pushed away")

    def _checkout(self, repo: Path, commit: str, finish: list[str] | None = None) -> None:
        if finish is not None:
            finish_move(repo, commit, finish)
        else:
            move_to(repo, commit)
        set_ref(repo, PIN_REF, commit)

    def _sync_submodules(self, checkout: Path) -> tuple[list, bool, str]:
        if self.source.submodules == "none" or not (checkout / ".gitmodules").is_file():
            return [], False, ""
        syncer = SubmoduleSync(self.name, ui=self.ui, cache=self.cache, offline=self.options.offline,
                               allow_dirty=self.options.allow_dirty, check_safe_to_move=self._check_safe_to_move,
                               config=self._config)
        entries, moved = syncer.sync(checkout)
        finished = "".join(f"; the interrupted checkout of {path} finished" for path in syncer.finished)
        return entries, moved, finished

    # -- patches and warnings -----------------------------------------------------------------------

    def _dirty_warning(self, checkout: Path) -> str | None:
        modified = self.patches.foreign_changes(checkout)
        if not modified:
            return None
        return (f"{self.name} has changes to {len(modified)} tracked file(s) at {checkout} "
                f"({', '.join(modified[:3])}{', ...' if len(modified) > 3 else ''}); they are kept and the "
                "build will include them")
