"""The one way this tool runs git: through GitPython, never prompting, failures explained.

Every git command of sources, the git cache, patches and the lock goes through
``run_git``. It respects the user's git configuration (``url.insteadOf``, proxies,
credential helpers — we add, never replace, configuration), forbids password prompts
(``GIT_TERMINAL_PROMPT=0``, so CI never hangs), feeds ``--progress`` output to a
progress bar, and turns a failure into a ``SourceError`` that names the URL and the
likely fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from git.cmd import Git
from git.exc import GitCommandNotFound

from .errors import SourceError
from .ui import ProgressTask

# GitPython itself sets LC_ALL=C, so messages are English. No optional locks: `git status` would
# otherwise refresh the index, and read-only callers (doctor, build's stamp) must not write.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}

_PROGRESS = re.compile(
    r"(Enumerating objects|Counting objects|Compressing objects|Receiving objects|Resolving deltas|"
    r"Updating files|Checking out files|Filtering content):\s+(\d+)%"
)


def run_git(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    config: Sequence[tuple[str, str]] = (),
    progress: ProgressTask | None = None,
    url: str | None = None,
    source: str | None = None,
    check: bool = True,
) -> str:
    """Run ``git <config> <args>`` in ``cwd``; return stdout (stripped).

    ``config`` pairs become ``-c key=value`` for this command only (and, through
    GIT_CONFIG_PARAMETERS, for the git processes it starts, such as submodule clones).
    ``url`` (and the recipe's ``source`` name) are named in the error when the command fails.
    """
    argv = ["git", *_config_args(config), *args]
    runner = Git(str(cwd) if cwd else None)
    try:
        if progress is None:
            status, out, err = runner.execute(argv, with_extended_output=True, with_exceptions=False,
                                              env=GIT_ENV, strip_newline_in_stdout=False)
        else:
            status, out, err = _run_with_progress(runner, argv, progress)
    except GitCommandNotFound as exc:
        raise SourceError("git is not installed or not on PATH",
                          fix="install git (sudo apt-get install -y git)") from exc
    if status != 0 and check:
        raise classify_failure(args, err, url, cwd, source)
    return out.rstrip() if isinstance(out, str) else out  # leading spaces can be meaningful


def _config_args(config: Sequence[tuple[str, str]]) -> list[str]:
    return [arg for key, value in config for arg in ("-c", f"{key}={value}")]


def git_result(args: Sequence[str], *, cwd: Path | None = None,
               config: Sequence[tuple[str, str]] = ()) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a git command that may fail as an answer."""
    argv = ["git", *_config_args(config), *args]
    status, out, err = Git(str(cwd) if cwd else None).execute(
        argv, with_extended_output=True, with_exceptions=False, env=GIT_ENV)
    return status, out, err


def git_succeeds(args: Sequence[str], *, cwd: Path | None = None,
                 config: Sequence[tuple[str, str]] = ()) -> bool:
    """Whether a git query exits 0 (for checks such as "is this commit here?")."""
    return git_result(args, cwd=cwd, config=config)[0] == 0


def has_commit(repo: Path, commit: str) -> bool:
    return git_succeeds(["cat-file", "-e", f"{commit}^{{commit}}"], cwd=repo)


def _run_with_progress(runner: Git, argv: list[str], progress: ProgressTask) -> tuple[int, str, str]:
    process = runner.execute(argv, as_process=True, env=GIT_ENV)
    stderr_lines: list[str] = []
    buffer = b""
    stream = process.proc.stderr
    while True:
        chunk = stream.read1(4096) if hasattr(stream, "read1") else stream.read(4096)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = re.split(rb"[\r\n]", buffer)
        for raw in lines:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            match = _PROGRESS.search(line)
            if match:
                progress.update(float(match.group(2)), 100.0, detail=match.group(1).lower())
            else:
                stderr_lines.append(line)
    if buffer.strip():
        stderr_lines.append(buffer.decode("utf-8", "replace").strip())
    out = process.proc.stdout.read().decode("utf-8", "replace") if process.proc.stdout else ""
    status = process.proc.wait()
    return status, out, "\n".join(stderr_lines)


# What git prints, mapped to what went wrong; the first matching kind wins, so the specific
# ones ("error: 404" inside "unable to access ...") come before the generic network failure.
_FAILURE_SIGNATURES = (
    ("credentials", ("terminal prompts disabled", "authentication failed", "could not read username",
                     "could not read password", "permission denied (publickey)", "error: 401", "error: 403")),
    ("missing-commit", ("not our ref", "couldn't find remote ref", "unadvertised object", "no such remote ref")),
    ("missing-repository", ("not found", "does not appear to be a git repository", "error: 404",
                            "does not exist", "not a git repository")),
    ("unreachable", ("could not resolve host", "failed to connect", "connection refused", "timed out",
                     "network is unreachable", "could not connect", "unable to access", "proxy")),
)


def classify_failure(args: Sequence[str], stderr: str, url: str | None, cwd: Path | None,
                     source: str | None = None) -> SourceError:
    """A git failure as a message a user can act on."""
    low = stderr.lower()
    where = url or (str(cwd) if cwd else "the repository")
    key = f"sources.{source}" if source else "the source"
    tail = [line for line in stderr.strip().splitlines()[-6:] if line.strip() and not line.startswith("Cloning into")]
    details = tuple(f"git: {line}" for line in tail)
    kind = next((k for k, signatures in _FAILURE_SIGNATURES if any(s in low for s in signatures)), None)
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
        verb = next((a for a in args if not a.startswith("-")), "command")
        message, fix = f"git {verb} failed in {where}", "read git's message above; re-run with --verbose for more"
    return SourceError(message, details=details, fix=fix)
