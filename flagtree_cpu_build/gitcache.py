"""Bare mirrors that workspaces clone from, so a second workspace downloads nothing.

``--git-cache DIR`` keeps one bare mirror per repository URL. A checkout is cloned
*through* its mirror with a one-command ``url.<mirror>.insteadOf=<url>`` rule: git
hard-links the objects (no copy, no network), yet ``origin`` stays the recipe's URL and
the checkout does not depend on the cache afterwards (unlike ``--reference``, which
breaks when the cache is cleaned). Submodule URLs are mirrored and rewritten the same
way. Mirrors are updated only when a pinned commit is missing, under a file lock; a mirror is made
in a half-made folder of ours (``partials``) and renamed into place whole, also when `bundle import`
seeds one (``create``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .digest import hash_text
from .gitcmd import has_commit
from .gitops import fetch_commit, fetch_origin, init_mirror
from .locking import exclusive
from .partials import PartialFolder, clear_leftovers
from .ui import UI

if TYPE_CHECKING:
    from .workspace import Workspace


class GitCache:
    def __init__(self, root: Path, ui: UI):
        self.root = root
        self.ui = ui

    def mirror_path(self, url: str) -> Path:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git"))
        return self.root / f"{stem or 'repo'}-{hash_text(url)[:12]}.git"

    def has(self, url: str) -> bool:
        return (self.mirror_path(url) / "HEAD").is_file()

    @contextmanager
    def locked(self, url: str) -> Iterator[Path]:
        """The mirror of ``url``, for as long as no one else may make, update or seed it."""
        mirror = self.mirror_path(url)
        with exclusive(mirror.with_suffix(".lock"), on_wait=self.ui.info):
            yield mirror

    def ensure(self, url: str, commit: str | None, *, offline: bool = False) -> Path:
        """The mirror of ``url``, created or updated so that it holds ``commit``."""
        with self.locked(url) as mirror:
            if not (mirror / "HEAD").is_file():
                if offline:
                    return mirror  # nothing to offer; the caller reports the missing commit
                self.create(url, lambda tree: self._mirror_from_origin(url, tree))
            elif commit and not has_commit(mirror, commit) and not offline:
                with self.ui.progress(f"updating cache of {url}") as task:
                    fetch_origin(mirror, url=url, prune=True, progress=task)
                if not has_commit(mirror, commit):
                    fetch_commit(mirror, commit, url=url)  # a commit no branch or tag holds, where served by id
        return mirror

    def create(self, url: str, fill: Callable[[Path], None]) -> Path:
        """The mirror of ``url``, made by ``fill(folder)`` in a half-made folder of ours (``partials``) and put in
        place whole; the caller holds ``locked(url)``. A fill that does not finish leaves nothing: a first fetch
        keeps nothing git could resume from."""
        mirror = self.mirror_path(url)
        clear_leftovers(mirror, f"an interrupted mirror of {url}", on_wait=self.ui.info, kind="mirror")
        folder = PartialFolder.create(mirror, tree=mirror.name)
        try:
            with folder.writing():
                folder.tree.mkdir()
                fill(folder.tree)
            folder.publish(mirror)
        except BaseException:
            folder.remove()
            raise
        return mirror

    def _mirror_from_origin(self, url: str, tree: Path) -> None:
        init_mirror(tree, url)
        with self.ui.progress(f"mirroring {url} into the git cache") as task:
            fetch_origin(tree, url=url, progress=task)

    def rewrites(self, urls: Iterable[str]) -> list[tuple[str, str]]:
        """``-c`` pairs sending each mirrored URL to its mirror, for one git command."""
        pairs = [(f"url.{self.mirror_path(u)}.insteadOf", u) for u in urls if self.has(u)]
        if pairs:
            # submodule clones from local paths are refused by default since git 2.38.1;
            # these paths are our own mirrors of the recipe's URLs
            pairs.append(("protocol.file.allow", "always"))
        return pairs


def bundle_git_cache(ws: Workspace) -> Path:
    """Where `bundle import` seeds bare mirrors of a bundle's git members."""
    return ws.state_dir / "bundle" / "git"


def chosen_git_cache(ws: Workspace, given: Path | None) -> Path | None:
    """--git-cache when given; else the mirrors a bundle import seeded, so that `sync --offline` after
    `bundle import` needs no option (an air-gapped board has no other place to clone from)."""
    seeded = bundle_git_cache(ws)
    return given or (seeded if seeded.is_dir() else None)
