"""doctor on snapshots of real machine classes: the right status and the right fix for each check."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from flagtree_cpu_build.cpuinfo import read_cpu
from flagtree_cpu_build.doctor import DOCTOR_SCHEMA, Check, DoctorContext, all_checks, run_doctor
from flagtree_cpu_build.doctor import kit as doctor_module
from flagtree_cpu_build.host import read_host
from flagtree_cpu_build.placeholders import placeholder_values
from flagtree_cpu_build.recipe import resolve, select_variants
from flagtree_cpu_build.recipe.files import load_recipe
from flagtree_cpu_build.workspace import Workspace

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"


def report_for(snapshot: str | Path, tmp_path: Path, only: tuple[str, ...] = (), *, euid: int | None = 1000):
    """doctor on a snapshot; fixes as a user who is not root sees them, unless ``euid`` says otherwise."""
    root = HOSTS / snapshot
    host = read_host(root)
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), host.os_id, host.arch)
    ws = Workspace(tmp_path / "ws")
    resolved = resolve(recipe, ws.root, placeholder_values(recipe, ws, host, {"HOME": str(tmp_path)}))
    context = DoctorContext(resolved, ws, host, read_cpu(root), root, ws.venv_dir / "bin" / "python",
                            {"HOME": str(tmp_path)}, euid=euid)
    return run_doctor(context, only)


def by_id(report) -> dict:
    return {f.id: f for f in report.findings}


def test_big_little_board(tmp_path: Path) -> None:
    f = by_id(report_for("cix-p1-biglittle", tmp_path))
    assert f["host.arch"].status == "ok" and f["cpu.features"].status == "ok"
    assert f["cpu.sve-length"].status == "ok"
    assert f["cpu.topology"].status == "warn"
    assert f["cpu.topology"].fix == "taskset -c 0-1,6-11 python your_program.py"
    assert "8x Cortex-A720 + 4x Cortex-A520" in f["cpu.topology"].detail
    assert f["cpu.governor"].status == "warn" and "echo performance | sudo tee" in f["cpu.governor"].fix
    assert f["system.packages"].status == "warn"
    assert f["system.packages"].fix == "sudo apt-get install -y ccache libomp-dev nlohmann-json3-dev"
    assert f["resources.memory"].status == "ok" and "MAX_JOBS=12" in f["resources.memory"].detail


def test_neoverse_v2_server_is_fine(tmp_path: Path) -> None:
    report = report_for("graviton4-neoverse-v2", tmp_path)
    f = by_id(report)
    assert not report.failed
    assert f["cpu.features"].status == "ok" and "4x Neoverse-V2 has asimd, sve2, i8mm, bf16" in f["cpu.features"].detail
    assert f["cpu.topology"].status == "ok" and f["cpu.governor"].status == "skip"
    assert f["system.packages"].status == "ok"


def test_neoverse_v1_lacks_sve2_and_has_256_bit_vectors(tmp_path: Path) -> None:
    f = by_id(report_for("graviton3-neoverse-v1", tmp_path))
    assert f["cpu.features"].status == "fail" and "lacks sve2" in f["cpu.features"].detail
    assert "illegal instruction (SIGILL)" in f["cpu.features"].detail
    assert f["cpu.sve-length"].status == "fail" and "256-bit" in f["cpu.sve-length"].detail
    assert f["cpu.sve-length"].fix.startswith("echo 16 | sudo tee /proc/sys/abi/sve_default_vector_length")


def test_cortex_a76_has_no_sve_at_all(tmp_path: Path) -> None:
    f = by_id(report_for("rpi5-cortex-a76", tmp_path))
    assert f["cpu.features"].status == "fail" and "lacks sve2, i8mm, bf16" in f["cpu.features"].detail
    assert f["cpu.sve-length"].status == "skip"
    assert f["cpu.governor"].status == "warn" and "ondemand" in f["cpu.governor"].detail


def test_x86_host(tmp_path: Path) -> None:
    report = report_for("x86_64-debian", tmp_path)
    f = by_id(report)
    assert report.failed
    assert f["host.arch"].status == "fail" and "this machine is x86_64" in f["host.arch"].detail
    assert f["cpu.features"].status == "fail" and "is an x86_64 CPU" in f["cpu.features"].detail


def test_almalinux_gets_its_own_llvm_and_no_apt_check(tmp_path: Path) -> None:
    f = by_id(report_for("almalinux-9-aarch64", tmp_path))
    assert "llvm-a66376b0-almalinux-arm64.tar.gz" in f["host.os"].detail
    assert "AlmaLinux gets its own LLVM build" in f["host.os"].detail
    assert f["system.packages"].status == "skip" and "not a Debian/Ubuntu system" in f["system.packages"].detail


def test_local_checks_are_skipped_for_a_snapshot(tmp_path: Path) -> None:
    report = report_for("graviton4-neoverse-v2", tmp_path)
    for finding in report.findings:
        if finding.area in ("toolchain", "python", "network", "workspace", "runtime"):
            assert finding.status == "skip", finding.id


def test_json_validates_against_the_documented_schema(tmp_path: Path) -> None:
    document = report_for("cix-p1-biglittle", tmp_path).to_json()
    jsonschema.Draft202012Validator.check_schema(DOCTOR_SCHEMA)
    jsonschema.Draft202012Validator(DOCTOR_SCHEMA).validate(json.loads(json.dumps(document)))
    assert document["schema"] == "flagtree-cpu/doctor/v1"


def test_every_check_has_a_stable_unique_id() -> None:
    ids = [c.id for c in all_checks()]
    assert len(ids) == len(set(ids)) >= 25
    assert all(i.split(".")[0] in doctor_module.AREAS or i.split(".")[0] == "toolchain" for i in ids)


def test_a_crashing_check_is_reported_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(context: DoctorContext):
        raise RuntimeError("boom")

    all_checks()  # register the real ones first
    monkeypatch.setattr(doctor_module, "CHECKS", [*doctor_module.CHECKS, Check("cpu.broken", "cpu", "broken", broken)])
    report = report_for("graviton4-neoverse-v2", tmp_path)
    broken_finding = by_id(report)["cpu.broken"]
    assert broken_finding.status == "fail"
    assert broken_finding.detail == "the check itself failed: RuntimeError: boom"
    assert by_id(report)["cpu.features"].status == "ok"  # the others still ran


def test_only_the_asked_checks_run(tmp_path: Path) -> None:
    report = report_for("cix-p1-biglittle", tmp_path, ("cpu.topology",))
    assert [f.id for f in report.findings] == ["cpu.topology"]


# --- fixes that need root's rights: sudo for a user, none for root ---------------------------------------------


def low_memory_board(tmp_path: Path) -> Path:
    """The Graviton4 snapshot with 4 GiB: below the recipe's 7, so the swap fix appears."""
    import shutil

    root = tmp_path / "low-memory-board"
    shutil.copytree(HOSTS / "graviton4-neoverse-v2", root)
    meminfo = root / "proc/meminfo"
    meminfo.write_text("MemTotal:        4194304 kB\nMemAvailable:    3145728 kB\n")
    return root


