"""The git part of a bundle: every source and submodule of a recipe stack, at its pins, as git bundles.

The stack is synced first, exactly as `sync` does it (pins from the recipe, else the lock, else the ref
resolved now; the lock written), through a git cache of its own (``.flagtree-cpu/bundle-create/git``) —
so the lock in the bundle is the one `setup` would write, and every repository the board needs has a bare
mirror here. A checkout that was already at its pin did not go through the cache, so each mirror is then
made sure to hold its pinned commits (a fetch only when one is missing).

Each repository becomes one git pack of its pinned commits only, their whole trees and none of their history
(``pins``): what a board needs to set up, and a form a shallow upstream's mirror can give (`git bundle` of it fails
with "Failed to traverse parents"). Packs are written with one pack thread: the same pins then give the same bytes,
and an incremental bundle (``--since``) can leave out what did not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SourceError
from ..gitcache import GitCache
from ..gitcmd import has_commit
from ..gitops import pinned_pack
from ..lockfile import read_lock
from ..stagekit.stage import RunOptions
from ..stages.registry import run_stage, stage_named

if TYPE_CHECKING:
    from ..stagekit.stage import StageContext, StageResult


@dataclass(frozen=True)
class GitBundle:
    path: Path  # the pack file, in the staging folder
    url: str  # the mirror's origin (the recipe's or .gitmodules' URL)
    mirror: str  # the mirror's folder name in a git cache (GitCache.mirror_path(url).name)
    commits: tuple[str, ...]  # the pinned commits it holds, sorted


def bundle_cache(stack: list[StageContext]) -> Path:
    """The git cache dedicated to making bundles of this workspace."""
    return stack[-1].workspace.state_dir / "bundle-create" / "git"


def sync_stack(stack: list[StageContext], cache_root: Path) -> list[StageResult]:
    """`sync` of every recipe of the stack, bottom first, through the bundle's git cache."""
    sources = stage_named("sources")
    return [run_stage(sources, ctx, RunOptions(python=ctx.workspace.venv_dir / "bin" / "python", git_cache=cache_root))
            for ctx in stack]


def pinned_commits(stack: list[StageContext]) -> dict[str, set[str]]:
    """URL -> the commits the stack's locks pin there (sources and submodules, nested ones too)."""
    wanted: dict[str, set[str]] = {}
    for ctx in stack:
        lock = read_lock(ctx.workspace.lock_file)
        if lock is None:  # sync writes it; a --frozen lock would be there already
            raise SourceError(f"no lock file at {ctx.workspace.lock_file} after syncing {ctx.recipe.name}",
                              fix="run `flagtree-cpu sync` and look at what it says")
        for name in ctx.recipe.sources:
            entry = lock.sources.get(name)
            if entry is None:
                raise SourceError(f"the lock {ctx.workspace.lock_file} has no entry for source {name}",
                                  fix=f"run `flagtree-cpu --recipe {ctx.recipe.name} sync`")
            wanted.setdefault(entry.url, set()).add(entry.commit)
            for submodule in entry.submodules:
                wanted.setdefault(submodule.url, set()).add(submodule.commit)
    return wanted


def bundle_mirrors(stack: list[StageContext], cache_root: Path, staging: Path) -> list[GitBundle]:
    """One pack of pinned commits per repository the stack pins, in ``staging``; sorted by mirror name."""
    ui = stack[-1].ui
    cache = GitCache(cache_root, ui)
    wanted = pinned_commits(stack)
    staging.mkdir(parents=True, exist_ok=True)
    bundles = []
    with ui.progress("bundling git mirrors", total=len(wanted), unit="repositories") as task:
        for done, (url, commits) in enumerate(sorted(wanted.items(), key=lambda i: cache.mirror_path(i[0]).name)):
            mirror = _holding(cache, url, sorted(commits))
            pack = pinned_pack(mirror, sorted(commits), staging / mirror.name, url=url)
            bundles.append(GitBundle(pack, url, mirror.name, tuple(sorted(commits))))
            task.update(done + 1, len(wanted), detail=mirror.name)
    return bundles


def _holding(cache: GitCache, url: str, commits: list[str]) -> Path:
    """The mirror of ``url``, fetched from the network only when it lacks one of ``commits``."""
    mirror = cache.mirror_path(url)
    for commit in commits:
        mirror = cache.ensure(url, commit)
    missing = [c for c in commits if not has_commit(mirror, c)]
    if missing:
        raise SourceError(f"{url} does not have the pinned commit{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(c[:12] for c in missing)}", details=(f"mirror: {mirror}",),
                          fix="check the recipe's pins and the lock (it may have been force-pushed away); "
                          "`flagtree-cpu sync --update` resolves unpinned refs again")
    return mirror
