"""Sourcing a vendor script (a recipe's ``env.source``) to take over the environment it leaves.

Split from ``envops`` (which decides what the environment becomes) because this part reaches the machine:
it starts bash through ``proc``. ``envops`` re-exports both names.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import BuildError

SOURCE_TIMEOUT_S = 60.0


class SourceScriptError(BuildError):
    """A script named by a recipe's ``source`` is missing, fails or hangs (exit code and JSON code of a build
    failure: the environment it should give cannot be made)."""


# The script is sourced as a user would (`. script args`) into a non-interactive bash with no rc files; its
# output goes to the log; the environment it leaves is written NUL-separated to a file named by $1 (a file,
# not stdout, so nothing the script prints can be mistaken for it). No `set -a`: what the script exports
# is what a build started from the user's shell would see; its unexported helper variables are not.
_SNIPPET = ('__flagtree_cpu_dump=$1; shift; . "$0" "$@" </dev/null || exit $?; '
            'command -p env -0 >"$__flagtree_cpu_dump"')


def source_script(script: Path, args: Sequence[str], env: Mapping[str, str], cwd: Path | None, *,
                  timeout_s: float = SOURCE_TIMEOUT_S) -> dict[str, str]:
    """The environment ``script`` leaves when sourced by bash in ``env``. A missing script raises
    FileNotFoundError (``filename``: the script); one that fails, hangs or exits raises SourceScriptError."""
    import errno

    from .proc import MARK, run_logged

    if not script.is_file():
        raise FileNotFoundError(errno.ENOENT, "which does not exist" if not script.exists() else "which is not a file",
                                str(script))

    with tempfile.TemporaryDirectory(prefix="flagtree-cpu-source-") as tmp:
        dump, log = Path(tmp) / "env", Path(tmp) / "source.log"
        bash = shutil.which("bash", path=env.get("PATH") or os.defpath) or "/bin/bash"
        argv = [bash, "--noprofile", "--norc", "-c", _SNIPPET, str(script), str(dump), *args]
        folder = cwd if cwd is not None and cwd.is_dir() else script.parent
        try:
            result = run_logged(argv, cwd=folder, env=env, log=log, timeout_s=timeout_s)
        except FileNotFoundError as exc:
            raise SourceScriptError(f"cannot run bash to source {script}: {exc}",
                                    fix="install bash (sourcing a script needs it)") from exc
        output = _output_lines(log)
        if result.timed_out:
            raise SourceScriptError(f"sourcing {script} did not finish within {timeout_s:g} s", details=output[-10:],
                                    fix=f"run `bash -c '. {script}'` by hand: it must return without waiting "
                                    "for input")
        if not result.ok:
            how = f"killed by {result.signal_name}" if result.signal_name else f"exit status {result.returncode}"
            raise SourceScriptError(f"sourcing {script} failed ({how})", details=output[-10:],
                                    fix=f"run `. {script}` in bash to see why; the lines above are its last output")
        if not dump.exists():
            raise SourceScriptError(f"sourcing {script} ended its shell (it calls `exit`) before its environment "
                                    "could be read", details=output[-10:],
                                    fix="a script meant to be sourced must `return`, not `exit`")
        left = _parse_env(dump.read_bytes())
        left.pop(MARK, None)  # the mark proc gives every command it starts: the tool's, not the script's
        return left


def _parse_env(data: bytes) -> dict[str, str]:
    env = {}
    for item in data.decode("utf-8", "surrogateescape").split("\0"):
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    return env


def _output_lines(log: Path) -> tuple[str, ...]:
    """The script's own output from a ``run_logged`` log (its header and footer lines left out)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ()
    body = lines[lines.index("") + 1:] if "" in lines else lines
    return tuple(line for line in body if line and not line.startswith("# "))
