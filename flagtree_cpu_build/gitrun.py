"""Running one git: never prompting, never outliving the tool, never waiting on a frozen server, failures
explained. Only the git modules (``gitcmd`` for queries, ``gitops`` for changes) call it.

Each git runs in its own process group, which the tool stops (SIGTERM, so git removes its
lock files and half-written packs; SIGKILL if it lingers) when the tool is interrupted —
Ctrl-C, or a SIGTERM sent to the tool alone, as CI runners and ``timeout`` do — so no git
keeps writing into a folder the tool is about to clean up.

Commands that talk to a remote (clone, fetch, ls-remote, submodule update) are watched: when
git prints nothing and its processes use no CPU for ``FLAGTREE_CPU_STALL_TIMEOUT`` seconds
the server has stalled, and the command is stopped with an error naming the URL. Over HTTP
git's own ``http.lowSpeedLimit``/``lowSpeedTime`` say the same thing first.

The process itself is started by ``proc`` (the only module that starts processes) with the
environment GitPython, which started it before, gave it: the user's, plus ``LC_ALL=C`` and
``LANGUAGE=C`` so that git's messages — which ``classify_failure`` reads — are English.
"""

from __future__ import annotations

import math
import os
import re
import selectors
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from .errors import SourceError
from .limits import STALL_TIMEOUT_ENV, stall_timeout_s
from .proc import Process, group_cpu_seconds, start_piped, stop_process_group
from .progress import ProgressTask

# English messages (classify_failure reads them). No optional locks: `git status` would otherwise
# refresh the index, and read-only callers (doctor, status, build's stamp) must not write.
GIT_ENV = {"LANGUAGE": "C", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}

_PROGRESS = re.compile(
    r"(Enumerating objects|Counting objects|Compressing objects|Receiving objects|Resolving deltas|"
    r"Updating files|Checking out files|Filtering content):\s+(\d+)%"
)
# Commands that may wait on a server; `submodule update` clones and fetches.
_REMOTE_VERBS = frozenset({"clone", "fetch", "ls-remote", "pull", "push", "submodule"})
_STOP_GRACE_S = 5.0  # git needs milliseconds to remove its lock files on SIGTERM


def _config_args(config: Sequence[tuple[str, str]]) -> list[str]:
    return [arg for key, value in config for arg in ("-c", f"{key}={value}")]


def _talks_to_a_remote(args: Sequence[str]) -> bool:
    verb = next((a for a in args if not a.startswith("-")), "")
    if verb == "submodule":
        return "update" in args
    return verb in _REMOTE_VERBS and "--get-url" not in args  # ls-remote --get-url only reads config


# --- running one git -------------------------------------------------------------------------------


def execute(args: Sequence[str], cwd: Path | None, config: Sequence[tuple[str, str]],
            progress: ProgressTask | None, url: str | None) -> tuple[int, str, str]:
    stall_s = stall_timeout_s() if _talks_to_a_remote(args) else None
    env = {**os.environ, **GIT_ENV}  # we add to the user's configuration, never replace it
    if stall_s is not None:  # curl's own stall detection for http(s) remotes, same limit
        env.update(GIT_HTTP_LOW_SPEED_LIMIT="1", GIT_HTTP_LOW_SPEED_TIME=str(max(1, math.ceil(stall_s))))
    argv = ["git", *_config_args(config), *args]
    try:
        # a process group of its own: git and everything it starts can be stopped together
        process = start_piped(argv, cwd=cwd, env=env)
    except FileNotFoundError as exc:
        if cwd is not None and str(exc.filename) == str(cwd):
            raise SourceError(f"cannot run git in {cwd}: the folder does not exist",
                              fix="run `flagtree-cpu sync`, which creates the checkouts") from exc
        raise SourceError("git is not installed or not on PATH",
                          fix="install git (sudo apt-get install -y git)") from exc
    try:
        finished = _collect(process, progress, stall_s)
    except BaseException:  # Ctrl-C, SIGTERM (errors.Terminated), a cancelled progress bar
        stop_process_group(process, _STOP_GRACE_S)
        raise
    if finished.stalled:
        raise _stalled(args, finished.err, url, cwd, stall_s)
    return finished.status, finished.out, finished.err


def start_streaming(args: Sequence[str], *, cwd: Path | None) -> Process:
    """A git whose stdout the caller reads as it comes (``stop`` it when done: the rest may not be wanted)."""
    return start_piped(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV})


