"""`doctor --snapshot` records the GPU (accelerator device nodes, /proc/driver/nvidia/version, nvidia-smi's answer)
and `doctor --sysroot SNAPSHOT` judges the recipe's device rules from that record (issue 29: a snapshot of an H100
host recorded nothing of its GPU). Fake nvidia-smi scripts on PATH, fixture /proc and /dev trees."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flagtree_cpu_build.cli import app
from flagtree_cpu_build.snapshot import write_snapshot
from tests.support.envelope import result_of

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
H100_CSV = "name, driver_version, compute_cap\nNVIDIA H100 80GB HBM3, 580.65.06, 9.0\n"
DRIVER = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n"


def fake_nvidia_smi(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return folder


def board(tmp_path: Path, *devices: str) -> Path:
    """An x86_64 host tree with the NVIDIA driver's version file and the given /dev nodes (plain files stand in)."""
    root = tmp_path / "board"
    shutil.copytree(HOSTS / "x86_64-debian", root)
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(DRIVER)
    for device in devices:
        (root / device).parent.mkdir(parents=True, exist_ok=True)
        (root / device).write_text("")
    return root


def manifest(tarball: Path) -> dict[str, Any]:
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("flagtree-cpu-snapshot.json") if "flagtree-cpu-snapshot.json" in tar.getnames() \
            else tar.extractfile(tar.getmembers()[0])
        assert member is not None
        return json.load(member)


def doctor(tmp_path: Path, sysroot: Path, variant: str, *only: str) -> dict[str, dict[str, Any]]:
    args = ["-w", str(tmp_path / "ws"), "--recipe", "torch-fl", "--variant", variant, "doctor", "--json",
            "--sysroot", str(sysroot)]
    for check in only:
        args += ["--only", check]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 7), result.output
    return {f["id"]: f for f in result_of(result.stdout)["checks"]}


def test_a_live_snapshot_records_what_nvidia_smi_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = fake_nvidia_smi(tmp_path / "bin", f"printf '{H100_CSV}'\n")
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    result = CliRunner().invoke(app, ["-w", str(tmp_path / "ws"), "doctor", "--snapshot", str(tmp_path / "s.tgz")])
    assert result.exit_code == 0, result.output
    gpu = manifest(tmp_path / "s.tgz")["gpu"]
    assert gpu["nvidia_smi"] == {"present": True, "gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "driver_version": "580.65.06", "compute_cap": "9.0"}]}
    assert isinstance(gpu["devices"], list)


def test_a_missing_or_endless_nvidia_smi_is_recorded_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi there
    write_snapshot(tmp_path / "none.tgz", board(tmp_path), ask_nvidia_smi=True)
    assert manifest(tmp_path / "none.tgz")["gpu"]["nvidia_smi"] == {"present": False}
    tools = fake_nvidia_smi(tmp_path / "bin", "yes NVIDIA\n")
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    write_snapshot(tmp_path / "endless.tgz", tmp_path / "board", ask_nvidia_smi=True)
    assert manifest(tmp_path / "endless.tgz")["gpu"]["nvidia_smi"] == {"present": True, "error": "too much output"}


def test_a_snapshot_replay_judges_the_device_rules_from_the_record(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tools = fake_nvidia_smi(tmp_path / "bin", f"printf '{H100_CSV}'\n")
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    root = board(tmp_path, "dev/nvidia0", "dev/nvidiactl", "dev/dri/renderD128")
    snap = tmp_path / "h100.tgz"
    written = write_snapshot(snap, root, ask_nvidia_smi=True)
    assert "proc/driver/nvidia/version" in written.files
    assert manifest(snap)["gpu"]["devices"] == ["/dev/nvidia0", "/dev/nvidiactl", "/dev/dri/renderD128"]
    # away from the board (this machine has no nvidia-smi): the record says the board has one
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    cuda = doctor(tmp_path, snap, "cuda", "host.commands")["host.commands"]
    assert cuda["status"] == "ok" and "NVIDIA H100 80GB HBM3" in cuda["detail"], cuda
    # the metax variant needs /dev/mxcd, which the snapshot records as absent
    metax = doctor(tmp_path, snap, "metax", "host.devices")["host.devices"]
    assert metax["status"] == "fail" and "no /dev/mxcd" in metax["detail"], metax
    # a board without the driver's nvidia-smi fails the cuda rule from its snapshot, with the recipe's fix
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    bare = tmp_path / "bare.tgz"
    write_snapshot(bare, root, ask_nvidia_smi=True)
    missing = doctor(tmp_path, bare, "cuda", "host.commands")["host.commands"]
    assert missing["status"] == "fail" and "no nvidia-smi on the board's PATH" in missing["detail"]
    assert "--gpus all" in missing["fix"]


def test_a_snapshot_without_a_gpu_record_still_leaves_devices_to_the_machine(tmp_path: Path) -> None:
    old = board(tmp_path)  # a folder sysroot with no manifest: an older snapshot, or a copied tree
    found = doctor(tmp_path, old, "metax", "host.devices", "host.commands")
    assert found["host.devices"]["status"] == "skip" and "checked on the machine itself" in found["host.devices"][
        "detail"]
    assert found["host.commands"]["status"] == "skip"
