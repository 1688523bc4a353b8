"""Board snapshots: the files doctor reads about a machine, packed on one machine, read on another.

``tar czf snapshot.tgz /proc/cpuinfo ...`` does not work: the kernel reports every /proc file as
0 bytes long, so tar stores them empty, and ``/etc/os-release`` is usually a symlink
(``../usr/lib/os-release``) that tar stores as a dangling link. ``write_snapshot`` reads each
file's *contents* (following links) and writes a member of the real length, plus a manifest.

A snapshot comes from another machine, so ``open_sysroot`` extracts it as hostile input: into a
fresh temporary folder that is removed afterwards, only regular files under the relative paths
listed here, bounded in size and number, no links, no absolute or ``..`` names. Anything else
stops with exit 2 naming the member, before that member's bytes are read.
"""

from __future__ import annotations

import bz2
import datetime
import gzip
import io
import json
import lzma
import os
import re
import shutil
import socket
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from . import __version__
from .atomic import write_atomic
from .cpuinfo import sve_length_from_prctl
from .errors import UsageError
from .gpu_facts import record_gpu
from .host import SNAPSHOT_MANIFEST, host_glibc
from .invocation import elsewhere

SCHEMA_ID = "flagtree-cpu/snapshot/v1"
MANIFEST_NAME = SNAPSHOT_MANIFEST

# Every file host.py, cpuinfo.py, system_packages.py and doctor/machine.py read under a sysroot; keep in step.
# /proc/self/auxv is the snapshotting process's own auxiliary vector: its HWCAP bits are the machine's.
# What no file says goes into the manifest: uname (it overrules a /proc/cpuinfo an emulator passed through
# from its host) and the SVE vector length prctl gives (under QEMU there is no sve_default_vector_length).
FIXED_FILES = (
    "etc/os-release",
    "usr/lib/os-release",  # host.read_host's fallback when etc/os-release is missing
    "proc/cpuinfo",
    "proc/meminfo",
    "proc/sys/abi/sve_default_vector_length",
    "proc/self/auxv",
    "var/lib/dpkg/status",
    "proc/driver/nvidia/version",  # the NVIDIA driver's version (gpu_facts: device rules replay from a snapshot)
)
CPU_DIR = "sys/devices/system/cpu"
PER_CPU_FILES = ("cpu_capacity", "cpufreq/scaling_governor")
_PER_CPU = re.compile(r"sys/devices/system/cpu/cpu[0-9]{1,5}/(?:cpu_capacity|cpufreq/scaling_governor)")

# Generous for the largest of them (dpkg's status on a full desktop is a few MiB), small enough that a
# hostile archive cannot fill the disk: a 1 KiB gzip member can claim gigabytes.
MAX_MEMBER_BYTES = 32 * 1024**2
MAX_TOTAL_BYTES = 64 * 1024**2
MAX_MEMBERS = 2 * 4096 + len(FIXED_FILES) + 1  # two files per CPU, up to 4096 CPUs
# the decompressed stream: the members, their 512-byte headers and padding, and tar's closing records
_STREAM_LIMIT = MAX_TOTAL_BYTES + MAX_MEMBERS * 1536 + (1 << 20)

_REMAKE = f"make the snapshot on the board with `{elsewhere('doctor', '--snapshot', 'board.tar.gz')}`"


@dataclass(frozen=True)
class SnapshotWritten:
    path: Path
    files: tuple[str, ...]  # members written (relative paths), manifest excluded
    absent: tuple[str, ...]  # files doctor would read that this machine does not have (or are too large)
    size: int  # bytes of the tarball
    manifest: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"snapshot": str(self.path), "size": self.size, "files": list(self.files),
                "absent": list(self.absent), "manifest": self.manifest}


@dataclass(frozen=True)
class Sysroot:
    root: Path  # where to read proc/, sys/, etc/ from
    label: str  # what the user named: the folder or the tarball
    manifest: dict[str, Any] | None  # a snapshot's manifest, when it has one

    @property
    def euid(self) -> int | None:
        """Who made the snapshot on the board (0: root), when the manifest says."""
        euid = (self.manifest or {}).get("euid")
        return euid if isinstance(euid, int) and not isinstance(euid, bool) else None

    def describe(self) -> str:
        if not self.manifest:
            return self.label
        who = self.manifest.get("hostname") or "a machine"
        return f"{self.label}: snapshot of {who} taken {self.manifest.get('created', '?')}"


def is_allowed(name: str) -> bool:
    """True for the relative paths a snapshot may hold."""
    return name in FIXED_FILES or name == MANIFEST_NAME or _PER_CPU.fullmatch(name) is not None


def snapshot_paths(root: Path) -> list[str]:
    """The relative paths doctor reads on the machine under ``root``, per-CPU files in CPU order."""
    cpus = sorted((p for p in (root / CPU_DIR).glob("cpu[0-9]*") if p.name[3:].isdigit()),
                  key=lambda p: int(p.name[3:]))
    return [*FIXED_FILES, *(f"{CPU_DIR}/{cpu.name}/{name}" for cpu in cpus for name in PER_CPU_FILES)]


