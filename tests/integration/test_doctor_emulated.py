"""`doctor --sysroot` on a snapshot of an emulated aarch64 machine, through the real CLI: QEMU 7.2 user mode
on an x86 host passes the host's /proc/cpuinfo (AMD EPYC) through, while uname and the auxiliary vector are
aarch64's, and there is no /proc/sys/abi/sve_default_vector_length (QEMU's `max` runs 512-bit SVE)."""

from __future__ import annotations

import io
import json
import platform
import tarfile
from pathlib import Path

from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.host import read_host
from flagtree_cpu_build.snapshot import MANIFEST_NAME, open_sysroot
from tests.conftest import REPO_ROOT
from tests.support.envelope import result_of

QEMU72 = REPO_ROOT / "tests" / "fixtures" / "hosts" / "qemu72-aarch64-on-x86"
CPU_CHECKS = ("host.arch", "cpu.features", "cpu.sve-length", "cpu.topology")


def doctor(*args: str) -> Result:
    return CliRunner().invoke(app, ["doctor", *args])


def cpu_findings(sysroot: Path, tmp_path: Path) -> tuple[int, dict[str, dict]]:
    checks = [a for i in CPU_CHECKS for a in ("--check", i)]
    result = doctor("--json", "--sysroot", str(sysroot), "-w", str(tmp_path / "ws"), *checks)
    return result.exit_code, {f["id"]: f for f in result_of(result.stdout)["checks"]}


def test_emulated_aarch64_is_judged_by_uname_and_hwcap(tmp_path: Path) -> None:
    code, found = cpu_findings(QEMU72, tmp_path)
    assert found["host.arch"]["status"] == "ok" and found["host.arch"]["detail"].startswith("aarch64")
    features = found["cpu.features"]
    assert features["status"] == "ok", features
    assert "x86_64 CPU" not in features["detail"] and not features["detail"].startswith("2x AMD")
    assert features["detail"].startswith("2x aarch64 core has asimd, sve2, i8mm, bf16 (HWCAP); ")
    assert ("/proc/cpuinfo reads as x86_64 (AMD EPYC 7B13) but this machine is aarch64 (uname in the snapshot's "
            "manifest)") in features["detail"]
    assert found["cpu.topology"]["detail"] == "2x aarch64 core: all cores alike"
    # QEMU's `max` gives 512-bit vectors: wrong numbers under -msve-vector-bits=128, and no kernel file to write
    length = found["cpu.sve-length"]
    assert code == 7 and length["status"] == "fail", length
    assert "512-bit here (prctl PR_SVE_GET_VL)" in length["detail"] and "wrong results" in length["detail"]
    assert "QEMU_CPU=max,sve128=on" in length["fix"] and "tee" not in length["fix"]


def test_the_same_board_packed_as_a_tarball_reads_the_same(tmp_path: Path) -> None:
    tarball = tmp_path / "qemu72.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:  # the manifest first, as `doctor --snapshot` writes it
        for path in sorted(QEMU72.rglob("*"), key=lambda p: p.name != MANIFEST_NAME):
            if path.is_file():
                tar.add(path, path.relative_to(QEMU72).as_posix())
    with open_sysroot(tarball) as board:
        assert (board.root / "proc/self/auxv").read_bytes() == (QEMU72 / "proc/self/auxv").read_bytes()
        host = read_host(board.root)
        assert (host.arch, host.cpu_count, host.glibc) == ("aarch64", 2, "2.36")
    assert cpu_findings(tarball, tmp_path) == cpu_findings(QEMU72, tmp_path)


def test_a_snapshot_records_what_re_judging_an_emulated_board_needs(tmp_path: Path) -> None:
    result = doctor("--snapshot", str(tmp_path / "here.tar.gz"))
    assert result.exit_code == 0, result.stderr
    with tarfile.open(tmp_path / "here.tar.gz") as tar:
        manifest = json.load(io.BytesIO(tar.extractfile(MANIFEST_NAME).read()))
        names = tar.getnames()
    assert manifest["uname"]["machine"] == platform.machine()  # overrules a passed-through /proc/cpuinfo
    assert "proc/self/auxv" in names  # HWCAP
    assert "sve_vector_bits" in manifest  # what prctl(PR_SVE_GET_VL) said: the length where there is no file
    if platform.machine() == "x86_64":
        assert manifest["sve_vector_bits"] is None
