"""Every git command that changes a repository: clone, fetch, checkout, submodule update, apply, refs, and the
bare mirrors and bundles the git cache and `bundle` keep. The queries are in ``gitcmd``; both run git through
``gitrun`` with its rules (no prompts, stopped with the tool, a stalled server named).

Callers say what they want done (``clone``, ``fetch_commit``, ``apply_patch``); only here is it spelled as git
argv, so the options each verb needs (``--progress`` for the stall watchdog, ``--no-checkout`` before a marked
checkout, one pack thread for a reproducible bundle) are written once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .gitcmd import git_result, git_succeeds, run_git
from .progress import ProgressTask

Config = Sequence[tuple[str, str]]

# the refs a mirror follows: heads and tags, not a --mirror's everything (pull requests, notes ...)
_MIRROR_REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
# a bundle file is a local path: git must be allowed to read it whatever protocol.allow says
_LOCAL_FILES = (("protocol.file.allow", "always"),)
# from a shallow upstream (or a mirror a pins-only bundle seeded), git refuses the refs whose history stops at a
# shallow root yet keeps their objects: commits without parents in a repository that does not know it is shallow,
# which `git bundle` and later fetches then stumble on ("Failed to traverse parents"). Accepting the shallow roots
# records them; from a complete upstream it changes nothing.
_ACCEPT_SHALLOW = ("--update-shallow",)


# --- clones and fetches ------------------------------------------------------------------------------------
# --progress everywhere: the stall watchdog tells a slow but live transfer from a frozen server by it.


def clone(url: str, dest: Path, *, filter_spec: str | None = None, config: Config = (),
          progress: ProgressTask | None = None, source: str | None = None) -> None:
    """A clone of ``url`` at ``dest`` with nothing checked out (the checkout is moved to its pin afterwards)."""
    run_git(["clone", "--no-checkout", "--progress", *([f"--filter={filter_spec}"] if filter_spec else []), url,
             str(dest)], config=config, url=url, source=source, progress=progress)


def init_with_origin(dest: Path, url: str) -> None:
    """An empty repository at ``dest`` whose ``origin`` is ``url`` (a shallow clone fetches into it)."""
    run_git(["init", "--quiet", str(dest)])
    run_git(["remote", "add", "origin", url], cwd=dest)


def fetch_commit(repo: Path, commit: str, *, url: str, depth: int | None = None, config: Config = (),
                 progress: ProgressTask | None = None) -> bool:
    """Fetch ``commit`` by its id from ``origin``; False when the server refused (not every server serves a
    commit by id). A stalled server still raises."""
    args = ["fetch", "--progress", *(["--depth", str(depth)] if depth else _ACCEPT_SHALLOW), "origin", commit]
    return git_result(args, cwd=repo, config=config, url=url, progress=progress)[0] == 0


def fetch_origin(repo: Path, *, url: str, config: Config = (), progress: ProgressTask | None = None,
                 source: str | None = None, prune: bool = False) -> None:
    """Fetch what ``origin``'s fetch refspecs name."""
    run_git(["fetch", "--progress", *_ACCEPT_SHALLOW, *(["--prune"] if prune else []), "origin"], cwd=repo,
            config=config, url=url, source=source, progress=progress)


# --- moving a checkout -------------------------------------------------------------------------------------


def checkout_detached(repo: Path, commit: str, *, force: bool = False) -> str | None:
    """Check ``commit`` out with a detached HEAD; None when done, else git's message (it refused, or stopped
    part way: ``checkouts`` tells the two apart)."""
    status, _out, err = git_result(["checkout", "--detach", "--quiet", *(["--force"] if force else []), commit],
                                   cwd=repo)
    return None if status == 0 else err


def submodule_update(repo: Path, *, config: Config, url: str, progress: ProgressTask | None = None) -> None:
    """Clone missing submodules of ``repo`` (one level) and check each out at its gitlink; ``url`` names them in
    an error."""
    run_git(["submodule", "update", "--init", "--progress"], cwd=repo, config=config, url=url, progress=progress)


def set_ref(repo: Path, ref: str, commit: str) -> None:
    run_git(["update-ref", ref, commit], cwd=repo)


# --- patches -----------------------------------------------------------------------------------------------
# ``directory``: the patched folder inside ``repo`` ("" = its top). git apply runs at the repository's top with
# --directory for a folder below it: run from a subfolder, git would silently skip every path outside it.


def _apply(directory: str, *args: str) -> list[str]:
    return ["apply", *([f"--directory={directory}"] if directory else []), *args]


def patch_applies(repo: Path, patch: Path, *, directory: str = "", reverse: bool = False) -> bool:
    """Whether the patch applies cleanly (with ``reverse``: whether it is applied, and can be taken back)."""
    return git_succeeds(_apply(directory, "--check", *(["-R"] if reverse else []), str(patch)), cwd=repo)


