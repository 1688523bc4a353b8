"""What the CPU can do, read from files under a root: /proc/cpuinfo, /sys, /proc/sys/abi, auxv.

libtriton built by FlagTree's CMake on aarch64 uses -march=armv9-a+sve2+i8mm+bf16 and
-msve-vector-bits=128: on a CPU without those features it dies with SIGILL, and with
another SVE vector length fixed-length SVE code is wrong. Heterogeneous SoCs (Cortex-A720
big + A520 little) run OpenMP kernels at half speed unless pinned to the big cores. This
module turns the kernel's files into those facts; reading them under ``root`` lets doctor
diagnose a board from a copied snapshot (``--sysroot``) and lets tests use snapshots.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Core:
    index: int
    name: str  # "Cortex-A720", or the x86 model name, or "part 0x..." when unknown
    features: frozenset[str]
    capacity: int | None  # /sys/devices/system/cpu/cpuN/cpu_capacity (relative performance)
    governor: str | None  # cpufreq scaling_governor


@dataclass(frozen=True)
class CpuFacts:
    arch: str  # "aarch64", "x86_64" or "unknown"
    cores: tuple[Core, ...]
    sve_vector_bits: int | None  # the default SVE vector length processes get
    hwcap: frozenset[str] | None  # features from the auxiliary vector, when it could be read

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


def read_cpu(root: Path = Path("/")) -> CpuFacts:
    blocks = _blocks(_read(root / "proc/cpuinfo"))
    arch = "aarch64" if any("CPU implementer" in b for b in blocks) else (
        "x86_64" if any("vendor_id" in b for b in blocks) else "unknown")
    cores = []
    for position, block in enumerate(b for b in blocks if "processor" in b):
        index = int(block.get("processor", position)) if str(block.get("processor", "")).isdigit() else position
        if arch == "aarch64":
            key = (block.get("CPU implementer", ""), block.get("CPU part", ""))
            name = CORE_NAMES.get(key, f"part {key[1] or '?'}")
            features = frozenset(block.get("Features", "").split())
        else:
            name = block.get("model name", "unknown")
            features = frozenset(block.get("flags", "").split())
        cpu_dir = root / f"sys/devices/system/cpu/cpu{index}"
        capacity_text = _read(cpu_dir / "cpu_capacity").strip()
        governor = _read(cpu_dir / "cpufreq/scaling_governor").strip() or None
        cores.append(Core(index, name, features, int(capacity_text) if capacity_text.isdigit() else None, governor))
    vl_text = _read(root / "proc/sys/abi/sve_default_vector_length").strip()
    sve_bits = int(vl_text) * 8 if vl_text.isdigit() else None
    hwcap = _hwcap(root / "proc/self/auxv") if arch == "aarch64" else None
    return CpuFacts(arch, tuple(cores), sve_bits, hwcap)


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
