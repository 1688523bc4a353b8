"""CPU facts from snapshots of real machine classes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from flagtree_cpu_build.cpuinfo import cpu_list, read_cpu

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
REQUIRED = {"asimd", "sve2", "i8mm", "bf16"}


def test_big_little_board() -> None:
    cpu = read_cpu(HOSTS / "cix-p1-biglittle")
    assert cpu.arch == "aarch64"
    assert cpu.model == "8x Cortex-A720 + 4x Cortex-A520"
    assert REQUIRED <= cpu.features and cpu.sve_vector_bits == 128
    assert cpu.big_cores() == [0, 1, 6, 7, 8, 9, 10, 11]  # the guide's `taskset -c 0,1,6,7,8,9,10,11`
    assert {c.governor for c in cpu.cores} == {"schedutil"}


@pytest.mark.parametrize("snapshot, model, missing, vector_bits", [
    ("graviton4-neoverse-v2", "4x Neoverse-V2", set(), 128),
    ("graviton3-neoverse-v1", "4x Neoverse-V1", {"sve2"}, 256),
    ("rpi5-cortex-a76", "4x Cortex-A76", {"sve2", "i8mm", "bf16"}, None),
    ("almalinux-9-aarch64", "4x Neoverse-N1", {"sve2", "i8mm", "bf16"}, None),
])
def test_arm_servers_and_boards(snapshot: str, model: str, missing: set[str], vector_bits: int | None) -> None:
    cpu = read_cpu(HOSTS / snapshot)
    assert cpu.model == model
    assert REQUIRED - cpu.features == missing
    assert cpu.sve_vector_bits == vector_bits
    assert cpu.big_cores() is None  # homogeneous


def test_x86_host() -> None:
    cpu = read_cpu(HOSTS / "x86_64-debian")
    assert cpu.arch == "x86_64" and "Xeon" in cpu.model
    assert REQUIRED - cpu.features == REQUIRED


def test_hwcap_from_the_auxiliary_vector_adds_features(tmp_path: Path) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"
                                           "CPU part\t: 0xd4f\n\n")
    auxv = struct.pack("<QQQQQQ", 16, (1 << 1) | (1 << 22), 26, (1 << 1) | (1 << 13) | (1 << 14), 0, 0)
    (tmp_path / "proc/self/auxv").write_bytes(auxv)
    cpu = read_cpu(tmp_path)
    assert cpu.hwcap == {"asimd", "sve", "sve2", "i8mm", "bf16"}
    assert REQUIRED <= cpu.features


@pytest.mark.parametrize("indices, text", [
    ([0, 1, 6, 7, 8, 9, 10, 11], "0-1,6-11"), ([3], "3"), ([0, 2, 4], "0,2,4"), ([5, 4, 6], "4-6"),
])
def test_cpu_list(indices: list[int], text: str) -> None:
    assert cpu_list(indices) == text
