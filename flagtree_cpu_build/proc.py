"""The one subprocess runner: argv lists (never a shell string), an explicit environment,
a log file that keeps everything, and a line-by-line view for the live display.

``run_logged`` is for long commands (the build, pip installs): every output line goes to
the log as it arrives and to ``on_line``; when the command is quiet, ``on_idle`` is called
so the display can show a heartbeat. On Ctrl-C the child's whole process group is
stopped (SIGTERM, then SIGKILL) before the interrupt propagates — no orphaned compilers;
the same happens when ``timeout_s`` passes (a hung validation kernel), and the result says so.
``capture`` is for short queries (a version, a JSON answer); ``run_attached`` for the rare
command the user must see and may have to answer (``sudo apt-get install``); ``start_piped``
for a caller that reads a command's output as it comes (``gitcmd``'s watched git).
No other module of the tool imports ``subprocess`` (tests/unit/test_layering.py holds it to that).

Whatever ends the tool — SIGKILL to its process group included — ends what it started: every command
carries the run's mark in its environment, and a watcher started once per tool process (``reaper``)
stops every marked process when the tool's process is gone (see ``reaper`` for why not PDEATHSIG).
"""

from __future__ import annotations

import os
import queue
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .interrupts import start_thread
from .logfiles import new_log_path

Process = subprocess.Popen  # a started command, for the type hints of callers of ``start_piped``
Completed = subprocess.CompletedProcess  # what ``capture`` returns, for its callers' type hints
TimedOut = subprocess.TimeoutExpired  # what ``capture`` raises when ``timeout_s`` passes


@dataclass(frozen=True)
class ProcResult:
    returncode: int
    log: Path
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def signal_name(self) -> str | None:
        """'SIGSEGV' when the command was killed by a signal."""
        if self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def run_logged(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: Path,
    header: Sequence[str] = (),
    on_line: Callable[[str], None] | None = None,
    on_idle: Callable[[float], None] | None = None,
    idle_every_s: float = 15.0,
    timeout_s: float | None = None,
) -> ProcResult:
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log, "w", encoding="utf-8", errors="replace") as out:
        out.write(f"+ {shlex.join(argv)}\n# cwd: {cwd}\n# started: {datetime.now().isoformat(timespec='seconds')}\n")
        for line in header:
            out.write(f"# {line}\n")
        out.write("\n")
        out.flush()
        process = subprocess.Popen(list(argv), cwd=cwd, env=marked_env(env), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        lines: queue.Queue[bytes | None] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(process, lines), daemon=True)
        start_thread(reader)
        last_output = time.monotonic()
        last_idle_call = last_output
        deadline = start + timeout_s if timeout_s is not None else None
        timed_out = False
        try:
            while True:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    timed_out = True
                    _stop(process)
                    out.write(f"\n# timed out: stopped after {timeout_s:g} s\n")
                    break
                try:
                    raw = lines.get(timeout=1.0 if deadline is None else min(1.0, max(0.05, deadline - now)))
                except queue.Empty:
                    now = time.monotonic()
                    if on_idle and now - last_output >= idle_every_s and now - last_idle_call >= idle_every_s:
                        last_idle_call = now
                        on_idle(now - last_output)
                    continue
                if raw is None:
                    break
                text = raw.decode("utf-8", "replace")
                out.write(text)
                last_output = time.monotonic()
                if on_line:
                    on_line(text.rstrip("\r\n"))
            returncode = process.wait()
        except BaseException:
            _stop(process)
            out.write("\n# interrupted: the command was stopped\n")
            raise
        seconds = time.monotonic() - start
        out.write(f"\n# exit status {returncode} after {seconds:.1f} s\n")
    return ProcResult(returncode, log, seconds, timed_out)


def _pump(process: subprocess.Popen, lines: queue.Queue) -> None:
    assert process.stdout is not None
    for raw in iter(process.stdout.readline, b""):
        lines.put(raw)
    lines.put(None)


def _stop(process: subprocess.Popen) -> None:
    """Stop the command and everything it started (compilers, ninja)."""
    if process.poll() is None:
        stop_process_group(process, grace_s=10.0)


