"""What a machine has of accelerators, recorded in a board snapshot so doctor can judge a recipe's device rules
from the copy: the accelerator device nodes, the NVIDIA driver's version file and ``nvidia-smi``'s answer.

A snapshot never holds /dev itself (device nodes are refused as members), so the names of the nodes present go
into the manifest; ``/proc/driver/nvidia/version`` is an ordinary snapshot file. A manifest comes from another
machine: ``recorded_gpu`` takes only what has the right type and shape, and says nothing of a damaged one.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the accelerator nodes the recipes name: NVIDIA, AMD (ROCm's kfd and render nodes), Ascend, MetaX
DEVICE_PATTERNS = ("nvidia*", "kfd", "dri/renderD*", "davinci*", "mxcd*")
NVIDIA_VERSION_FILE = "proc/driver/nvidia/version"
NVIDIA_SMI = ("nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv")
_FIELDS = ("name", "driver_version", "compute_cap")
_MAX_DEVICES = 256
_MAX_GPUS = 64
_SMI_BYTES = 64 * 1024
_SMI_TIMEOUT_S = 30.0  # a wedged driver makes nvidia-smi hang; a snapshot must still be written


def record_gpu(root: Path, *, live: bool) -> dict[str, Any]:
    """The manifest's ``gpu`` entry for the machine under ``root``: device node names, and on this machine itself
    (``live``) what nvidia-smi answers (``{"present": false}`` when there is none; null for another root)."""
    return {"devices": device_nodes(root), "nvidia_smi": _ask_nvidia_smi() if live else None}


def device_nodes(root: Path) -> list[str]:
    """The accelerator nodes under ``root``/dev, as absolute /dev paths."""
    dev = root / "dev"
    found: list[str] = []
    for pattern in DEVICE_PATTERNS:
        folder, _, name = pattern.rpartition("/")
        try:
            entries = sorted(os.listdir(dev / folder))
        except OSError:
            continue
        found += [f"/dev/{folder + '/' if folder else ''}{e}" for e in entries if fnmatch.fnmatchcase(e, name)]
    return found[:_MAX_DEVICES]


def is_device_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def live_device_matches(path: str) -> list[str]:
    """The nodes on this machine a recipe's device path names: a glob (`/dev/dri/renderD*`, whose number differs
    per host) is met by any one match; a plain path by itself."""
    import glob

    if is_device_glob(path):
        return sorted(glob.glob(path))[:_MAX_DEVICES]
    return [path] if os.path.exists(path) else []


def recorded_device_matches(path: str, devices: frozenset[str]) -> list[str]:
    """The same, judged from the nodes a snapshot recorded."""
    if is_device_glob(path):
        return sorted(d for d in devices if fnmatch.fnmatchcase(d, path))
    return [path] if path in devices else []


def _ask_nvidia_smi() -> dict[str, Any]:
    from .proc import capture_bounded

    program = shutil.which(NVIDIA_SMI[0])
    if program is None:
        return {"present": False}
    try:
        done = capture_bounded([program, *NVIDIA_SMI[1:]], limit=_SMI_BYTES, timeout_s=_SMI_TIMEOUT_S)
    except OSError as exc:
        return {"present": True, "error": f"does not run: {exc.strerror or exc}"}
    if done.timed_out or done.overflowed or done.returncode != 0:
        why = "no answer in time" if done.timed_out else "too much output" if done.overflowed \
            else f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[-300:]}"
        return {"present": True, "error": why}
    gpus = []
    for line in done.stdout.splitlines()[1:_MAX_GPUS + 1]:  # the first line is the CSV header
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(_FIELDS):
            gpus.append(dict(zip(_FIELDS, cells, strict=True)))
    return {"present": True, "gpus": gpus}


@dataclass(frozen=True)
class GpuRecord:
    """What a snapshot says of the board's accelerators."""

    devices: frozenset[str]
    nvidia_smi: dict[str, Any] | None  # None: not asked (the snapshot was made of another root, or before)
    driver: str | None  # the first line of /proc/driver/nvidia/version

    @staticmethod
    def covers(path: str) -> bool:
        """True when a snapshot records whether ``path`` exists (it is one of the accelerator nodes)."""
        rel = path.removeprefix("/dev/")
        return path.startswith("/dev/") and any(fnmatch.fnmatchcase(rel, p) for p in DEVICE_PATTERNS)

    def describe(self) -> str:
        """One line: the GPUs nvidia-smi named, or the driver, for a finding's detail."""
        gpus = (self.nvidia_smi or {}).get("gpus") or []
        named = ", ".join(f"{g['name']} (driver {g['driver_version']}, compute {g['compute_cap']})" for g in gpus)
        return named or (f"NVIDIA driver: {self.driver}" if self.driver else "")


def recorded_gpu(root: Path, manifest: dict[str, Any] | None) -> GpuRecord | None:
    """The snapshot's GPU record, or None when its manifest has none (an older snapshot, or a damaged one)."""
    gpu = (manifest or {}).get("gpu")
    if not isinstance(gpu, dict) or not isinstance(gpu.get("devices"), list):
        return None
    devices = frozenset(d for d in gpu["devices"][:_MAX_DEVICES] if isinstance(d, str) and GpuRecord.covers(d))
    smi = gpu.get("nvidia_smi")
    smi = _checked_smi(smi) if isinstance(smi, dict) else None
    driver = None
    try:
        with open(root / NVIDIA_VERSION_FILE, encoding="utf-8", errors="replace") as file:
            driver = (file.readline(512).strip() or None)
    except OSError:
        pass
    return GpuRecord(devices, smi, driver)


def _checked_smi(smi: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(smi.get("present"), bool):
        return None
    gpus = smi.get("gpus") if isinstance(smi.get("gpus"), list) else []
    kept = [{k: str(g[k])[:200] for k in _FIELDS} for g in gpus[:_MAX_GPUS]
            if isinstance(g, dict) and all(isinstance(g.get(k), str) for k in _FIELDS)]
    error = smi.get("error") if isinstance(smi.get("error"), str) else None
    return {"present": smi["present"], "gpus": kept, **({"error": error[:300]} if error else {})}


def manifest_of(root: Path) -> dict[str, Any] | None:
    """The snapshot manifest under ``root`` (None when absent or not a JSON object)."""
    from .host import SNAPSHOT_MANIFEST
    from .regular_file import read_capped

    try:
        data = json.loads(read_capped(root / SNAPSHOT_MANIFEST, 1 << 20))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
