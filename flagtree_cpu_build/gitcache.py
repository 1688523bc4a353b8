"""Bare mirrors that workspaces clone from, so a second workspace downloads nothing.

``--git-cache DIR`` keeps one bare mirror per repository URL. A checkout is cloned
*through* its mirror with a one-command ``url.<mirror>.insteadOf=<url>`` rule: git
hard-links the objects (no copy, no network), yet ``origin`` stays the recipe's URL and
the checkout does not depend on the cache afterwards (unlike ``--reference``, which
breaks when the cache is cleaned). Submodule URLs are mirrored and rewritten the same
way. Mirrors are updated only when a pinned commit is missing, under a file lock.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from . import halfmade
from .digest import hash_text
from .gitcmd import has_commit, run_git
from .locking import exclusive
from .ui import UI

_FETCH_REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")


class GitCache:
    def __init__(self, root: Path, ui: UI):
        self.root = root
        self.ui = ui

    def mirror_path(self, url: str) -> Path:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git"))
        return self.root / f"{stem or 'repo'}-{hash_text(url)[:12]}.git"

    def has(self, url: str) -> bool:
        return (self.mirror_path(url) / "HEAD").is_file()

    def ensure(self, url: str, commit: str | None, *, offline: bool = False) -> Path:
        """The mirror of ``url``, created or updated so that it holds ``commit``."""
        mirror = self.mirror_path(url)
        with exclusive(mirror.with_suffix(".lock"), on_wait=self.ui.info):
            if not (mirror / "HEAD").is_file():
                if offline:
                    return mirror  # nothing to offer; the caller reports the missing commit
                self._create(url, mirror)
            elif commit and not has_commit(mirror, commit) and not offline:
                with self.ui.progress(f"updating cache of {url}") as task:
                    run_git(["fetch", "--progress", "--prune", "origin"], cwd=mirror, url=url, progress=task)
                if not has_commit(mirror, commit):
                    run_git(["fetch", "--progress", "origin", commit], cwd=mirror, url=url, check=False)
        return mirror

    def _create(self, url: str, mirror: Path) -> None:
        partial = mirror.with_name(mirror.name + ".partial")
        if os.path.lexists(partial):  # our own interrupted attempt (the name is ours): once nothing writes into it
            halfmade.clear(partial, f"an interrupted mirror of {url}", on_wait=self.ui.info)
        partial.mkdir(parents=True)
        try:
            run_git(["init", "--quiet", "--bare"], cwd=partial)
            run_git(["remote", "add", "origin", url], cwd=partial)
            for i, refspec in enumerate(_FETCH_REFSPECS):
                run_git(["config", "--add" if i else "--replace-all", "remote.origin.fetch", refspec], cwd=partial)
            with self.ui.progress(f"mirroring {url} into the git cache") as task:
                run_git(["fetch", "--progress", "origin"], cwd=partial, url=url, progress=task)
        except BaseException:
            # a first fetch that did not finish keeps nothing git could resume from
            halfmade.discard(partial)
            raise
        partial.rename(mirror)

    def rewrites(self, urls: Iterable[str]) -> list[tuple[str, str]]:
        """``-c`` pairs sending each mirrored URL to its mirror, for one git command."""
        pairs = [(f"url.{self.mirror_path(u)}.insteadOf", u) for u in urls if self.has(u)]
        if pairs:
            # submodule clones from local paths are refused by default since git 2.38.1;
            # these paths are our own mirrors of the recipe's URLs
            pairs.append(("protocol.file.allow", "always"))
        return pairs