# --- writing (on the board) ----------------------------------------------------------------------------------


def write_snapshot(dest: Path, root: Path = Path("/"), *, ask_nvidia_smi: bool | None = None) -> SnapshotWritten:
    """Write the snapshot tarball of the machine under ``root`` to ``dest`` (atomically); nvidia-smi is asked on
    this machine itself (``ask_nvidia_smi``, default: when ``root`` is /)."""
    dest = Path(os.path.abspath(dest))
    _check_destination(dest)
    contents: dict[str, bytes] = {}
    absent: list[str] = []
    for rel in snapshot_paths(root):
        data = _read_bounded(root / rel)
        if data is None:
            absent.append(rel)
        else:
            contents[rel] = data
    now = datetime.datetime.now(datetime.timezone.utc)
    live = root == Path("/")
    uname = os.uname()
    manifest = {
        "schema": SCHEMA_ID, "tool_version": __version__, "created": now.isoformat(timespec="seconds"),
        # another root is a copy of some other machine: this one's name and kernel would be wrong
        "hostname": socket.gethostname() if live else None,
        "uname": {"sysname": uname.sysname, "release": uname.release, "version": uname.version,
                  "machine": uname.machine} if live else None,
        "euid": os.geteuid() if live else None,  # so fixes for the board drop sudo when it was made as root
        # artifact variants may select on it (triton-cpu's LLVM: almalinux-x64 for glibc <= 2.28)
        "glibc": host_glibc() if live else None,
        # what this process runs with (prctl PR_SVE_GET_VL); null without SVE (x86, older Arm cores)
        "sve_vector_bits": sve_length_from_prctl(None) if live else None,
        # the accelerator nodes (a snapshot holds no /dev) and nvidia-smi's answer, for the recipe's device rules
        "gpu": record_gpu(root, live=live if ask_nvidia_smi is None else ask_nvidia_smi),
        "files": list(contents), "absent": absent,
    }
    packed = io.BytesIO()  # small: every file was read bounded
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        _add_member(tar, MANIFEST_NAME, json.dumps(manifest, indent=2).encode(), now)
        for rel, data in contents.items():
            _add_member(tar, rel, data, now)
    try:
        write_atomic(dest, packed.getvalue())
    except OSError as exc:
        raise UsageError(f"could not write the snapshot {dest}: {exc.strerror or exc}",
                         fix="pass --snapshot a path in a folder you can write to") from None
    return SnapshotWritten(dest, tuple(contents), tuple(absent), dest.stat().st_size, manifest)


def _check_destination(dest: Path) -> None:
    if not dest.parent.is_dir():
        raise UsageError(f"cannot write the snapshot {dest}: the folder {dest.parent} does not exist",
                         fix=f"create it first (mkdir -p {dest.parent}) or pass another path")
    # re-running replaces its own earlier snapshot; any other file is the user's and stays
    if dest.is_dir() or (dest.exists() and not is_snapshot(dest)):
        raise UsageError(f"{dest} already exists and is not a flagtree-cpu snapshot; it was left as it is",
                         fix="pass another path to --snapshot, or remove that file yourself")


def is_snapshot(path: Path) -> bool:
    """True when ``path`` is a tarball this module wrote (its first member is the manifest)."""
    try:
        with _decompressed(path) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            first = tar.next()
            return first is not None and first.name == MANIFEST_NAME
    except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, _TooLarge):
        return False


def _read_bounded(path: Path) -> bytes | None:
    """The file's contents (links followed), or None when it is missing, unreadable or too large.

    Read, never stat-ed: /proc and /sys files report a size of 0 (or 4096) whatever they hold.
    """
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_MEMBER_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_MEMBER_BYTES else None


def _add_member(tar: tarfile.TarFile, name: str, data: bytes, now: datetime.datetime) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, int(now.timestamp())
    tar.addfile(info, io.BytesIO(data))


# --- reading (anywhere) --------------------------------------------------------------------------------------