@pytest.mark.parametrize("euid, sudo", [(1000, "sudo "), (0, "")])
def test_privileged_fixes_use_sudo_only_when_not_root(tmp_path: Path, euid: int, sudo: str) -> None:
    big_little = by_id(report_for("cix-p1-biglittle", tmp_path, euid=euid))
    assert big_little["system.packages"].fix == f"{sudo}apt-get install -y ccache libomp-dev nlohmann-json3-dev"
    assert f"echo performance | {sudo}tee $g" in big_little["cpu.governor"].fix
    v1 = by_id(report_for("graviton3-neoverse-v1", tmp_path, euid=euid))
    assert v1["cpu.sve-length"].fix.startswith(f"echo 16 | {sudo}tee /proc/sys/abi/sve_default_vector_length")
    memory = by_id(report_for(low_memory_board(tmp_path), tmp_path, euid=euid))["resources.memory"]
    assert memory.status == "warn"
    assert f"({sudo}fallocate -l 8G /swapfile && {sudo}mkswap /swapfile && {sudo}swapon /swapfile)" in memory.fix


def test_no_fix_says_sudo_to_root(tmp_path: Path) -> None:
    boards = [*(p.name for p in sorted(HOSTS.iterdir())), low_memory_board(tmp_path)]
    fixes = [f.fix for board in boards for f in report_for(board, tmp_path, euid=0).findings if f.fix]
    assert fixes and not [fix for fix in fixes if "sudo" in fix]


TOOLCHAIN = ("toolchain.git", "toolchain.cmake", "toolchain.ninja", "toolchain.compiler", "toolchain.ccache",
             "toolchain.pkg-config", "toolchain.openmp")


@pytest.mark.parametrize("euid, sudo", [(1000, "sudo "), (0, "")])
def test_toolchain_install_fixes_use_sudo_only_when_not_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             euid: int, sudo: str) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # a bare machine: no git, compiler, cmake, ninja ...
    host = read_host()
    recipe = select_variants(load_recipe("flagtree-cpu-arm64"), host.os_id, host.arch)
    ws = Workspace(tmp_path / "ws")
    resolved = resolve(recipe, ws.root, placeholder_values(recipe, ws, host, {"HOME": str(tmp_path)}))
    context = DoctorContext(resolved, ws, host, read_cpu(), Path("/"), ws.venv_dir / "bin" / "python",
                            {"HOME": str(tmp_path), "PATH": str(empty)}, euid=euid)
    findings = run_doctor(context, TOOLCHAIN).findings
    assert [f.id for f in findings if f.status == "ok"] == []
    for finding in findings:
        assert f"{sudo}apt-get install -y " in finding.fix, finding
        assert euid != 0 or "sudo" not in finding.fix, finding
