"""The watcher that stops every process the tool started once the tool is gone — however it went,
SIGKILL included.

Each command the tool runs (git, pip, the build, a validation kernel) is the leader of a session of
its own, so that the tool can stop it and everything it started with one signal to its process group
(``proc.stop_process_group``). The price: a signal to the *tool's* process group — `kill -9 -- -PGID`,
a CI runner, `timeout -s KILL` — no longer reaches them, and the tool, killed, cannot pass it on. Left
alone, a git keeps writing into a folder the next run wants to clean up.

Linux's PR_SET_PDEATHSIG does not close the gap: it covers only the direct child, not git's
index-pack or the build's pip → cmake → ninja → compilers, and it fires when the *thread* that started
the child exits, while the tool starts commands from its main thread and from the artifacts worker.
So ``proc`` starts this watcher once per tool process, as a program of its own (``python -I -S``, the
standard library only) in a session of its own, holding the read end of a pipe whose write end only
the tool holds. The kernel closes that end when the tool's process ends, whatever ends it, so the
read returning end-of-file is the news. The watcher then looks for every process whose environment
carries the run's mark (``FLAGTREE_CPU_RUN=<token>``, which ``proc`` puts into every command's
environment and which their own children inherit), sends each SIGTERM — git removes its lock files
and temporary packs — and after the grace period SIGKILL to whatever is still there, until none is
left. A program that scrubs its environment is not found this way (``sudo``'s children); those are
the commands ``proc.run_attached`` runs on the terminal, in the tool's own process group.

At a normal exit every command has been waited for already: the scan finds nothing, and the watcher
leaves at once.
"""

from __future__ import annotations

import os
import signal
import sys
import time

MARK = "FLAGTREE_CPU_RUN"


def marked(token: str) -> list[int]:
    """Live processes (not zombies) whose environment holds ``MARK=token``; never this one."""
    wanted = f"\0{MARK}={token}\0".encode()
    me = os.getpid()
    found = []
    if not os.path.isdir("/proc/self"):
        return found  # no /proc (not Linux): the tool's own Ctrl-C handling is all there is
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if wanted not in b"\0" + environ.read():
                    continue
            with open(f"/proc/{name}/stat", "rb") as stat:
                if stat.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read (then not ours to stop either)
        found.append(int(name))
    return found


def _send(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def stop_marked(token: str, grace_s: float) -> None:
    """SIGTERM to every marked process (and to any that appears meanwhile), SIGKILL after ``grace_s``."""
    deadline = time.monotonic() + grace_s
    told: set[int] = set()
    while pids := marked(token):
        if time.monotonic() >= deadline:
            break
        _send([p for p in pids if p not in told], signal.SIGTERM)
        told.update(pids)
        time.sleep(0.05)
    for _ in range(200):  # a dying process may still start one more: keep going until none is left
        pids = marked(token)
        if not pids:
            return
        _send(pids, signal.SIGKILL)
        time.sleep(0.02)


def wait_for_end_of_file(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 4096):
                return
        except InterruptedError:
            continue


def main(argv: list[str]) -> int:
    fd, token, grace_s = int(argv[1]), argv[2], float(argv[3])
    os.chdir("/")  # never keep a folder (or a mount) of the user's busy
    os.closerange(3, fd)  # nor a pipe the tool's caller waits on: the read end of ours is all it keeps
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)  # only the tool's end decides when to act
    wait_for_end_of_file(fd)
    stop_marked(token, grace_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
