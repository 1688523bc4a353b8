"""Removing a half-made folder — an interrupted clone, git-cache mirror or unpacking — never while a process
still writes into it, and robustly when one does.

A folder left by a run that was killed may still have a writer: a git that outlived an older flagtree-cpu
(which did not stop its commands when it was killed), or one that the watcher of a killed run (``reaper``)
is still stopping. Removing it then races with the writer: ``rmtree`` empties a folder, the writer adds a
file, and ``rmdir`` fails with "Directory not empty". So a sweep first looks for processes using the folder
(their current folder, or a file they hold open, is inside it; Linux's /proc), waits for them a bounded
time, and if they are still there names them (pid, command) and stops with exit code 8 instead of racing.
The removal itself tolerates entries appearing and vanishing meanwhile, and tries again.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from .errors import WorkspaceBusy

WAIT_S = 20.0  # longer than the watcher's grace period (SIGTERM, then SIGKILL after 5 s)
TRASH = ".flagtree-cpu-removing-"  # a folder being removed: <name>.flagtree-cpu-removing-<pid>
_TRASH_NAME = re.compile(re.escape(TRASH) + r"\d+(-\d+)?$")
_RETRY_ERRNOS = (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.EBUSY)


class FolderUser(NamedTuple):
    pid: int
    command: str


def users(folder: Path) -> list[FolderUser]:
    """Processes (not this one) whose current folder, or a file they hold open, is inside ``folder``."""
    inside = os.path.realpath(folder)
    prefix = inside.rstrip("/") + "/"
    return _users(lambda path: path == inside or path.startswith(prefix), with_cwd=True)


def holders(files: list[Path]) -> list[FolderUser]:
    """Processes (not this one) holding one of ``files`` open (a git holds its ``index.lock`` while it works)."""
    wanted = {os.path.realpath(f) for f in files}
    return _users(wanted.__contains__, with_cwd=False) if wanted else []


def _users(match: Callable[[str], bool], *, with_cwd: bool) -> list[FolderUser]:
    if not os.path.isdir("/proc/self/fd"):
        return []
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid() and any(map(match, _paths_in_use(name, with_cwd))):
            found.append(FolderUser(int(name), _command(name)))
    return found


def _paths_in_use(pid: str, with_cwd: bool) -> list[str]:
    paths = []
    try:
        if with_cwd:
            paths.append(os.readlink(f"/proc/{pid}/cwd"))
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                paths.append(os.readlink(f"/proc/{pid}/fd/{fd}").removesuffix(" (deleted)"))
            except OSError:
                continue
    except OSError:
        pass  # gone meanwhile, or another user's (then not writing into our folders either)
    return paths


def _command(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            text = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"
    return text if len(text) <= 120 else text[:117] + "..."


def remove_tree(path: Path, attempts: int = 50) -> None:
    """Remove the folder ``path`` even while a writer still adds to it. It is first renamed aside (in one step,
    to a name ``sweep_trash`` removes whoever finds it): a writer using its old path — git names files by the
    repository's absolute path, and creates missing folders again — can no longer add anything, and the name is
    free at once. Then ``rmtree``, repeated when entries appeared meanwhile. Raises OSError for any other failure."""
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)  # our folder's name, but not a folder: never followed
        return
    aside = _set_aside(path)
    for _ in range(attempts):
        if not os.path.lexists(aside):
            return
        failures = _rmtree(aside)
        if not os.path.lexists(aside):
            return
        hard = [e for e in failures if not (isinstance(e, OSError) and e.errno in _RETRY_ERRNOS)]
        if hard:
            raise hard[0]
        time.sleep(0.05)
    raise OSError(errno.ENOTEMPTY, "entries keep appearing in it", str(aside))


def _set_aside(path: Path) -> Path:
    for n in range(100):
        aside = path.with_name(f"{path.name}{TRASH}{os.getpid()}" + (f"-{n}" if n else ""))
        try:
            os.rename(path, aside)  # never onto an existing folder: rename replaces only an empty one
            return aside
        except FileNotFoundError:
            return aside if os.path.lexists(aside) else path  # gone meanwhile
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and os.path.lexists(aside):
                continue
            return path  # cannot be renamed (a mount point, no permission): removed where it is
    return path


def sweep_trash(parent: Path) -> None:
    """Folders a removal set aside and could not finish (a writer that would not stop, a kill): pure trash,
    removed by whoever finds them."""
    try:
        entries = [Path(e.path) for e in os.scandir(parent) if _TRASH_NAME.search(e.name)]
    except OSError:
        return
    for trash in entries:
        if not users(trash):
            discard(trash)


def _rmtree(path: Path) -> list[BaseException]:
    """One pass of ``rmtree`` that goes on past failures; the failures."""
    failures: list[BaseException] = []
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _func, _path, exc: failures.append(exc))
    else:
        shutil.rmtree(path, onerror=lambda _func, _path, info: failures.append(info[1]))
    return failures


def discard(path: Path) -> None:
    """Remove a half-made folder of this run's own, whose writer has been stopped; what cannot be removed now is
    left for the next run's ``clear`` (this runs on the way out of a failure, which must not be masked)."""
    try:
        remove_tree(path)
    except OSError:
        pass