@contextmanager
def open_sysroot(path: Path) -> Iterator[Sysroot]:
    """A folder as it is, or a snapshot tarball extracted safely into a temporary folder removed on exit."""
    path = Path(os.path.abspath(path.expanduser()))
    if path.is_dir():
        if path != Path("/"):  # the live /proc reports 0 bytes too; a copy of it must not be empty
            _refuse_empty_proc_files(path, str(path), "folder")
        yield Sysroot(path, str(path), _read_manifest(path))
        return
    if not path.is_file():
        raise UsageError(f"--sysroot {path} does not exist",
                         fix="pass a board's snapshot (FILE.tar.gz from `flagtree-cpu doctor --snapshot`) or a "
                         "folder holding its proc/, sys/ and etc/")
    scratch = Path(tempfile.mkdtemp(prefix="flagtree-cpu-snapshot-"))
    try:
        extract_snapshot(path, scratch)
        _refuse_empty_proc_files(scratch, str(path), "snapshot")
        yield Sysroot(scratch, str(path), _read_manifest(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def extract_snapshot(tarball: Path, dest: Path) -> list[str]:
    """Extract the allowed regular files of ``tarball`` into the empty folder ``dest``; the names extracted.

    Each member is judged from its header alone, before any of its bytes are read or written.
    """
    seen: list[str] = []
    total = 0
    try:
        # stream mode over a bounded reader: tarfile reads a pax or GNU long-name header into memory
        # whole, so the decompressed stream itself must be capped, not only each member's declared size
        with _decompressed(tarball) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                name = _judge(tarball, member, seen, total)
                if name is None:
                    continue  # a folder on the way to an allowed file: made below, not from the archive
                seen.append(name)
                total += member.size
                _copy_member(tar, member, dest / name)
    except _TooLarge:
        raise UsageError(f"--sysroot {tarball} unpacks to more than the {_STREAM_LIMIT} bytes a snapshot may have, "
                         "so it was refused", fix=_REMAKE) from None
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError) as exc:
        raise UsageError(f"--sysroot {tarball} is not a readable snapshot tarball ({exc})",
                         fix=f"{_REMAKE}, or pass a folder holding its proc/, sys/ and etc/") from None
    return seen


class _TooLarge(Exception):
    pass

_MAGIC = ((b"\x1f\x8b", gzip.open), (b"BZh", bz2.open), (b"\xfd7zXZ\x00", lzma.open))


class _BoundedReader:
    """The decompressed bytes of a snapshot, refusing to yield more than ``_STREAM_LIMIT`` of them."""

    def __init__(self, source: Any) -> None:
        self._source, self._count = source, 0

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size if size >= 0 else _STREAM_LIMIT + 1 - self._count)
        self._count += len(data)
        if self._count > _STREAM_LIMIT:
            raise _TooLarge()
        return data


@contextmanager
def _decompressed(tarball: Path) -> Iterator[_BoundedReader]:
    with open(tarball, "rb") as raw:
        magic = raw.read(6)
        raw.seek(0)
        opener = next((o for m, o in _MAGIC if magic.startswith(m)), None)
        with (opener(raw, "rb") if opener else raw) as source:
            yield _BoundedReader(source)


def _judge(tarball: Path, member: tarfile.TarInfo, seen: list[str], total: int) -> str | None:
    raw = member.name
    parts = PurePosixPath(raw).parts
    if raw.startswith("/"):
        _refuse(tarball, raw, "an absolute path")
    if ".." in parts:
        _refuse(tarball, raw, "a path that climbs out with '..'")
    name = "/".join(p for p in parts if p != ".")  # `tar -C dir -czf x .` writes ./proc/cpuinfo
    if member.issym() or member.islnk():
        _refuse(tarball, raw, f"a {'symbolic' if member.issym() else 'hard'} link (to {member.linkname!r}); a "
                "snapshot holds the files' contents")
    if member.isdir():
        if name == "" or any(p.startswith(name + "/") for p in FIXED_FILES) or _is_cpu_folder(name):
            return None
        _refuse(tarball, raw, "a folder doctor never reads")
    if not member.isreg():
        _refuse(tarball, raw, "not a regular file (a device, FIFO or other special file)")
    if not is_allowed(name):
        _refuse(tarball, raw, "not a file doctor reads")
    if name in seen:
        _refuse(tarball, raw, "in the archive twice")
    if len(seen) >= MAX_MEMBERS:
        _refuse(tarball, raw, f"beyond the {MAX_MEMBERS} files a snapshot may hold")
    if member.size > MAX_MEMBER_BYTES:
        _refuse(tarball, raw, f"{member.size} bytes, more than the {MAX_MEMBER_BYTES} a snapshot file may have")
    if total + member.size > MAX_TOTAL_BYTES:
        _refuse(tarball, raw, f"past the {MAX_TOTAL_BYTES} bytes a whole snapshot may have")
    return name


def _is_cpu_folder(name: str) -> bool:
    return re.fullmatch(r"sys(/devices(/system(/cpu(/cpu[0-9]{1,5}(/cpufreq)?)?)?)?)?", name) is not None


def _refuse(tarball: Path, member: str, why: str) -> None:
    raise UsageError(f"--sysroot {tarball}: member {member!r} is {why}, so the snapshot was refused and nothing "
                     "of it was used", fix=_REMAKE + ", which holds only the regular files doctor reads")


def _copy_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    assert source is not None  # a regular file, judged above
    # "x": never through anything already there (nothing is, in a fresh folder without links)
    with source, open(target, "xb") as out:
        remaining = member.size
        while remaining:
            chunk = source.read(min(remaining, 1 << 20))
            if not chunk:
                raise tarfile.ReadError(f"{member.name} ends early")
            out.write(chunk)
            remaining -= len(chunk)


def _refuse_empty_proc_files(root: Path, label: str, kind: str) -> None:
    empty = [rel for rel in FIXED_FILES if rel.startswith("proc/") and (root / rel).is_file()
             and (root / rel).stat().st_size == 0]
    if empty:
        raise UsageError(f"--sysroot {label}: {', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty in this "
                         f"{kind} — tar copies /proc files as 0 bytes (the kernel reports that size), so the board "
                         "would read as unknown", fix=_REMAKE + ", which copies the files' contents")


def _read_manifest(root: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None
