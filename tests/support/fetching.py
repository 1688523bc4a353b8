"""Where `flagtree-cpu fetch` puts things in the hermetic home, and ways to run it (in-process and as a
real process), shared by the fetch test files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from typer.testing import CliRunner, Result

from flagtree_cpu_build.cli import app
from tests.support.httpserver import Faults
from tests.support.tarballs import TOP

URL_PATH = f"/public/llvm-builds/{TOP}.tar.gz"
# The default recipe's LLVM path reads the hash from FlagTree's cmake/llvm-hash.txt after sync; these tests fetch
# without a checkout, so they give the path the synced file would (a66376b0), as they give the URL.
PATH_SET = f"artifacts.llvm.path={{triton_home}}/.triton/llvm/{TOP}"


def triton_llvm() -> Path:
    return Path(os.environ["HOME"]) / ".triton" / "llvm"


def dest() -> Path:
    return triton_llvm() / TOP


def cache_root() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "flagtree-cpu" / "downloads"


def fetch(tmp_path: Path, url: str, *args: str, sets: tuple[str, ...] = ()) -> Result:
    argv = ["-w", str(tmp_path / "ws"), "--set", f"artifacts.llvm.url={url}", "--set", PATH_SET]
    for assignment in sets:
        argv += ["--set", assignment]
    return CliRunner().invoke(app, [*argv, "fetch", *args])


def fetch_process(tmp_path: Path, url: str, *args: str, workspace: str = "ws",
                  env: dict[str, str] | None = None, sets: tuple[str, ...] = ()) -> subprocess.Popen:
    overrides = [word for assignment in sets for word in ("--set", assignment)]
    return subprocess.Popen([sys.executable, "-m", "flagtree_cpu_build", "-w", str(tmp_path / workspace), "--set",
                             f"artifacts.llvm.url={url}", "--set", PATH_SET, *overrides, "fetch", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})})


def stacks_of_hung(process: subprocess.Popen, waited: float) -> AssertionError:
    """A process that did not end: SIGABRT makes its faulthandler (PYTHONFAULTHANDLER, set by fetch_process) print
    every thread's stack before it dies, so the failure says where it hung, not only that it did."""
    masks = _signal_masks(process.pid)
    process.send_signal(signal.SIGABRT)
    try:
        _out, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _out, err = process.communicate()
    return AssertionError(f"the process did not end within {waited:g} s of the signal; its threads' signal masks "
                          f"then:\n{masks}\nand their stacks:\n{err}")


def _signal_masks(pid: int) -> str:
    """Each thread's pending, blocked and caught signals (/proc/PID/task/TID/status), as the kernel sees them."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        try:
            status = (task / "status").read_text()
        except OSError:
            continue
        wanted = [line for line in status.splitlines() if line.startswith(("Name:", "SigPnd", "ShdPnd", "SigBlk",
                                                                            "SigCgt", "SigIgn"))]
        lines.append(f"task {task.name}: " + "  ".join(" ".join(w.split()) for w in wanted))
    return "\n".join(lines)


def lock_of(tmp_path: Path) -> dict:
    return yaml.safe_load((tmp_path / "ws/.flagtree-cpu/lock.yaml").read_text())


def partial_folders(where: Path | None = None) -> list[Path]:
    """Half-made folders (unpacking, replaced trees) beside the published trees."""
    where = where or triton_llvm()
    return sorted(where.glob(".*flagtree-cpu-*")) if where.exists() else []


def leftovers() -> list[Path]:
    """Partial downloads, half-made imports and unpackings left behind."""
    root = cache_root()
    return [*root.glob("partial/*.part"), *root.glob("partial/.*"), *partial_folders()]


def cache_is_empty() -> bool:
    """No blob, no URL note, no partial download: as if nothing had been downloaded."""
    root = cache_root()
    return not [p for sub in ("blobs", "urls", "partial") for p in (root / sub).glob("*")] if root.exists() else True


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = condition()
        except FileNotFoundError:  # a folder removed while we looked
            found = None
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def release_when(faults: Faults, condition: Callable[[], object], timeout: float = 60) -> threading.Event:
    """Open ``faults``' gate once ``condition()`` holds (for an in-process run, which cannot be waited on from the
    test's own thread); the event returned is set when the condition was met, not merely timed out."""
    met = threading.Event()

    def watch() -> None:
        try:
            wait_for(condition, timeout, "the condition")
            met.set()
        except AssertionError:
            pass
        finally:
            faults.release()

    threading.Thread(target=watch, daemon=True).start()
    return met


def unpacked_files() -> list[Path]:
    """Files already unpacked into a partial folder (not the folder's owner record)."""
    return [f for folder in partial_folders() for f in folder.rglob("*")
            if f.is_file() and f.parent != folder]