def clear(path: Path, what: str, *, on_wait: Callable[[str], None], wait_s: float = WAIT_S) -> None:
    """Remove the half-made folder ``path`` (``what``: "an interrupted clone of flagtree") once nothing uses
    it; waits up to ``wait_s`` for its users, then raises WorkspaceBusy naming them."""

    def removed() -> bool:
        try:
            remove_tree(path, attempts=5)
        except OSError as exc:
            if exc.errno not in _RETRY_ERRNOS:
                raise
            return False
        return True

    _wait(path, what, lambda: users(path), removed, on_wait, wait_s)
    sweep_trash(path.parent)


def wait_for_holders(files: list[Path], path: Path, what: str, *, on_wait: Callable[[str], None],
                     wait_s: float = WAIT_S) -> None:
    """Return once no process holds one of ``files`` open (the index.lock of a git working in the checkout
    ``path``); after ``wait_s``, raise WorkspaceBusy naming them."""
    _wait(path, what, lambda: holders(files), lambda: True, on_wait, wait_s)


def _wait(path: Path, what: str, find: Callable[[], list[FolderUser]], done: Callable[[], bool],
          on_wait: Callable[[str], None], wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        busy = find()
        if not busy and done():
            return
        if time.monotonic() >= deadline:
            raise _in_use(path, what, busy, wait_s)
        if busy and not told:
            on_wait(f"waiting for {_named(busy)} to stop writing into {path} ({what})")
            told = True
        time.sleep(0.1)


def _named(busy: list[FolderUser]) -> str:
    first = f"pid {busy[0].pid} ({busy[0].command})"
    return first if len(busy) == 1 else f"{first} and {len(busy) - 1} more"


def _in_use(path: Path, what: str, busy: list[FolderUser], wait_s: float) -> WorkspaceBusy:
    if not busy:  # nothing holds it open, yet entries keep appearing
        return WorkspaceBusy(f"{path} ({what}) could not be removed: entries kept appearing in it for {wait_s:g} s; "
                             "a process is still writing into it", fix=f"find it (fuser -v {path}), let it finish "
                             "or stop it, then run the same command again")
    pids = " ".join(str(u.pid) for u in busy)
    return WorkspaceBusy(
        f"{path} ({what}) is still being written by {_named(busy)}; flagtree-cpu waited {wait_s:g} s and left it "
        "alone", details=tuple(f"pid {u.pid}: {u.command}" for u in busy),
        fix=f"if that is another flagtree-cpu or a git of yours, let it finish; if it is left over from a run that "
        f"was killed, stop it (kill {pids}); then run the same command again")
