"""Moving a checkout to a commit so that an interrupted move can be finished later — and only
the tool's own half-done work is ever overwritten.

A ``git checkout`` or ``git submodule update`` stopped half way (Ctrl-C, SIGTERM, a power cut)
leaves files of two commits mixed, which looks exactly like a user's changes: every later sync
would refuse to move "a checkout with changes to 220 tracked files". So before a move the tool
writes a marker into the repository's git dir (``flagtree-cpu-checkout.json``: the commits the
files may come from) and removes it once the move is complete. ``git checkout`` updates HEAD
last, so an entry whose target is HEAD is a move that completed.

With the marker present, a changed path is the tool's own debris when its file is missing or
holds exactly that path's content at one of the recorded commits (or at HEAD). Anything else is
the user's: it is named, and nothing is overwritten. When every change is debris the move is
finished with ``git checkout -f``, which then discards nothing that is not in a commit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ... import halfmade
from ...atomic import write_atomic
from ...digest import hash_bytes
from ...errors import SourceError
from ...gitcmd import blob_starts_with, content_ids, head, index_entries, modified_files, object_format, tree_entries
from ...gitops import checkout_detached

MARKER_NAME = "flagtree-cpu-checkout.json"
SELF = "."  # the marker key of a move of the repository itself; other keys are submodule paths


# --- queries -----------------------------------------------------------------------------------------

def git_dir(repo: Path) -> Path:
    dot_git = repo / ".git"
    if dot_git.is_file():  # a submodule's or a worktree's pointer to its git dir
        text = dot_git.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            return (repo / text[len("gitdir:"):].strip()).resolve()
    return dot_git


# --- the marker --------------------------------------------------------------------------------------


def _marker_file(repo: Path) -> Path:
    return git_dir(repo) / MARKER_NAME


def _read_marker(repo: Path) -> dict[str, dict]:
    try:
        data = json.loads(_marker_file(repo).read_text())
        moves = data["moves"]
        return {key: {"target": str(m["target"]), "commits": [str(c) for c in m["commits"]]}
                for key, m in moves.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # our own file, unreadable: without it changes can only be treated as the user's
        raise SourceError(f"{_marker_file(repo)}, where flagtree-cpu records a checkout it has started, "
                          f"is damaged ({exc.__class__.__name__})",
                          fix=f"remove it (rm {_marker_file(repo)}); changes in {repo} then count as yours, "
                          "and sync refuses to move it until they are committed or stashed") from exc


def _write_marker(repo: Path, moves: dict[str, dict]) -> None:
    path = _marker_file(repo)
    if not moves:
        path.unlink(missing_ok=True)
        return
    write_atomic(path, json.dumps({"tool": "flagtree-cpu", "moves": moves,  # a marker is either whole or absent
                                   "written": datetime.now(timezone.utc).isoformat(timespec="seconds")},
                                  indent=2) + "\n")


@contextmanager
def marked(repo: Path, targets: dict[str, tuple[str, Iterable[str | None]]]) -> Iterator[None]:
    """Record moves before starting them, ``{key: (target, other commits its files may come from)}``;
    forget them when the block completes. An interruption or a failure leaves them recorded."""
    moves = _read_marker(repo)
    for key, (target, others) in targets.items():
        earlier = moves.get(key, {}).get("commits", [])
        commits = [c for c in dict.fromkeys([*earlier, *others, target]) if c]
        moves[key] = {"target": target, "commits": commits}
    _write_marker(repo, moves)
    yield
    forget(repo, targets)


def forget(repo: Path, keys: Iterable[str]) -> None:
    """Moves that completed, or that git refused before touching a file."""
    moves = _read_marker(repo)
    remaining = {key: move for key, move in moves.items() if key not in set(keys)}
    if remaining != moves:
        _write_marker(repo, remaining)


def interrupted_move(repo: Path) -> list[str] | None:
    """The commits of a move of ``repo`` this tool started and did not finish, or None."""
    moves = _read_marker(repo)
    entry = moves.get(SELF)
    if entry is None:
        return None
    if entry["target"] == head(repo):  # HEAD is written last: that move completed
        del moves[SELF]
        _write_marker(repo, moves)
        return None
    return entry["commits"]


def interrupted_submodule_moves(repo: Path) -> dict[str, list[str]]:
    """Submodule path -> commits, for the ``submodule update`` of ``repo`` that did not finish."""
    return {key: m["commits"] for key, m in _read_marker(repo).items() if key != SELF}


# --- git's own lock ----------------------------------------------------------------------------------


def settle(repo: Path, *, say: Callable[[str], None]) -> None:
    """Before moving ``repo`` or its submodules: a git still working there (it holds an ``index.lock`` open) is
    waited for, then named (``halfmade``); an ``index.lock`` that nothing holds, of a move of this tool's that
    was interrupted, was left by a git killed outright (SIGKILL, the OOM killer) and is removed. Any other
    stale lock is left to git, which names it and says what to do."""
    gitdir = git_dir(repo)
    locks = [lock for lock in (gitdir / "index.lock", *gitdir.glob("modules/**/index.lock")) if lock.is_file()]
    if not locks:
        return
    halfmade.wait_for_holders(locks, repo, "a checkout flagtree-cpu is about to move", on_wait=say)
    moves = _read_marker(repo)
    ours = [git_dir(repo if key == SELF else repo / key) / "index.lock" for key in moves]
    for lock in ours:
        if lock.is_file() and not lock.is_symlink():
            lock.unlink()
            say(f"removed {lock}: left by a git that was killed while flagtree-cpu was checking out {repo}")


# --- moving ------------------------------------------------------------------------------------------


def move_to(repo: Path, commit: str, *, force: bool = False) -> None:
    """``git checkout --detach`` under a marker; ``force`` only once ``finish_move`` has proven that
    every change is the tool's own."""
    unfinished_before = SELF in _read_marker(repo)
    with marked(repo, {SELF: (commit, [head(repo)])}):
        err = checkout_detached(repo, commit, force=force)
        if err is not None:
            if "\nAborting" in f"\n{err}" and not unfinished_before:
                forget(repo, [SELF])  # git refused before writing anything: no debris of ours exists
            raise SourceError(f"git refused to move {repo} to {commit[:12]}; nothing was discarded",
                              details=tuple(err.strip().splitlines()[-8:]),
                              fix="commit or stash the changes git names above, then sync again")


