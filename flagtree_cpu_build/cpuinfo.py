"""What the CPU can do, read from files under a root: /proc/cpuinfo, /sys, /proc/sys/abi, auxv.

libtriton built by FlagTree's CMake on aarch64 uses -march=armv9-a+sve2+i8mm+bf16 and
-msve-vector-bits=128: on a CPU without those features it dies with SIGILL, and with
another SVE vector length fixed-length SVE code is wrong. Heterogeneous SoCs (Cortex-A720
big + A520 little) run OpenMP kernels at half speed unless pinned to the big cores. This
module turns the kernel's files into those facts; reading them under ``root`` lets doctor
diagnose a board from a copied snapshot (``--sysroot``) and lets tests use snapshots.

The architecture is uname's (a snapshot's manifest records it), not /proc/cpuinfo's: QEMU user mode
(7.2) passes the x86 host's /proc/cpuinfo through to an aarch64 program, whose auxiliary vector (HWCAP)
is right. When the two disagree the features come from HWCAP alone and ``CpuFacts.cpuinfo_note`` says so.
The SVE vector length a process really runs with is ``prctl(PR_SVE_GET_VL)``; the kernel's default
(/proc/sys/abi/sve_default_vector_length) is missing under QEMU and on some kernels.
"""

from __future__ import annotations

import json
import platform
import re
import struct
from dataclasses import dataclass
from pathlib import Path

# (implementer, part) -> core name, for messages; Arm's implementer id is 0x41
CORE_NAMES = {
    ("0x41", "0xd03"): "Cortex-A53", ("0x41", "0xd05"): "Cortex-A55", ("0x41", "0xd08"): "Cortex-A72",
    ("0x41", "0xd0b"): "Cortex-A76", ("0x41", "0xd0c"): "Neoverse-N1", ("0x41", "0xd0d"): "Cortex-A77",
    ("0x41", "0xd40"): "Neoverse-V1", ("0x41", "0xd41"): "Cortex-A78", ("0x41", "0xd44"): "Cortex-X1",
    ("0x41", "0xd46"): "Cortex-A510", ("0x41", "0xd47"): "Cortex-A710", ("0x41", "0xd48"): "Cortex-X2",
    ("0x41", "0xd49"): "Neoverse-N2", ("0x41", "0xd4d"): "Cortex-A715", ("0x41", "0xd4e"): "Cortex-X3",
    ("0x41", "0xd4f"): "Neoverse-V2", ("0x41", "0xd80"): "Cortex-A520", ("0x41", "0xd81"): "Cortex-A720",
    ("0x41", "0xd82"): "Cortex-X4", ("0x41", "0xd84"): "Neoverse-V3", ("0x41", "0xd8e"): "Neoverse-N3",
}
LITTLE_CORES = {"Cortex-A53", "Cortex-A55", "Cortex-A510", "Cortex-A520"}

# Linux arm64 AT_HWCAP / AT_HWCAP2 bits (arch/arm64/include/uapi/asm/hwcap.h) for the features
# doctor asks about, named as /proc/cpuinfo names them
_HWCAP = {1: "asimd", 22: "sve"}
_HWCAP2 = {1: "sve2", 9: "svei8mm", 12: "svebf16", 13: "i8mm", 14: "bf16"}
_AT_HWCAP, _AT_HWCAP2 = 16, 26

# where an SVE vector length came from (CpuFacts.sve_source), as doctor names it
SVE_FILE = "/proc/sys/abi/sve_default_vector_length"
SVE_PRCTL = "prctl PR_SVE_GET_VL"
_PR_SVE_GET_VL = 51  # linux/prctl.h; -1 (EINVAL) on a kernel or CPU without SVE, and on x86
_PR_SVE_VL_LEN_MASK = 0xFFFF  # the length in bytes; PR_SVE_VL_INHERIT and PR_SVE_SET_VL_ONEXEC sit above it
_PRCTL_SCRIPT = f"import ctypes; print(ctypes.CDLL(None, use_errno=True).prctl({_PR_SVE_GET_VL}, 0, 0, 0, 0))"
_PRCTL_TIMEOUT_S = 30.0  # an emulated interpreter starts in about a second

# the manifest a board's snapshot (`doctor --snapshot`, snapshot.py) carries: what /etc and /proc do not say
SNAPSHOT_MANIFEST = "flagtree-cpu-snapshot.json"


@dataclass(frozen=True)
class Core:
    index: int
    name: str  # "Cortex-A720", or the x86 model name, or "part 0x..." when unknown
    features: frozenset[str]
    capacity: int | None  # /sys/devices/system/cpu/cpuN/cpu_capacity (relative performance)
    governor: str | None  # cpufreq scaling_governor


