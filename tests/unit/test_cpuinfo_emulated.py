"""The CPU as an emulator shows it: QEMU user mode passes the x86 host's /proc/cpuinfo through to an aarch64
program (uname and the auxiliary vector are right), and has no /proc/sys/abi/sve_default_vector_length, so
the SVE vector length comes from prctl(PR_SVE_GET_VL) — asked live, or recorded in a snapshot's manifest."""

from __future__ import annotations

import json
import platform
import struct
import sys
from pathlib import Path

import pytest

from flagtree_cpu_build.cpuinfo import (
    SNAPSHOT_MANIFEST,
    SVE_FILE,
    SVE_PRCTL,
    read_cpu,
    sve_bits_from_prctl,
    sve_length_from_prctl,
)
from flagtree_cpu_build.doctor import DoctorContext
from flagtree_cpu_build.doctor.machine import cpu_features, cpu_sve_length
from flagtree_cpu_build.host import read_host
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.stagekit.stage import RunOptions
from flagtree_cpu_build.workspace import Workspace

REQUIRED = {"asimd", "sve2", "i8mm", "bf16"}
# what QEMU 7.2 `-cpu max` puts in the auxiliary vector (EMULATION.md): asimd, sve / sve2, i8mm, bf16 ...
QEMU_HWCAP, QEMU_HWCAP2 = 0xECFFFFFB, 0x7F877FFF
AMD = ("processor\t: {i}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC 7B13\n"
       "flags\t\t: fpu sse sse2 aes avx avx2 sha_ni\n\n")
NEOVERSE_N2 = ("processor\t: {i}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve sve2 i8mm bf16 svei8mm svebf16\n"
               "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd49\n\n")


def auxv(hwcap: int, hwcap2: int) -> bytes:
    """An auxiliary vector as the kernel lays it out: (type, value) pairs of 8-byte words, AT_NULL last."""
    return struct.pack("<QQQQQQQQ", 16, hwcap, 6, 4096, 26, hwcap2, 0, 0)


def machine_root(tmp_path: Path, cpuinfo: str, *, hwcap: tuple[int, int] | None = None, sve_file: int | None = None,
                 manifest: dict | None = None) -> Path:
    """A fake root: two cores of ``cpuinfo``, Debian 12, and what else is given (sve_file in bytes)."""
    root = tmp_path / "root"
    (root / "proc/self").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12"\n')
    (root / "proc/cpuinfo").write_text("".join(cpuinfo.format(i=i) for i in range(2)))
    (root / "proc/meminfo").write_text("MemTotal:       16391404 kB\nMemAvailable:   14220112 kB\n")
    if hwcap is not None:
        (root / "proc/self/auxv").write_bytes(auxv(*hwcap))
    if sve_file is not None:
        (root / "proc/sys/abi").mkdir(parents=True)
        (root / "proc/sys/abi/sve_default_vector_length").write_text(f"{sve_file}\n")
    if manifest is not None:
        (root / SNAPSHOT_MANIFEST).write_text(json.dumps(manifest))
    return root


def board(sve_bits: int | None = None) -> dict:
    """A snapshot manifest of an aarch64 board, with what prctl said there."""
    return {"uname": {"machine": "aarch64"}, "euid": 1000, "sve_vector_bits": sve_bits}


def context(root: Path, tmp_path: Path, *, live: bool = False, python: Path | None = None) -> DoctorContext:
    """doctor's context for the board under ``root``; ``live`` judges it as this very machine (sysroot /)."""
    host = read_host(root)
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), host.os_id, host.arch)
    ws = Workspace(tmp_path / "ws")
    environ = {"HOME": str(tmp_path)}
    resolved = resolve(recipe, ws.root, placeholder_values(recipe, ws, host, environ), environ)
    return DoctorContext(resolved, ws, host, read_cpu(root), Path("/") if live else root,
                         RunOptions(python=python or ws.venv_dir / "bin" / "python"), environ, euid=1000)


# --- /proc/cpuinfo of another architecture than uname's ---------------------------------------------------------