def finish_move(repo: Path, target: str, commits: Sequence[str]) -> None:
    """Finish a move this tool left half done, unless a file holds changes of the user's."""
    current = head(repo)
    yours = user_changes(repo, [*commits, *([current] if current else [])], target)
    if yours:
        shown = yours[:20] + ([f"... and {len(yours) - 20} more"] if len(yours) > 20 else [])
        raise SourceError(
            f"{repo} was left half checked out by a flagtree-cpu run that was interrupted (or failed), and "
            f"{len(yours)} file{'s' if len(yours) > 1 else ''} there hold{'' if len(yours) > 1 else 's'} changes "
            "that did not come from it; flagtree-cpu finishes its own checkout only when nothing of yours would "
            "be overwritten", details=tuple(shown),
            fix=f"keep a copy of your changes (cp {repo / yours[0]} ~/), then finish the checkout yourself "
            f"(git -C {repo} checkout -f --detach {target[:12]}) and sync again")
    move_to(repo, target, force=True)


def user_changes(repo: Path, commits: Sequence[str], target: str) -> list[str]:
    """Paths a forced checkout of ``target`` would overwrite whose content — in the working tree or
    staged in the index — is in none of ``commits``. A file that is empty, or holds the first bytes of its
    content at one of them, is not the user's: git was stopped between creating it and writing its last byte."""
    trees = {c: tree_entries(repo, c) for c in dict.fromkeys([*commits, target])}
    index = index_entries(repo)
    candidates = set(modified_files(repo, submodules=False))
    # files the interrupted checkout wrote before it could record them in the index
    candidates |= {p for p in trees[target] if p not in index and os.path.lexists(repo / p)}
    known: dict[str, set[str]] = {}
    for tree in trees.values():
        for path, (_mode, kind, sha) in tree.items():
            known.setdefault(path, set()).add(sha if kind == "blob" else f"{kind}:{sha}")
    submodules = {p for p, shas in known.items() if any(s.startswith("commit:") for s in shas)}
    paths = sorted(candidates - submodules)  # a forced checkout does not touch submodule contents
    actual = _content_ids(repo, paths)
    return [p for p in paths if (p in index and index[p] not in known.get(p, set()))
            or (actual[p] not in (None, *known.get(p, set())) and not _cut_short(repo, p, known.get(p, set())))]


def _cut_short(repo: Path, path: str, known: set[str]) -> bool:
    """The file at ``path`` is the start of one of the blobs ``known`` there (an empty file is the start of any)."""
    full = repo / path
    blobs = [sha for sha in known if ":" not in sha]  # "kind:sha" entries are links to commits, never files
    if not blobs or full.is_symlink() or not full.is_file():
        return False
    return full.stat().st_size == 0 or any(blob_starts_with(repo, sha, full) for sha in blobs)


def _content_ids(repo: Path, paths: Sequence[str]) -> dict[str, str | None]:
    """The blob id each working-tree path would have (None: missing; "" for a folder, which no blob is)."""
    ids: dict[str, str | None] = {}
    files = []
    for path in paths:
        full = repo / path
        if not os.path.lexists(full):
            ids[path] = None  # missing: bringing it back loses nothing
        elif full.is_symlink():  # hash-object would follow the link; git stores its text
            ids[path] = _hash_link(repo, full)
        elif full.is_file():
            files.append(path)
        else:
            ids[path] = ""
    ids.update(content_ids(repo, files))
    return ids


def _hash_link(repo: Path, link: Path) -> str:
    data = os.fsencode(os.readlink(link))
    return hash_bytes(b"blob %d\0" % len(data) + data, object_format(repo))
