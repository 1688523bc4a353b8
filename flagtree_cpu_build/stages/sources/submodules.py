"""A checkout's submodules brought to the commits its tree records (the gitlinks), level by level.

Level by level so that the git cache can mirror each level's URLs before git clones them. A
submodule that must move is checked like any checkout (the user's changes and commits are
never lost); a ``submodule update`` runs under the parent's checkout marker (see
``checkouts``), so one that was interrupted half way is finished by the next sync instead of
being mistaken for the user's work.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path

from ...errors import SourceError
from ...gitcache import GitCache
from ...gitcmd import gitlink, gitmodules, has_commit, head, remote_url, submodule_status
from ...gitops import submodule_update
from ...lockfile import SubmoduleLock
from ...ui import UI
from .checkouts import finish_move, forget, interrupted_submodule_moves, marked, settle


class SubmoduleSync:
    def __init__(self, name: str, *, ui: UI, cache: GitCache | None, offline: bool, allow_dirty: bool,
                 check_safe_to_move: Callable[[Path, str], None],
                 config: Callable[[list[str]], list[tuple[str, str]]]):
        self.name, self.ui, self.cache = name, ui, cache
        self.offline, self.allow_dirty = offline, allow_dirty
        self.check_safe_to_move, self.config = check_safe_to_move, config
        self.finished: list[str] = []  # submodules whose interrupted checkout this run finished

    def sync(self, checkout: Path) -> tuple[list[SubmoduleLock], bool]:
        """Lock entries of every submodule (recursively), and whether any had to move."""
        status = submodule_status(checkout)
        moved = any(flag != " " for flag, _sha, _path in status) or bool(interrupted_submodule_moves(checkout))
        if moved:
            self._update(checkout)
            status = submodule_status(checkout)
            wrong = [f"{flag}{sha[:12]} {path}" for flag, sha, path in status if flag != " "]
            if wrong:
                raise SourceError(f"submodules of {self.name} are not at their recorded commits", details=tuple(wrong),
                                  fix=f"inspect with git -C {checkout} submodule status --recursive")
        entries = []
        for _flag, sha, path in status:
            url = remote_url(checkout / path) or ""
            entries.append(SubmoduleLock(path=path, url=url, commit=sha))
        return entries, moved

    def _update(self, repo: Path) -> None:
        settle(repo, say=self.ui.info)  # a git still working there, or the lock of one that was killed
        modules = gitmodules(repo)
        origin = remote_url(repo) or ""
        urls = [absolute_submodule_url(url, origin) for _path, url in modules]
        interrupted = interrupted_submodule_moves(repo)
        moves: dict[str, tuple[str, list[str | None]]] = {}
        for (path, _url), url in zip(modules, urls, strict=True):
            sub = repo / path
            recorded = gitlink(repo, path)
            current = head(sub)  # None: not cloned yet
            if path in interrupted and current is not None and has_commit(sub, recorded) and not self.allow_dirty:
                finish_move(sub, recorded, interrupted[path])  # our own half-done checkout
                self.finished.append(path)
                current = recorded
            elif current not in (None, recorded):
                self.check_safe_to_move(sub, recorded)
            moves[path] = (recorded, [current])
            if self.cache:
                self.cache.ensure(url, recorded, offline=self.offline)
        config = self.config(urls)
        with marked(repo, moves), self.ui.progress(f"updating submodules of {self.name}") as task:
            submodule_update(repo, config=config, url=", ".join(urls), progress=task)
        forget(repo, interrupted)  # entries of submodules this commit no longer has
        for path, _url in modules:
            if (repo / path / ".gitmodules").is_file():
                self._update(repo / path)


def absolute_submodule_url(url: str, parent: str) -> str:
    """Relative submodule URLs (``../sleef.git``) are relative to the parent's remote."""
    if not url.startswith(("./", "../")):
        return url
    scheme, sep, rest = parent.rstrip("/").partition("://")
    base = rest if sep else scheme
    joined = posixpath.normpath(posixpath.join(base, url))
    return f"{scheme}{sep}{joined}" if sep else joined
