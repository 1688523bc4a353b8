"""The emulated aarch64 machine as the tier's tests see it: run a command inside the rootfs under a
chosen QEMU CPU model, and map paths between the host and the chroot.

`tests/arm64/emu.sh tier` builds the rootfs, registers QEMU 10 with binfmt_misc and mounts /proc,
/sys and /dev before pytest starts, and undoes it after; the tests only chroot into it. Each command
gets a clean environment (the host's PIP_*, proxies and HOME must not leak into the board), so what
runs inside is what a user on an aarch64 board would run.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# The CPU models of the matrix (QEMU 10 names; EMULATION.md measured each):
#   neoverse-n1      Armv8.2: NEON only, no SVE at all           -> FlagTree cannot run
#   neoverse-v1      SVE at 256 bits, i8mm and bf16, no SVE2      -> cannot run (no SVE2)
#   neoverse-n2      Armv9: SVE2, i8mm, bf16 at 128 bits          -> the target class
#   max,sve128=on    every feature, SVE fixed at 128 bits         -> runs
#   max              every feature, SVE at 512 bits               -> runs, but 128-bit SVE code is WRONG
MODELS = ("neoverse-n1", "neoverse-v1", "neoverse-n2", "max,sve128=on", "max")
ARMV9_128 = ("neoverse-n2", "max,sve128=on")  # the models FlagTree's build can run on

# A network namespace of its own with nothing configured (not even loopback up): an air-gapped board. The
# chroot otherwise shares the host's, which is how the other tests reach the loopback worlds.
NO_NETWORK = ("unshare", "--net")

PYTHON = "3.11"  # bookworm's python3, the board's interpreter (what `python3 --version` says there)
VENV = Path("/opt/venv")  # the rootfs venv: the project with its [test] extra (PyPI's aarch64 torch, triton)
PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Ran:
    argv: list[str]
    cpu: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict:
        return json.loads(self.stdout)

    def __str__(self) -> str:  # for assertion messages
        return (f"[QEMU_CPU={self.cpu}] {shlex.join(self.argv)} -> exit {self.returncode} in {self.seconds:.1f} s\n"
                f"--- stdout\n{self.stdout[-4000:]}\n--- stderr\n{self.stderr[-4000:]}")


class Machine:
    def __init__(self, root: Path):
        self.root = root

    def host_path(self, inside: str | Path) -> Path:
        """Where a path of the emulated machine is on the host."""
        return self.root / Path(inside).relative_to("/")

    def inside(self, host: Path) -> Path:
        """The emulated machine's name for a host path under the rootfs."""
        return Path("/") / host.resolve().relative_to(self.root.resolve())

    def run(self, argv: list[str], *, cpu: str, home: Path | None = None, cwd: Path | None = None,
            env: dict[str, str] | None = None, timeout: float = 600, wrap: tuple[str, ...] = ()) -> Ran:
        """``argv`` inside the chroot, emulated as CPU model ``cpu``; ``home`` and ``cwd`` are inside paths.
        ``wrap`` is a host command the chroot runs under, e.g. ``NO_NETWORK`` (a board without any network)."""
        base = {"HOME": str(home or "/root"), "LANG": "C.UTF-8", "TERM": "dumb", "PATH": PATH,
                "QEMU_CPU": cpu, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "NO_COLOR": "1", "COLUMNS": "160"}
        base.update(env or {})
        chdir = ["--chdir", str(cwd)] if cwd is not None else []  # env's options come before its assignments
        assignments = [f"{k}={v}" for k, v in base.items()]
        command = [*wrap, "chroot", str(self.root), "/usr/bin/env", "-i", *chdir, *assignments]
        start = time.monotonic()
        done = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=timeout,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        return Ran(argv, cpu, done.returncode, done.stdout, done.stderr, time.monotonic() - start)

    def tool(self, *args: str, cpu: str, home: Path | None = None, cwd: Path | None = None,
             env: dict[str, str] | None = None, timeout: float = 600, wrap: tuple[str, ...] = ()) -> Ran:
        """The installed `flagtree-cpu` console script, as a user on the board types it."""
        return self.run(["flagtree-cpu", *args], cpu=cpu, home=home, cwd=cwd, env=env, timeout=timeout, wrap=wrap)


def model_id(cpu: str) -> str:
    """A test id for a model: ``max,sve128=on`` -> ``max-sve128``."""
    return cpu.replace(",sve128=on", "-sve128")


# read at import: every test's hermetic environment clears FLAGTREE_* variables before it runs
ROOT = os.environ.get("FLAGTREE_CPU_EMU_ROOT")
REPORT = os.environ.get("FLAGTREE_CPU_TIER_REPORT")
KEEP = bool(os.environ.get("FLAGTREE_CPU_KEEP_TIER"))


def report_line(kind: str, text: str) -> None:
    """A line of the tier's report (per-model verdicts, timings) that `emu.sh tier` prints at the end."""
    if REPORT:
        with open(REPORT, "a", encoding="utf-8") as out:
            out.write(f"{kind} | {text}\n")