def test_uname_and_hwcap_win_over_a_passed_through_x86_cpuinfo(tmp_path: Path) -> None:
    root = machine_root(tmp_path, AMD, hwcap=(QEMU_HWCAP, QEMU_HWCAP2))
    cpu = read_cpu(root, machine="aarch64")
    assert cpu.arch == "aarch64"
    assert REQUIRED | {"sve", "svei8mm", "svebf16"} <= cpu.features == cpu.hwcap  # HWCAP only
    assert not {"avx2", "aes", "sha_ni"} & cpu.features  # the x86 flags are not Arm features
    assert len(cpu.cores) == 2 and "AMD" not in cpu.model and cpu.model == "2x aarch64 core"
    assert cpu.cpuinfo_note == (
        "/proc/cpuinfo reads as x86_64 (AMD EPYC 7B13) but this machine is aarch64 (uname): most likely an emulator "
        "(QEMU user mode) passing the host's /proc/cpuinfo through; the features come from the auxiliary vector "
        "(HWCAP) alone")


def test_a_snapshots_manifest_says_the_architecture_for_cpu_and_host(tmp_path: Path) -> None:
    root = machine_root(tmp_path, AMD, hwcap=(QEMU_HWCAP, QEMU_HWCAP2), manifest=board())
    cpu = read_cpu(root)
    assert cpu.arch == "aarch64" and REQUIRED <= cpu.features
    assert "this machine is aarch64 (uname in the snapshot's manifest)" in cpu.cpuinfo_note
    host = read_host(root)
    assert (host.arch, host.cpu_count) == ("aarch64", 2)


def test_cpuinfo_decides_only_when_nothing_names_the_machine(tmp_path: Path) -> None:
    cpu = read_cpu(machine_root(tmp_path, AMD, hwcap=(QEMU_HWCAP, QEMU_HWCAP2)))  # no manifest: a bare copy
    assert cpu.arch == "x86_64" and cpu.model == "2x AMD EPYC 7B13" and cpu.cpuinfo_note is None
    agreeing = read_cpu(machine_root(tmp_path / "arm", NEOVERSE_N2), machine="aarch64")
    assert agreeing.model == "2x Neoverse-N2" and agreeing.cpuinfo_note is None and REQUIRED <= agreeing.features


def test_no_auxiliary_vector_leaves_no_features_and_says_so(tmp_path: Path) -> None:
    cpu = read_cpu(machine_root(tmp_path, AMD), machine="aarch64")
    assert cpu.features == frozenset() and cpu.hwcap is None
    assert cpu.cpuinfo_note.endswith("its features are not this machine's, and no auxiliary vector (HWCAP) could "
                                     "be read")


def test_cpu_features_check_goes_by_hwcap_and_says_what_it_overruled(tmp_path: Path) -> None:
    root = machine_root(tmp_path, AMD, hwcap=(QEMU_HWCAP, QEMU_HWCAP2), manifest=board(128))
    outcome = cpu_features(context(root, tmp_path))
    assert outcome.status == "ok", outcome
    assert outcome.detail.startswith("2x aarch64 core has asimd, sve2, i8mm, bf16 (HWCAP); /proc/cpuinfo reads as "
                                     "x86_64 (AMD EPYC 7B13) but this machine is aarch64 (uname in the snapshot's")
    assert "x86_64 CPU" not in outcome.detail
    # an emulated CPU without SVE2 (HWCAP2 bit 1) still fails, and the note stays with the verdict
    plain = machine_root(tmp_path / "n1", AMD, hwcap=(QEMU_HWCAP, QEMU_HWCAP2 & ~(1 << 1)), manifest=board())
    lacking = cpu_features(context(plain, tmp_path))
    assert lacking.status == "fail" and lacking.detail.startswith("2x aarch64 core lacks sve2 (HWCAP): ")
    assert "but this machine is aarch64" in lacking.detail


# --- the SVE vector length --------------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, bits", [
    (16, 128), (32, 256), (64, 512),
    (16 | 1 << 17, 128),  # PR_SVE_VL_INHERIT set
    (64 | 1 << 18, 512),  # PR_SVE_SET_VL_ONEXEC set
    (-1, None),  # EINVAL: a kernel or CPU without SVE, and x86
    (0, None),
])
def test_prctl_answer_to_vector_bits(answer: int, bits: int | None) -> None:
    assert sve_bits_from_prctl(answer) == bits


