"""Facts about the machine we run on, read from files under a root folder.

Reading ``/etc/os-release`` and ``/proc/meminfo`` through a ``root`` argument (instead of
hard-coded absolute paths) lets tests and ``doctor`` fixtures use snapshots of real
machines — an AlmaLinux aarch64 board, a big.LITTLE SoC — on any build host.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

from .cpuinfo import SNAPSHOT_MANIFEST, read_cpu, snapshot_facts

__all__ = ["SNAPSHOT_MANIFEST", "HostFacts", "host_glibc", "parse_meminfo", "parse_os_release", "read_host"]


@dataclass(frozen=True)
class HostFacts:
    system: str  # "linux", lower-case platform.system()
    arch: str  # uname -m: aarch64, x86_64 ...
    os_id: str  # /etc/os-release ID: ubuntu, debian, almalinux ... ("" if unknown)
    os_version_id: str
    os_pretty_name: str
    cpu_count: int  # CPUs this process may run on (respects taskset and cpusets)
    mem_total: int | None  # bytes
    mem_available: int | None  # bytes
    glibc: str | None = None  # "2.35" (artifact variants may select on it); None when unknown
    os_id_like: tuple[str, ...] = ()  # /etc/os-release ID_LIKE: the families it follows (rhel centos fedora)


def parse_os_release(text: str) -> dict[str, str]:
    """Parse os-release(5): KEY=value lines, values optionally quoted."""
    result = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        result[key.strip()] = value
    return result


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` as bytes per field (the file says kB and means KiB)."""
    result = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            factor = 1024 if len(fields) > 1 and fields[1] == "kB" else 1
            result[key.strip()] = int(fields[0]) * factor
    return result


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def read_host(root: Path = Path("/")) -> HostFacts:
    os_release = parse_os_release(_read(root / "etc/os-release") or _read(root / "usr/lib/os-release"))
    meminfo = parse_meminfo(_read(root / "proc/meminfo"))
    if root == Path("/"):
        arch = platform.machine()
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            cpus = os.cpu_count() or 1
    else:  # a snapshot of another machine: its own files say what it is
        cpu = read_cpu(root)
        # the board's uname, when its manifest says, over /proc/cpuinfo's text (which an emulator may have
        # passed through from its host, or which names no architecture at all: riscv64 ...)
        arch, cpus = snapshot_facts(root).get("machine") or cpu.arch, max(1, len(cpu.cores))
    return HostFacts(
        system=platform.system().lower(),
        arch=arch,
        os_id=os_release.get("ID", ""),
        os_version_id=os_release.get("VERSION_ID", ""),
        os_pretty_name=os_release.get("PRETTY_NAME", ""),
        cpu_count=cpus,
        mem_total=meminfo.get("MemTotal"),
        mem_available=meminfo.get("MemAvailable", meminfo.get("MemFree")),
        glibc=host_glibc() if root == Path("/") else snapshot_facts(root).get("glibc"),
        os_id_like=tuple(os_release.get("ID_LIKE", "").split()[:16]),
    )


def host_glibc() -> str | None:
    """This machine's glibc version (None on musl or when the C library does not say)."""
    try:
        name, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not glibc / not POSIX
        return None
    return version if name == "glibc" and version else None