def stop(process: Process) -> None:
    stop_process_group(process, _STOP_GRACE_S)


@dataclass(frozen=True)
class _Finished:
    status: int
    out: str
    err: str
    stalled: bool = False


def _collect(process: Process, progress: ProgressTask | None, stall_s: float | None) -> _Finished:
    """Read stdout and stderr as they come; stop git when the watchdog says it stalled."""
    out_chunks: list[bytes] = []
    errors = _StderrReader(progress)
    watchdog = _Watchdog(process.pid, stall_s) if stall_s is not None else None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, out_chunks.append)
        selector.register(process.stderr, selectors.EVENT_READ, errors.feed)
        while selector.get_map():
            for key, _events in selector.select(timeout=0.5):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                key.data(chunk)
                if watchdog:
                    watchdog.saw_output()
            if watchdog and watchdog.stalled():
                stop_process_group(process, _STOP_GRACE_S)
                return _Finished(process.returncode or -1, "", errors.text(), stalled=True)
    status = process.wait()
    return _Finished(status, b"".join(out_chunks).decode("utf-8", "replace"), errors.text())


class _StderrReader:
    """git's stderr: progress lines go to the bar, the rest is kept for the error message."""

    def __init__(self, progress: ProgressTask | None):
        self.progress = progress
        self.lines: list[str] = []
        self.buffer = b""

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        *lines, self.buffer = re.split(rb"[\r\n]", self.buffer)
        for raw in lines:
            self._line(raw.decode("utf-8", "replace").strip())

    def _line(self, line: str) -> None:
        if not line:
            return
        match = _PROGRESS.search(line)
        if match and self.progress is not None:
            self.progress.update(float(match.group(2)), 100.0, detail=match.group(1).lower())
        elif not match:
            self.lines.append(line)

    def text(self) -> str:
        if self.buffer.strip():
            self._line(self.buffer.decode("utf-8", "replace").strip())
            self.buffer = b""
        return "\n".join(self.lines)


class _Watchdog:
    """A stall is ``stall_s`` seconds without output *and* without CPU use in git's process group:
    a quiet but busy git (a large checkout inside ``submodule update``) is left alone, a git blocked
    on a frozen server is not. Without /proc, output alone counts."""

    _BUSY_SHARE = 0.02  # of one core: a blocked git uses none, a working one far more

    def __init__(self, pgid: int, stall_s: float):
        self.pgid, self.stall_s = pgid, stall_s
        self.sample_every_s = min(1.0, stall_s / 2)
        self.last_activity = time.monotonic()
        self.cpu_mark: tuple[float, float] | None = None  # (when, group CPU seconds) since the output stopped

    def saw_output(self) -> None:
        self.last_activity = time.monotonic()
        self.cpu_mark = None

    def stalled(self) -> bool:
        now = time.monotonic()
        if now - self.last_activity < min(0.25, self.sample_every_s):
            return False  # output is flowing: nothing to measure
        if self.cpu_mark is None or now - self.cpu_mark[0] >= self.sample_every_s:
            cpu = group_cpu_seconds(self.pgid)
            if cpu is not None:
                if self.cpu_mark is not None and cpu - self.cpu_mark[1] > self._BUSY_SHARE * (now - self.cpu_mark[0]):
                    self.last_activity = now  # silent, but working
                self.cpu_mark = (now, cpu)
        return now - self.last_activity >= self.stall_s


# --- failures -------------------------------------------------------------------------------------


def _stalled(args: Sequence[str], stderr: str, url: str | None, cwd: Path | None,
             stall_s: float | None) -> SourceError:
    where = url or (f"the remote of {cwd}" if cwd else "the server")
    seconds = f"{stall_s:g}" if stall_s is not None else "too many"
    tail = [line for line in stderr.strip().splitlines()[-4:] if line.strip() and not line.startswith("Cloning into")]
    return SourceError(
        f"no data from {where} for {seconds} s; the server stalled, so git {_verb(args)} was stopped",
        details=tuple(f"git: {line}" for line in tail),
        fix=f"run the same command again (finished sources are kept); if the server is just slow, "
        f"wait longer: export {STALL_TIMEOUT_ENV}=300")


def _verb(args: Sequence[str]) -> str:
    return next((a for a in args if not a.startswith("-")), "command")