def apply_patch(repo: Path, patch: Path, *, directory: str = "", reverse: bool = False) -> None:
    """Apply the patch (or take it back), all or nothing."""
    run_git(_apply(directory, *(["-R"] if reverse else ["--whitespace=nowarn"]), str(patch)), cwd=repo)


def patch_rejections(repo: Path, patch: Path, *, directory: str = "") -> list[str]:
    """What git says about a patch that does not apply: its ``error:`` lines, else its last lines."""
    _status, _out, err = git_result(_apply(directory, "--check", "-v", str(patch)), cwd=repo)
    return [line for line in err.splitlines() if line.startswith("error:")] or err.splitlines()[-5:]


def is_patch(repo: Path, patch: Path, *, directory: str = "") -> bool:
    """Whether the file reads as a whole patch (``git apply --stat``; nothing is applied)."""
    return git_succeeds(_apply(directory, "--stat", str(patch)), cwd=repo)


# --- bare mirrors and bundles --------------------------------------------------------------------------------


def init_mirror(dest: Path, url: str) -> None:
    """An empty bare mirror of ``url`` at ``dest`` following its heads and tags (``fetch_origin`` fills it)."""
    run_git(["init", "--quiet", "--bare"], cwd=dest)
    run_git(["remote", "add", "origin", url], cwd=dest)
    _follow_heads_and_tags(dest)


def clone_bundle_mirror(bundle: Path, dest: Path, url: str) -> None:
    """A bare mirror at ``dest`` made from the git bundle file ``bundle``, whose ``origin`` is ``url`` (as for a
    mirror the git cache made: `sync` online updates it there)."""
    run_git(["clone", "--mirror", "--quiet", str(bundle), str(dest)], config=_LOCAL_FILES)
    run_git(["config", "remote.origin.url", url], cwd=dest)
    run_git(["config", "--unset", "remote.origin.mirror"], cwd=dest, check=False)
    _follow_heads_and_tags(dest)


def _follow_heads_and_tags(mirror: Path) -> None:
    for i, refspec in enumerate(_MIRROR_REFSPECS):
        run_git(["config", "--add" if i else "--replace-all", "remote.origin.fetch", refspec], cwd=mirror)


def fetch_bundle(mirror: Path, bundle: Path) -> None:
    """Every ref of the git bundle file ``bundle`` into ``mirror``."""
    run_git(["fetch", "--quiet", str(bundle), "+refs/*:refs/*"], cwd=mirror, config=_LOCAL_FILES)


# --- pins-only packs (bundles of pinned commits) --------------------------------------------------------------


def pinned_pack(mirror: Path, commits: Sequence[str], scratch: Path, *, url: str) -> Path:
    """One git pack holding exactly ``commits`` of ``mirror`` with their whole trees and none of their history,
    made in the new folder ``scratch`` (a depth-1 fetch of the commits by id, packed whole). Works from a shallow
    mirror too, where `git bundle` fails."""
    run_git(["init", "--quiet", "--bare", str(scratch)])
    # a local upload-pack serves commits by id only when allowed; the mirror is ours
    local = (*_LOCAL_FILES, ("uploadpack.allowAnySHA1InWant", "true"))
    # each under a ref: repack packs what refs reach
    wanted = [f"{c}:refs/pins/{c}" for c in commits]
    run_git(["fetch", "--quiet", "--no-tags", "--depth", "1", mirror.as_uri(), *wanted], cwd=scratch, config=local,
            url=url)
    # one pack thread: the same commits give the same bytes (a --since bundle leaves it out then)
    run_git(["repack", "-a", "-d", "-q"], cwd=scratch, config=(("pack.threads", "1"),), url=url)
    packs = sorted((scratch / "objects" / "pack").glob("pack-*.pack"))
    if len(packs) != 1:  # pragma: no cover - repack -a -d leaves one pack
        raise RuntimeError(f"git repack left {len(packs)} packs in {scratch}")
    return packs[0]


def index_pack(repo: Path, pack: Path) -> None:
    """The pack file ``pack`` (somewhere in ``repo``'s file system) indexed into ``repo``'s objects; every object
    checked as git reads it (``--fsck-objects``: a malformed one is refused, nothing is added)."""
    packs = repo / "objects" / "pack"
    packs.mkdir(parents=True, exist_ok=True)
    incoming = packs / "incoming-flagtree-cpu.pack"
    os.replace(pack, incoming)
    try:
        name = run_git(["index-pack", "--fsck-objects", str(incoming)], cwd=repo).split()[-1]
        os.replace(incoming.with_suffix(".idx"), packs / f"pack-{name}.idx")
        os.replace(incoming, packs / f"pack-{name}.pack")
    finally:
        incoming.unlink(missing_ok=True)
        incoming.with_suffix(".idx").unlink(missing_ok=True)