@pytest.mark.skipif(platform.machine() != "x86_64", reason="on aarch64 prctl answers (the arm64 tier tests that)")
def test_real_prctl_on_x86_has_no_sve_vector_length(tmp_path: Path) -> None:
    assert sve_length_from_prctl(None) is None  # this process, through ctypes
    assert sve_length_from_prctl(Path(sys.executable)) is None  # a target interpreter, in a process of its own
    assert sve_length_from_prctl(tmp_path / "no-such-python") is None
    # the check judging this machine (sysroot /) asks both, gets no answer, and the kernel file's 512 bits stand
    root = machine_root(tmp_path, NEOVERSE_N2, sve_file=64)
    outcome = cpu_sve_length(context(root, tmp_path, live=True, python=Path(sys.executable)))
    assert outcome.status == "fail" and "prctl" not in outcome.detail and "512-bit here;" in outcome.detail
    assert outcome.fix.startswith("echo 16 | sudo tee ")


def test_512_bit_vectors_fail_with_a_fix_that_works_without_the_kernel_file(tmp_path: Path) -> None:
    root = machine_root(tmp_path, NEOVERSE_N2, manifest=board(512))  # QEMU's `max`: no /proc/sys/abi file
    outcome = cpu_sve_length(context(root, tmp_path))
    assert outcome.status == "fail"
    assert outcome.detail == ("SVE vectors are 512-bit here (prctl PR_SVE_GET_VL); the build fixes them at 128 "
                              "(-msve-vector-bits=128), so its SVE code would compute wrong results, silently "
                              "(nothing crashes)")
    assert outcome.fix.startswith("the SVE vector length is set where the CPU is defined: under QEMU user mode run "
                                  "with QEMU_CPU=max,sve128=on or a 128-bit core model such as QEMU_CPU=neoverse-n2; "
                                  "on hardware, run on a board whose SVE is 128-bit")
    assert "tee" not in outcome.fix and SVE_FILE not in outcome.fix


def test_128_bit_vectors_from_prctl_are_what_the_build_assumes(tmp_path: Path) -> None:
    root = machine_root(tmp_path, NEOVERSE_N2, manifest=board(128))
    cpu = read_cpu(root)
    assert (cpu.sve_vector_bits, cpu.sve_source, cpu.sve_default_bits) == (128, SVE_PRCTL, None)
    outcome = cpu_sve_length(context(root, tmp_path))
    assert (outcome.status, outcome.detail) == (
        "ok", "128-bit SVE vectors (prctl PR_SVE_GET_VL), as the build assumes (-msve-vector-bits=128)")


def test_the_echo_fix_only_where_the_kernel_file_exists(tmp_path: Path) -> None:
    # prctl's 512 bits win over the file's default of 128 (a process can run with another length than the
    # default), and the file is named; it exists, so writing it is the fix
    both = machine_root(tmp_path / "both", NEOVERSE_N2, sve_file=16, manifest=board(512))
    outcome = cpu_sve_length(context(both, tmp_path))
    assert outcome.status == "fail" and "512-bit here (prctl PR_SVE_GET_VL)" in outcome.detail
    assert outcome.detail.endswith(f"; {SVE_FILE} says 128-bit")
    assert outcome.fix == f"echo 16 | sudo tee {SVE_FILE}   # new processes then get 128-bit vectors"
    # the file alone (a kernel's snapshot without prctl's answer): the wording doctor always had
    file_only = cpu_sve_length(context(machine_root(tmp_path / "file", NEOVERSE_N2, sve_file=64), tmp_path))
    assert file_only.detail == ("SVE vectors are 512-bit here; the build fixes them at 128 (-msve-vector-bits=128), "
                                "so its SVE code would compute wrong results")
    assert file_only.fix == outcome.fix


def test_neither_file_nor_prctl_answer_is_a_warning_with_a_way_to_check(tmp_path: Path) -> None:
    outcome = cpu_sve_length(context(machine_root(tmp_path, NEOVERSE_N2, manifest=board(None)), tmp_path))
    assert outcome.status == "warn"
    assert outcome.detail == (f"cannot tell the SVE vector length: {SVE_FILE} cannot be read and the snapshot "
                              "recorded no prctl answer")
    assert "prctl(51, 0, 0, 0, 0) & 0xffff" in outcome.fix
