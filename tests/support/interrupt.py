"""Interrupting the tool at an exact point of a git checkout (or slowing one down), and finding
what it left running.

A fixture checkout is far too fast to race a signal against. Instead, git is configured (through
the test's ``GIT_CONFIG_GLOBAL``) with a smudge filter on every file — ``filter.interrupt.smudge``
plus ``core.attributesFile`` with ``* filter=interrupt`` — that copies content unchanged, except
in the repository folder it is armed for: there, at file N+1, it sends a signal to the
flagtree-cpu process (found among its ancestors) and then waits, so the checkout stops with
exactly N files written, until the tool stops git. It fires once; its pid is recorded so a test
can check that the tool did not leave it (or git) running.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_FILTER = r'''
import os, signal, sys, time
repo_name, after, counter, signame, fired = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
data = sys.stdin.buffer.read()
if os.path.basename(os.getcwd()) == repo_name and not os.path.exists(fired):
    with open(counter, "a") as f:
        f.write(os.getcwd() + "\n")
    with open(counter) as f:
        count = len(f.readlines())
    if count > after:
        pid = os.getppid()
        while pid > 1:  # the flagtree-cpu process: git's parent, or further up (submodule update)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"flagtree_cpu_build" in f.read():
                    break
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(fired, "w") as f:
            f.write(f"{os.getpid()} {os.getpgid(0)}\n")
        os.kill(pid, getattr(signal, signame))
        time.sleep(20)  # the checkout stays half done until the tool stops git
sys.stdout.buffer.write(data)
'''


@dataclass
class InterruptingFilter:
    folder: Path

    @property
    def fired(self) -> bool:
        return (self.folder / "fired").exists()

    @property
    def filter_pid_and_group(self) -> tuple[int, int]:
        pid, pgid = (self.folder / "fired").read_text().split()
        return int(pid), int(pgid)

    def files_passed(self) -> int:
        counter = self.folder / "counter"
        return len(counter.read_text().splitlines()) - 1 if counter.exists() else 0


def arm_interrupting_filter(gitconfig: Path, folder: Path, repo_name: str, after_files: int,
                            signal_name: str) -> InterruptingFilter:
    """Make the next checkout in a folder named ``repo_name`` send ``signal_name`` to flagtree-cpu
    after ``after_files`` files, through the git configuration file ``gitconfig``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "interrupting_filter.py"
    script.write_text(_FILTER)
    attributes = folder / "attributes"
    attributes.write_text("* filter=interrupt\n")
    command = " ".join(map(str, [sys.executable, script, repo_name, after_files, folder / "counter",
                                 signal_name, folder / "fired"]))
    with open(gitconfig, "a") as config:
        config.write(f'[filter "interrupt"]\n\tsmudge = {command}\n[core]\n\tattributesFile = {attributes}\n')
    return InterruptingFilter(folder)


_BUSY_FILTER = r'''
import os, sys, time
repo_name, seconds = sys.argv[1], float(sys.argv[2])
data = sys.stdin.buffer.read()
if os.path.basename(os.getcwd()) == repo_name:
    end = time.monotonic() + seconds
    while time.monotonic() < end:  # working, silently: no output, all CPU
        pass
sys.stdout.buffer.write(data)
'''


def arm_busy_filter(gitconfig: Path, folder: Path, repo_name: str, seconds_per_file: float) -> None:
    """Make every checkout in a folder named ``repo_name`` compute silently for a while per file
    (a large checkout: git prints nothing, yet works)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "busy_filter.py"
    script.write_text(_BUSY_FILTER)
    attributes = folder / "attributes"
    attributes.write_text("* filter=busy\n")
    with open(gitconfig, "a") as config:
        config.write(f'[filter "busy"]\n\tsmudge = {sys.executable} {script} {repo_name} {seconds_per_file}\n'
                     f'[core]\n\tattributesFile = {attributes}\n')


# --- processes ---------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields


def alive(pid: int) -> bool:
    return _stat(pid) is not None


def processes_in_group(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()
            and (fields := _stat(int(name))) is not None and int(fields[2]) == pgid]


def descendants(pid: int) -> list[tuple[int, int, str]]:
    """(pid, process group, command name) of every live descendant of ``pid``."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat(int(name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            fields = _stat(child)
            try:
                comm = Path(f"/proc/{child}/comm").read_text().strip()
            except OSError:
                continue  # gone meanwhile
            if fields is not None:
                found.append((child, int(fields[2]), comm))
                todo.append(child)
    return found


def wait_until(condition, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def send(pid: int, name: str) -> None:
    os.kill(pid, getattr(signal, name))