def stop_process_group(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """Stop a command started in its own session and everything it started (git's helpers, ninja's
    compilers): SIGTERM first (git then removes ``index.lock`` and its temporary packs), SIGKILL for
    whatever is still there after ``grace_s``. A second Ctrl-C only shortens the wait."""
    pgid = process.pid  # the group id stays reserved while any member lives
    deadline = time.monotonic() + grace_s
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        process.wait()
        return
    try:
        process.wait(timeout=grace_s)
        # the leader has gone; give what it started (index-pack, a compiler) the rest of the grace period
        while time.monotonic() < deadline and _group_stats(pgid):
            time.sleep(0.05)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def group_cpu_seconds(pgid: int) -> float | None:
    """CPU time used so far by the processes of a process group (and their reaped children)."""
    stats = _group_stats(pgid)
    if stats is None:
        return None
    # after the pid's "(comm)": state ppid pgrp ... utime(11) stime cutime cstime
    return sum(int(f) for fields in stats for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _group_stats(pgid: int) -> list[list[bytes]] | None:
    """The /proc stat fields of every live process in a process group; None without /proc."""
    if not os.path.isdir("/proc/self"):
        return None
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[2]) == pgid and fields[0] != b"Z":
            found.append(fields)
    return found


def capture(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
            timeout_s: float = 60.0, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run a short query; never raises for a non-zero exit (the caller decides what it means). Its output is
    text; ``input`` (bytes: what ``ssh-keygen -Y verify`` checks) is its stdin, else stdin is closed."""
    if input is None:
        return subprocess.run(list(argv), env=marked_env(env), cwd=cwd, capture_output=True,
                              text=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    done = subprocess.run(list(argv), env=marked_env(env), cwd=cwd, capture_output=True,
                          timeout=timeout_s, check=False, input=input)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8", "replace"),
                                       done.stderr.decode("utf-8", "replace"))


def start_piped(argv: Sequence[str], *, cwd: Path | None, env: Mapping[str, str]) -> Process:
    """Start a command in a session of its own (so ``stop_process_group`` stops it and everything it
    starts), stdin closed, stdout and stderr as pipes of bytes for the caller to read; the caller waits
    for it. A missing program or ``cwd`` raises FileNotFoundError (its ``filename`` says which)."""
    return subprocess.Popen(list(argv), cwd=cwd, env=marked_env(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


@dataclass(frozen=True)
class Capped:
    """What ``capture_capped`` read: the output (at most ``limit`` bytes), the end of stderr, how it ended."""

    returncode: int | None  # None: stopped (timed out, or too much output)
    stdout: bytes
    stderr_tail: str
    timed_out: bool = False
    over_limit: bool = False


def capture_capped(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None, timeout_s: float,
                   limit: int) -> Capped:
    """Run a command whose output is a value (a recipe's ``env.from_command``): stdout read while it comes, and
    the command stopped (its whole group) at ``limit`` bytes or after ``timeout_s``; stderr keeps its last 4 KiB.
    Whatever it started is stopped when it ends, so nothing it left behind outlives the question. A missing
    program raises FileNotFoundError."""
    import selectors

    process = start_piped(argv, cwd=cwd, env=env)
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + timeout_s
    timed_out = over = False
    try:
        with selectors.DefaultSelector() as selector:
            for pipe, sink in ((process.stdout, out), (process.stderr, err)):
                selector.register(pipe, selectors.EVENT_READ, sink)  # type: ignore[arg-type]
            while selector.get_map() and not over:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    key.data.extend(chunk)
                    del err[:-4096]
                    over = len(out) > limit
        if not (timed_out or over):
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        code = process.poll()
        stop_process_group(process)  # also what it started and left running
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    stopped = timed_out or over
    return Capped(None if stopped else code, bytes(out[:limit]), err.decode("utf-8", "replace"), timed_out, over)


def run_attached(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
    """Run a command on the user's terminal (stdin too: sudo may ask for a password); its exit status."""
    return subprocess.run(list(argv), env=marked_env(env), check=False).returncode


# --- no command outlives the tool -------------------------------------------------------------------------

REAPER_GRACE_S = 5.0  # as for Ctrl-C: SIGTERM first (git removes index.lock), SIGKILL for what lingers


class _Reaper:
    """The run's mark, and the watcher (``reaper``) that stops every marked process once this process is gone.
    Started at the first command; started again if it died, or in a forked copy of the tool."""

    def __init__(self) -> None:
        self.token = f"{os.getpid()}-{secrets.token_hex(8)}"
        self._lock = threading.Lock()
        self._owner_pid: int | None = None
        self._watcher: int | None = None  # its pid
        self._tool_end: int | None = None  # the pipe's write end: open exactly as long as this process

    def mark(self) -> dict[str, str]:
        with self._lock:
            if self._owner_pid != os.getpid() or not self._watching():
                self._start()
        return {MARK: self.token}

    def _watching(self) -> bool:
        if self._watcher is None:
            return False
        try:
            return os.waitpid(self._watcher, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return False

    def _start(self) -> None:
        script = Path(__file__).with_name("reaper.py")
        if not sys.executable or not script.is_file() or not hasattr(os, "posix_spawn"):
            return  # nothing to run it with (an embedded Python): the tool still stops its commands itself
        if self._tool_end is not None:  # a dead watcher's pipe, or the one a forked copy inherited
            os.close(self._tool_end)
        read_end, self._tool_end = os.pipe()  # the commands inherit neither end (O_CLOEXEC)
        try:
            os.set_inheritable(read_end, True)  # the watcher's only inherited descriptor besides /dev/null
            devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
            # posix_spawn, not Popen: the watcher is meant to outlive this process, which Popen warns about;
            # setsid: a signal to the tool's process group must miss it
            self._watcher = os.posix_spawn(
                sys.executable, [sys.executable, "-I", "-S", str(script), str(read_end), self.token,
                                 str(REAPER_GRACE_S)], os.environ, file_actions=devnull, setsid=True)
        except (OSError, TypeError, NotImplementedError):
            self._watcher = None  # no setsid on this platform, or no interpreter: the tool stops what it can itself
        finally:
            os.close(read_end)
        self._owner_pid = os.getpid()


MARK = "FLAGTREE_CPU_RUN"  # reaper.MARK; not imported, so that reaper.py stays a standalone program
_REAPER = _Reaper()


def marked_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """``env`` (the tool's own environment when None) with the run's mark, the watcher running."""
    return {**(os.environ if env is None else env), **_REAPER.mark()}


def log_path(logs_dir: Path, kind: str) -> Path:
    """``logs/<kind>-<timestamp>.log``; one log per run, never overwritten; the newest few of a kind are kept
    (``logfiles.KEEP_PER_KIND``)."""
    return new_log_path(logs_dir, kind)


@dataclass(frozen=True)
class BoundedOutput:
    """What ``capture_bounded`` kept of a query's run."""

    returncode: int | None  # None when it was stopped (timeout or too much output)
    stdout: str
    stderr: str
    timed_out: bool = False
    overflowed: bool = False  # it wrote more than the limit; stopped there


def capture_bounded(argv: Sequence[str], *, limit: int, timeout_s: float, env: Mapping[str, str] | None = None,
                    cwd: Path | None = None) -> BoundedOutput:
    """A short query of a program nothing vouches for (a vendor's nvidia-smi, a toolkit's --version, an
    interpreter on PATH): at most ``limit`` bytes of each stream are kept and the command, with everything it
    started, is stopped when it writes more or runs past ``timeout_s``: a hostile one cannot fill memory or
    hang the tool. A missing program raises FileNotFoundError, as ``start_piped`` does."""
    process = start_piped(argv, cwd=cwd, env=os.environ if env is None else env)
    kept: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}
    overflow = threading.Event()

    def drain(stream: object, key: str) -> None:
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            room = limit - len(kept[key])
            kept[key] += chunk[:max(room, 0)]
            if len(chunk) > room:
                overflow.set()
                return

    readers = [threading.Thread(target=drain, args=(s, k), daemon=True)
               for s, k in ((process.stdout, "out"), (process.stderr, "err"))]
    for reader in readers:
        start_thread(reader)
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and not overflow.is_set() and time.monotonic() < deadline:
        try:
            process.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
    stopped = process.poll() is None
    # a finished leader may leave children holding the pipes: the whole group goes either way
    stop_process_group(process, grace_s=1.0) if stopped else _kill_group(process.pid)
    for reader in readers:
        reader.join(timeout=5.0)
    for stream in (process.stdout, process.stderr):
        stream.close()  # type: ignore[union-attr]
    return BoundedOutput(None if stopped else process.returncode, kept["out"].decode("utf-8", "replace"),
                         kept["err"].decode("utf-8", "replace"), timed_out=stopped and not overflow.is_set(),
                         overflowed=overflow.is_set())


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
