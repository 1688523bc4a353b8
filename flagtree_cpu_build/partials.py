"""Half-made folders of our own: named so a later run recognizes them, owned so it can prove
their maker is gone, and removed on every way out. The one scheme for everything the tool makes
in steps: unpacked trees, imported tarballs, bundle imports, clones and git-cache mirrors.

A tree is unpacked into ``.<name>.flagtree-cpu-partial-<pid>/tree`` beside its destination
and swapped into place when complete (the replaced tree leaves inside the same folder); an
imported tarball is copied into such a folder in the download cache; a clone or a mirror is made
in ``.<name>.flagtree-cpu-partial-<pid>/<name>`` (so git's messages name it) and renamed into
place. Each folder holds
``owner.json`` — pid, process start time, boot id, host name, pid namespace — and its maker
holds an flock on that file for as long as it uses the folder.

Every fetch removes such folders when the lock is free *and* the record proves the owner
gone: the same host, and a later boot, or that pid not running or running another program
since (pid reuse). Nothing else is touched: a folder without a record, a record from another
machine sharing the home folder, a similar name made by someone else. Folders left by older
versions of the tool (no record) are named in a warning with the command that removes them —
except the half-made clones and mirrors of older versions (``.<name>.flagtree-cpu-partial``,
``<name>.partial``): their makers held the workspace or mirror lock the caller holds now, so
``clear_leftovers`` removes them like its own (``halfmade.clear``: never while a git still writes).

Ctrl-C and SIGTERM remove the folder on the way out (the code that made it removes it on any
exception); at interpreter exit, a folder still in use — by a worker thread that was still
unpacking when the main thread left — is stopped and removed. SIGKILL leaves it for the next run.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from .halfmade import clear, discard, remove_tree, sweep_trash

TAG = "flagtree-cpu-partial"
OWNER = "owner.json"
_NAME = re.compile(rf"^\.(?P<name>.+)\.{TAG}-(?P<pid>\d+)(?:-\d+)?$")
_LEGACY = re.compile(r"^\.(?P<name>.+)\.flagtree-cpu-(?P<kind>partial|old)(?:-(?P<pid>\d+))?$")
_RESERVED = (OWNER, "old")  # the owner record; where publish puts the tree it replaces
# what older versions called a half-made clone (sources) and git-cache mirror: ``kind`` of clear_leftovers
LEGACY_NAMES = {"clone": ".{}.flagtree-cpu-partial", "mirror": "{}.partial"}
_LIVE: dict[int, PartialFolder] = {}
_LIVE_LOCK = threading.Lock()


def identity(pid: int | None = None) -> dict[str, object]:
    """What tells this process apart from any other, on any machine, after any reboot."""
    pid = os.getpid() if pid is None else pid
    return {"tool": "flagtree-cpu", "pid": pid, "start": _start_ticks(pid), "boot_id": _read("/proc/sys/kernel/"
            "random/boot_id"), "host": socket.gethostname(), "pid_ns": _pid_namespace()}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    try:  # field 22, counted after the command name, which may hold spaces and parentheses
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def owner_gone(record: object) -> bool:
    """True only when ``record`` (an owner.json) proves its process is no longer running."""
    if not isinstance(record, dict) or record.get("tool") != "flagtree-cpu" or not isinstance(record.get("pid"), int):
        return False
    me = identity()
    if record.get("host") != me["host"]:
        return False  # a home folder shared with another machine: its processes are not ours to judge
    if record.get("boot_id") and me["boot_id"] and record["boot_id"] != me["boot_id"]:
        return True  # the machine was restarted since
    if record.get("pid_ns") != me["pid_ns"]:
        return False  # another container's pids
    return not _running(record["pid"], record.get("start"))


def _running(pid: int, start: object) -> bool:
    ticks = _start_ticks(pid)
    if ticks is not None:
        return ticks == start  # another start time: the pid was reused
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PartialFolder:
    """A folder beside ``beside`` that only this process writes into, until published or removed."""

    def __init__(self, path: Path, owner_fd: int, tree: str = "tree"):
        self.path = path
        self._tree = tree
        self.stop = threading.Event()  # set at exit: the writer stops at its next step
        self._idle = threading.Event()
        self._idle.set()
        self._fd: int | None = owner_fd
        self._lock = threading.Lock()

    @classmethod
    def create(cls, beside: Path, *, tree: str = "tree") -> PartialFolder:
        """``tree``: the name of what is made inside (a clone keeps its checkout's name: git's messages say it;
        a name the folder's own files have, or a hidden one, is "tree" instead)."""
        if not tree or tree in _RESERVED or "/" in tree or tree.startswith("."):
            tree = "tree"
        beside.parent.mkdir(parents=True, exist_ok=True)
        base = beside.with_name(f".{beside.name}.{TAG}-{os.getpid()}")
        for n in range(100):
            path = base if n == 0 else base.with_name(f"{base.name}-{n}")
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"{base}: no free name for a partial folder")
        # the record is written under another name and renamed, so a sweeper never sees it unlocked
        fd = os.open(path / ".owner.tmp", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, json.dumps({**identity(), "created": time.time()}).encode())
        os.rename(path / ".owner.tmp", path / OWNER)
        folder = cls(path, fd, tree)
        with _LIVE_LOCK:
            _LIVE[id(folder)] = folder
        return folder

    @property
    def tree(self) -> Path:
        return self.path / self._tree

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Held by the thread that writes into the folder, so the exit hook can wait for it."""
        self._idle.clear()
        try:
            yield
        finally:
            self._idle.set()

    def remove(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            discard(self.path)
            os.close(self._fd)  # releases the lock; the folder is gone (or a later run removes the rest)
            self._fd = None
        with _LIVE_LOCK:
            _LIVE.pop(id(self), None)

    def publish(self, dest: Path) -> None:
        """Put ``tree`` at ``dest`` in one step; a tree already there leaves with this folder."""
        if os.path.lexists(dest):
            if not _exchange(self.tree, dest):
                os.rename(dest, self.path / "old")  # an interrupt here leaves both in this folder
                os.rename(self.tree, dest)
        else:
            os.rename(self.tree, dest)
        self.remove()


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where it is not available."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def sweep(parent: Path, say: Callable[[str], None], warn: Callable[[str], None], *,
          published: Collection[str] = ()) -> list[Path]:
    """Remove our stale partial folders in ``parent``; name the ones older versions left beside the trees
    ``published`` (the names of the trees published in ``parent``)."""
    removed = []
    sweep_trash(parent)
    try:
        entries = sorted(os.scandir(parent), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for entry in entries:
        if not entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        if _NAME.match(entry.name) and (path / OWNER).exists():
            gone = _remove_if_gone(path)
            if gone is not None:
                removed.append(path)
                say(f"removed {path}: a half-made folder of flagtree-cpu pid {gone}, which is no longer running")
        elif (legacy := _LEGACY.match(entry.name)) and legacy["name"] in published \
                and not (path / OWNER).exists():
            if _legacy_old_tree(path, legacy):
                discard(path)
                removed.append(path)
                say(f"removed {path}: a replaced tree an interrupted flagtree-cpu publish left behind")
            elif legacy["pid"] is None or not _running(int(legacy["pid"]), None):
                warn(f"{path} looks like a half-made folder of an older flagtree-cpu; if no other machine or "
                     f"container shares {parent}, remove it: rm -rf {path}")
    return removed


def abandoned(parent: Path) -> list[tuple[Path, int]]:
    """Our partial folders in ``parent`` whose owner is provably gone, with its pid — nothing removed
    (what `clean --dry-run` shows; ``sweep`` removes them)."""
    try:
        entries = sorted(os.scandir(parent), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        path = Path(entry.path)
        if _NAME.match(entry.name) and entry.is_dir(follow_symlinks=False) and (path / OWNER).exists():
            pid = _remove_if_gone(path, remove=None)
            if pid is not None:
                found.append((path, pid))
    return found


def leftovers(beside: Path, kind: str | None = None) -> list[tuple[Path, int | None]]:
    """The half-made folders made for ``beside`` whose maker is provably gone (with its pid); with ``kind``
    (a key of LEGACY_NAMES) also the one an older version left under that kind's old name (pid None: it has
    no record, and the caller holds the lock its maker held: the workspace's, or the mirror's)."""
    return [(path, pid) for path, pid, made_for in leftovers_in(beside.parent, kind) if made_for == beside]


def leftovers_in(parent: Path, kind: str | None = None) -> list[tuple[Path, int | None, Path]]:
    """What ``leftovers`` finds in ``parent``, for any name: (folder, pid or None, the path it was made for)."""
    found: list[tuple[Path, int | None, Path]] = []
    for path, pid in abandoned(parent):
        named = _NAME.match(path.name)
        if named is not None:
            found.append((path, pid, parent / named["name"]))
    if kind is None:
        return found
    prefix, suffix = LEGACY_NAMES[kind].split("{}")
    try:
        names = sorted(os.listdir(parent))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for name in names:
        if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
            found.append((parent / name, None, parent / name[len(prefix):len(name) - len(suffix)]))
    return found


def clear_leftovers(beside: Path, what: str, *, on_wait: Callable[[str], None], kind: str | None = None) -> None:
    """Remove the ``leftovers`` of ``beside`` (``what``: "an interrupted clone of flagtree") once nothing writes
    into them: a git a killed run left behind is waited for, and named if it does not stop (``halfmade.clear``,
    WorkspaceBusy)."""
    for path, pid in leftovers(beside, kind):
        if pid is None:
            clear(path, what, on_wait=on_wait)
        else:  # under the owner record's lock again: the proof holds while the folder goes
            _remove_if_gone(path, remove=lambda p: clear(p, what, on_wait=on_wait))


def _remove_if_gone(path: Path, *, remove: Callable[[Path], None] | None = remove_tree) -> int | None:
    """Remove ``path`` (with ``remove``; None: only ask) when its owner is provably gone; the pid it had, or
    None when it stays."""
    try:
        fd = os.open(path / OWNER, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # its maker holds it: in use
        except OSError:
            pass  # no locks on this file system: the record alone decides
        try:
            record = json.loads(os.read(fd, 1 << 16))
        except ValueError:
            return None
        if not owner_gone(record):
            return None
        if remove is not None:
            try:
                remove(path)
            except OSError:
                return None  # left for the next sweep
        return int(record["pid"])
    finally:
        os.close(fd)


def _legacy_old_tree(path: Path, legacy: re.Match[str]) -> bool:
    """Older versions renamed a published tree to ``.<name>.flagtree-cpu-old`` to replace it and deleted it
    right after; one that carries our stamp is a tree we published and were deleting: never in use."""
    from .extract import read_stamp

    return legacy["kind"] == "old" and legacy["pid"] is None and read_stamp(path) is not None


@atexit.register
def _remove_live_on_exit() -> None:
    """The main thread is leaving while another thread may still write into a folder: stop it, wait a
    little for it to let go, and remove the folder."""
    with _LIVE_LOCK:
        live = list(_LIVE.values())
    for folder in live:
        folder.stop.set()
    for folder in live:
        folder._idle.wait(timeout=10)
        folder.remove()
