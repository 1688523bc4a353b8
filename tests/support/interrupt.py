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
target, hold_s = sys.argv[6], float(sys.argv[7])
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
        if target == "group":  # the tool's whole process group, as `kill -9 -- -PGID` or a CI runner does
            os.killpg(os.getpgid(pid), getattr(signal, signame))
        elif target == "git":  # the git checking out (above the shell running this filter), as the OOM killer does
            git = os.getppid()
            with open(f"/proc/{git}/comm") as f:
                if not f.read().startswith("git"):
                    with open(f"/proc/{git}/stat") as stat:
                        git = int(stat.read().rsplit(")", 1)[1].split()[1])
            os.kill(git, getattr(signal, signame))
        else:
            os.kill(pid, getattr(signal, signame))
        time.sleep(hold_s)  # the checkout stays half done until the tool stops git
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

    @property
    def cut_path(self) -> str:
        """The file a cutting filter let git write only part of (its path in the repository)."""
        return (self.folder / "fired").read_text().split(maxsplit=2)[2].strip()

    def files_passed(self) -> int:
        counter = self.folder / "counter"
        return len(counter.read_text().splitlines()) - 1 if counter.exists() else 0


def arm_interrupting_filter(gitconfig: Path, folder: Path, repo_name: str, after_files: int,
                            signal_name: str, *, target: str = "tool", hold_s: float = 20) -> InterruptingFilter:
    """Make the next checkout in a folder named ``repo_name`` send ``signal_name`` to flagtree-cpu after
    ``after_files`` files (``target`` "group": to its whole process group; "git": to the git checking out
    instead), through the git configuration file ``gitconfig``; the filter then holds the checkout for
    ``hold_s`` seconds unless it is stopped."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "interrupting_filter.py"
    script.write_text(_FILTER)
    attributes = folder / "attributes"
    attributes.write_text("* filter=interrupt\n")
    command = " ".join(map(str, [sys.executable, script, repo_name, after_files, folder / "counter",
                                 signal_name, folder / "fired", target, hold_s]))
    with open(gitconfig, "a") as config:
        config.write(f'[filter "interrupt"]\n\tsmudge = {command}\n[core]\n\tattributesFile = {attributes}\n')
    return InterruptingFilter(folder)


_CUTTING_FILTER = r"""
import os, resource, signal, sys, time
repo_name, after, counter, signame, fired, cut, path = (sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4],
                                                        sys.argv[5], int(sys.argv[6]), sys.argv[7])
data = sys.stdin.buffer.read()
if os.path.basename(os.getcwd()) == repo_name and not os.path.exists(fired):
    with open(counter, "a") as f:
        f.write(path + "\n")
    with open(counter) as f:
        count = len(f.readlines())
    if count > after:
        tool = os.getppid()
        while tool > 1:
            with open(f"/proc/{tool}/cmdline", "rb") as f:
                if b"flagtree_cpu_build" in f.read():
                    break
            with open(f"/proc/{tool}/stat") as f:
                tool = int(f.read().rsplit(")", 1)[1].split()[1])
        git = os.getppid()  # the git writing this file (above the shell running this filter): `cut` bytes, no more
        with open(f"/proc/{git}/comm") as f:
            if not f.read().startswith("git"):
                with open(f"/proc/{git}/stat") as stat:
                    git = int(stat.read().rsplit(")", 1)[1].split()[1])
        resource.prlimit(git, resource.RLIMIT_CORE, (0, 0))
        resource.prlimit(git, resource.RLIMIT_FSIZE, (cut, cut))
        with open(fired, "w") as f:
            f.write(f"{os.getpid()} {os.getpgid(0)} {path}\n")
        if os.fork() == 0:  # once git has created the file and written its `cut` bytes, the Ctrl-C reaches the tool
            os.close(0)
            os.close(1)  # git reads this filter's output until every copy of the pipe is closed
            target = os.path.join(os.getcwd(), path)
            def written():  # not only created: a tool quick to stop git could otherwise beat git's own first write
                try:
                    return os.lstat(target).st_size >= cut
                except OSError:
                    return False
            end = time.monotonic() + 20
            while not written() and time.monotonic() < end:
                time.sleep(0.001)
            os.kill(tool, getattr(signal, signame))
            os._exit(0)
sys.stdout.buffer.write(data)
"""


def arm_cutting_filter(gitconfig: Path, folder: Path, repo_name: str, after_files: int, cut_bytes: int,
                       signal_name: str) -> InterruptingFilter:
    """Make the next checkout in a folder named ``repo_name`` stop *inside* file N+1 (N = ``after_files``): git
    creates it and writes ``cut_bytes`` of it, then dies (its file-size limit, set from the filter), and
    ``signal_name`` reaches flagtree-cpu once those bytes are there (as the file appears, a tool quick to stop git
    once beat git's first write: an empty file where the test expects the prefix) — what a Ctrl-C landing
    between git's open() and its last write() leaves. A fixture file is written in microseconds, too fast for a real
    signal to land inside deterministically.
    """
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "cutting_filter.py"
    script.write_text(_CUTTING_FILTER)
    attributes = folder / "attributes"
    attributes.write_text("* filter=cut\n")
    command = " ".join(map(str, [sys.executable, script, repo_name, after_files, folder / "counter", signal_name,
                                 folder / "fired", cut_bytes]))
    with open(gitconfig, "a") as config:
        config.write(f'[filter "cut"]\n\tsmudge = {command} %f\n[core]\n\tattributesFile = {attributes}\n')
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


def marked_processes(name: str, value: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment holds ``name=value``: a marker put in
    the tool's environment reaches everything it starts, unless a program scrubs its environment."""
    wanted = f"{name}={value}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or not alive(int(pid)):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if wanted not in environ.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                found.append((int(pid), cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def wait_until(condition, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def send(pid: int, name: str) -> None:
    os.kill(pid, getattr(signal, name))