@dataclass(frozen=True)
class CpuFacts:
    arch: str  # uname -m ("aarch64", "x86_64" ...); without one what /proc/cpuinfo describes, or "unknown"
    cores: tuple[Core, ...]
    sve_vector_bits: int | None  # the SVE vector length processes get, as far as the files say
    hwcap: frozenset[str] | None  # features from the auxiliary vector, when it could be read
    sve_source: str | None = None  # where sve_vector_bits came from: SVE_FILE, or SVE_PRCTL (a snapshot's manifest)
    sve_default_bits: int | None = None  # /proc/sys/abi/sve_default_vector_length in bits; None: no such file
    # /proc/cpuinfo describes another architecture than uname (an emulator passing the host's through): what
    # was believed instead; its cores then carry no features and no name of their own
    cpuinfo_note: str | None = None

    @property
    def features(self) -> frozenset[str]:
        """Features every core has (a process may run on any of them), plus what HWCAP reports."""
        common = frozenset.intersection(*(c.features for c in self.cores)) if self.cores else frozenset()
        return common | (self.hwcap or frozenset())

    @property
    def model(self) -> str:
        names: list[str] = []
        for core in self.cores:
            if core.name not in names:
                names.append(core.name)
        counted = [f"{sum(c.name == n for c in self.cores)}x {n}" for n in names]
        return " + ".join(counted) or "unknown CPU"

    def big_cores(self) -> list[int] | None:
        """The cores to pin to on a heterogeneous SoC; None when all cores are alike."""
        capacities = [c.capacity for c in self.cores]
        if self.cores and all(c is not None for c in capacities) and len(set(capacities)) > 1:
            threshold = 0.6 * max(capacities)  # type: ignore[type-var]
            big = [c.index for c in self.cores if (c.capacity or 0) >= threshold]
        elif len({c.name for c in self.cores}) > 1:
            big = [c.index for c in self.cores if c.name not in LITTLE_CORES]
        else:
            return None
        return big if 0 < len(big) < len(self.cores) else None


def cpu_list(indices: list[int]) -> str:
    """``[0, 1, 6, 7, 8]`` -> ``"0-1,6-8"`` (taskset -c syntax)."""
    ranges: list[str] = []
    start = prev = None
    for i in sorted(indices) + [None]:  # type: ignore[list-item]
        if start is not None and (i is None or i != prev + 1):
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ",".join(ranges)


def read_cpu(root: Path = Path("/"), machine: str | None = None) -> CpuFacts:
    """The CPU of the machine under ``root``; ``machine`` is its ``uname -m`` (default: this machine's for
    ``/``, the manifest's for a snapshot; unknown without one, when /proc/cpuinfo decides)."""
    live = root == Path("/")
    manifest = {} if live else snapshot_facts(root)
    said_by = "uname" if live or machine else "uname in the snapshot's manifest"
    machine = machine or (platform.machine() if live else manifest.get("machine"))
    blocks = _blocks(_read(root / "proc/cpuinfo"))
    described = "aarch64" if any("CPU implementer" in b for b in blocks) else (
        "x86_64" if any("vendor_id" in b for b in blocks) else "unknown")
    arch = machine or described
    # another architecture's cpuinfo: its flags are not this machine's features, its model not this CPU
    foreign = described != "unknown" and machine is not None and _family(machine) != described
    cores, names = [], []
    for position, block in enumerate(b for b in blocks if "processor" in b):
        index = int(block.get("processor", position)) if str(block.get("processor", "")).isdigit() else position
        if described == "aarch64":
            key = (block.get("CPU implementer", ""), block.get("CPU part", ""))
            name = CORE_NAMES.get(key, f"part {key[1] or '?'}")
            features = frozenset(block.get("Features", "").split())
        else:
            name = block.get("model name", "unknown")
            features = frozenset(block.get("flags", "").split())
        if name not in names:
            names.append(name)
        if foreign:
            name, features = f"{arch} core", frozenset()
        cpu_dir = root / f"sys/devices/system/cpu/cpu{index}"
        capacity_text = _read(cpu_dir / "cpu_capacity").strip()
        governor = _read(cpu_dir / "cpufreq/scaling_governor").strip() or None
        cores.append(Core(index, name, features, int(capacity_text) if capacity_text.isdigit() else None, governor))
    hwcap = _hwcap(root / "proc/self/auxv") if arch == "aarch64" else None
    note = _foreign_note(described, names, arch, said_by, hwcap) if foreign else None
    vl_text = _read(root / "proc/sys/abi/sve_default_vector_length").strip()
    default_bits = int(vl_text) * 8 if vl_text.isdigit() else None
    # a snapshot's manifest has what prctl said on the board: what processes got, file or no file
    recorded = manifest.get("sve_vector_bits")
    bits, source = (recorded, SVE_PRCTL) if recorded else (default_bits, SVE_FILE if default_bits else None)
    return CpuFacts(arch, tuple(cores), bits, hwcap, source, default_bits, note)


