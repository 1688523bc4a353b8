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


# the manifest a board's snapshot (`doctor --snapshot`, snapshot.py) carries: what /etc and /proc do not say
SNAPSHOT_MANIFEST = "flagtree-cpu-snapshot.json"


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
        from .cpuinfo import read_cpu

        cpu = read_cpu(root)
        arch, cpus = cpu.arch, max(1, len(cpu.cores))
        if arch == "unknown":  # /proc/cpuinfo of neither Arm nor x86 (riscv64 ...): the snapshot's uname says
            arch = _snapshot_machine(root) or arch
    return HostFacts(
        system=platform.system().lower(),
        arch=arch,
        os_id=os_release.get("ID", ""),
        os_version_id=os_release.get("VERSION_ID", ""),
        os_pretty_name=os_release.get("PRETTY_NAME", ""),
        cpu_count=cpus,
        mem_total=meminfo.get("MemTotal"),
        mem_available=meminfo.get("MemAvailable", meminfo.get("MemFree")),
        glibc=host_glibc() if root == Path("/") else _snapshot_manifest(root).get("glibc"),
    )


def host_glibc() -> str | None:
    """This machine's glibc version (None on musl or when the C library does not say)."""
    try:
        name, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not glibc / not POSIX
        return None
    return version if name == "glibc" and version else None


def _snapshot_manifest(root: Path) -> dict:
    """The manifest ``flagtree-cpu doctor --snapshot`` writes into a board's snapshot ({} when there is none);
    only its text values are kept (a damaged manifest says nothing)."""
    import json

    try:
        manifest = json.loads(_read(root / SNAPSHOT_MANIFEST) or "{}")
    except ValueError:
        return {}
    if not isinstance(manifest, dict):
        return {}
    uname = manifest.get("uname") if isinstance(manifest.get("uname"), dict) else {}
    facts = {"machine": uname.get("machine"), "glibc": manifest.get("glibc")}
    return {key: value for key, value in facts.items() if isinstance(value, str) and value}


def _snapshot_machine(root: Path) -> str | None:
    """``uname -m`` of the board, from its snapshot's manifest."""
    return _snapshot_manifest(root).get("machine")