# What git prints, mapped to what went wrong; the first matching kind wins, so the specific
# ones ("error: 404" inside "unable to access ...") come before the generic network failure.
_FAILURE_SIGNATURES = (
    ("stalled", ("operation too slow", "low speed limit")),
    ("credentials", ("terminal prompts disabled", "authentication failed", "could not read username",
                     "could not read password", "permission denied (publickey)", "error: 401", "error: 403")),
    ("missing-commit", ("not our ref", "couldn't find remote ref", "unadvertised object", "no such remote ref")),
    ("missing-repository", ("not found", "does not appear to be a git repository", "error: 404",
                            "does not exist", "not a git repository")),
    ("unreachable", ("could not resolve host", "failed to connect", "connection refused", "timed out",
                     "network is unreachable", "could not connect", "unable to access", "proxy")),
)


# A host name without a DNS answer, as curl (https), ssh and git's own protocol say it: no network here, or a wrong
# name. Asking again changes neither, so it is never retried (``gitcmd.git_result`` raises it).
_UNRESOLVED = re.compile(r"could not resolve host(?:name)?:?\s+([^\s:'\"/]+)|unable to look up ([^\s:'\"/()]+)"
                         r"|temporary failure in name resolution|name or service not known", re.IGNORECASE)
UNRESOLVED_FIX = (
    "check the URL (flagtree-cpu recipe show); on a machine without network, bring the sources in a bundle made where "
    "there is network (flagtree-cpu bundle create there, flagtree-cpu bundle import FILE here) and run "
    "flagtree-cpu setup --offline; behind a git mirror: git config --global url.<mirror-url>.insteadOf <url-prefix>")


def unresolved_host(stderr: str, url: str | None) -> str | None:
    """The host name git could not resolve, when that is why it failed; else None."""
    match = _UNRESOLVED.search(stderr)
    if match is None:
        return None
    return match.group(1) or match.group(2) or _host_of(url) or "the server"


def _host_of(url: str | None) -> str | None:
    if not url:
        return None
    if "://" in url:
        return urlparse(url).hostname
    scp = re.match(r"(?:[^@/]+@)?([^:/]+):", url)  # git@github.com:owner/repo.git
    return scp.group(1) if scp else None


def classify_failure(args: Sequence[str], stderr: str, url: str | None, cwd: Path | None,
                     source: str | None = None) -> SourceError:
    """A git failure as a message a user can act on."""
    low = stderr.lower()
    where = url or (str(cwd) if cwd else "the repository")
    key = f"sources.{source}" if source else "the source"
    tail = [line for line in stderr.strip().splitlines()[-6:] if line.strip() and not line.startswith("Cloning into")]
    details = tuple(f"git: {line}" for line in tail)
    host = unresolved_host(stderr, url)
    if host is not None:
        error = SourceError(f"cannot reach {where}: the host name {host} cannot be resolved (no network, or no DNS "
                            "answer for it); not retried", details=details, fix=UNRESOLVED_FIX)
        error.unresolved_hosts = (host,)
        return error
    kind = next((k for k, signatures in _FAILURE_SIGNATURES if any(s in low for s in signatures)), None)
    if kind == "stalled":  # curl's low-speed limit, set from the same stall timeout
        return _stalled(args, stderr, url, cwd, stall_timeout_s())
    if kind == "credentials":
        message, fix = f"{where} asked for credentials", (
            "flagtree-cpu never prompts (GIT_TERMINAL_PROMPT=0): set up a credential helper (git config "
            "--global credential.helper store) or an SSH key; GitHub also answers this way for a repository "
            "that does not exist, so check the URL (flagtree-cpu recipe show)")
    elif kind == "missing-commit":
        message, fix = (f"{where} does not have the requested commit or ref",
                        f"check the pin ({key}.commit / ref); it may have been force-pushed away")
    elif kind == "missing-repository":
        message, fix = (f"no git repository at {where}",
                        f"check {key}.url (flagtree-cpu recipe show); a fork may have moved or been renamed")
    elif kind == "unreachable":
        message, fix = f"cannot reach {where}", (
            "check the network and proxy settings (https_proxy, git config http.proxy); to use a mirror: git "
            "config --global url.<mirror-url>.insteadOf <url-prefix>; on a machine without network, sync from "
            "a --git-cache filled where there is one")
    else:
        message = f"git {_verb(args)} failed in {where}"
        fix = "read git's message above; re-run with --verbose for more"
    return SourceError(message, details=details, fix=fix)