def _family(machine: str) -> str:
    """``uname -m`` as the /proc/cpuinfo layout it comes with: 32-bit Arm shares Arm's, i686 x86's."""
    if machine in ("aarch64", "arm64") or machine.startswith("arm"):
        return "aarch64"
    if machine in ("x86_64", "amd64") or re.fullmatch(r"i[3-6]86", machine):
        return "x86_64"
    return machine


def _foreign_note(described: str, names: list[str], arch: str, said_by: str, hwcap: frozenset[str] | None) -> str:
    shown = f" ({' + '.join(names)})" if names else ""
    then = ("the features come from the auxiliary vector (HWCAP) alone" if hwcap is not None else
            "its features are not this machine's, and no auxiliary vector (HWCAP) could be read")
    return (f"/proc/cpuinfo reads as {described}{shown} but this machine is {arch} ({said_by}): most likely an "
            f"emulator (QEMU user mode) passing the host's /proc/cpuinfo through; {then}")


def sve_bits_from_prctl(answer: int) -> int | None:
    """``prctl(PR_SVE_GET_VL)``'s return value as the vector length in bits (the flags above the length are
    dropped); None for -1, which a kernel or CPU without SVE (and x86) answers."""
    length = answer & _PR_SVE_VL_LEN_MASK if answer >= 0 else 0
    return length * 8 or None


def sve_length_from_prctl(python: Path | None) -> int | None:
    """The SVE vector length in bits a process of ``python`` runs with (``None``: this process), asked of
    the kernel with prctl(PR_SVE_GET_VL); None when there is no SVE or no answer."""
    if python is None:
        return _prctl_here()
    from .proc import capture

    # -I -S: nothing but ctypes is needed, and an emulated interpreter starts faster without site; the
    # environment is inherited, so an emulator's QEMU_CPU (which sets the vector length) reaches it too
    try:
        answer = capture([str(python), "-I", "-S", "-c", _PRCTL_SCRIPT], timeout_s=_PRCTL_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - an interpreter that cannot start or hangs simply gives no answer
        return None
    text = answer.stdout.strip()
    return sve_bits_from_prctl(int(text)) if answer.returncode == 0 and re.fullmatch(r"-?\d+", text) else None


def _prctl_here() -> int | None:
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no C library to ask, or one without prctl (not Linux)
        return None
    zero = ctypes.c_ulong(0)
    return sve_bits_from_prctl(prctl(ctypes.c_int(_PR_SVE_GET_VL), zero, zero, zero, zero))


def snapshot_facts(root: Path) -> dict:
    """What a board's snapshot manifest says that its files do not ({} when there is none): ``machine``
    (uname -m) and ``glibc`` as text, ``sve_vector_bits`` (prctl's answer there) as a positive number; values
    of any other type are dropped (a damaged manifest says nothing)."""
    try:
        manifest = json.loads(_read(root / SNAPSHOT_MANIFEST) or "{}")
    except ValueError:
        return {}
    if not isinstance(manifest, dict):
        return {}
    uname = manifest.get("uname") if isinstance(manifest.get("uname"), dict) else {}
    facts = {"machine": uname.get("machine"), "glibc": manifest.get("glibc")}
    found: dict = {key: value for key, value in facts.items() if isinstance(value, str) and value}
    bits = manifest.get("sve_vector_bits")
    if isinstance(bits, int) and not isinstance(bits, bool) and bits > 0:
        found["sve_vector_bits"] = bits
    return found


def _blocks(text: str) -> list[dict[str, str]]:
    blocks, current = [], {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            current[re.sub(r"\s+", " ", key.strip())] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def _hwcap(auxv: Path) -> frozenset[str] | None:
    try:
        data = auxv.read_bytes()
    except OSError:
        return None
    found: set[str] = set()
    for offset in range(0, len(data) - 15, 16):
        kind, value = struct.unpack_from("<QQ", data, offset)
        table = _HWCAP if kind == _AT_HWCAP else _HWCAP2 if kind == _AT_HWCAP2 else None
        if table:
            found |= {name for bit, name in table.items() if value & (1 << bit)}
    return frozenset(found)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
