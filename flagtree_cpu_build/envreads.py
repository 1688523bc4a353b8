"""Values an environment operation reads from outside the recipe: a file's text (``from_file``), a command's output
(``from_command``) and the one match of a ``{glob:PATTERN}`` in a value.

Split from ``envops`` (which decides what the environment becomes) because these reach the machine. Each is
hostile input: a file is size-capped while read and a FIFO refused; a command is run through ``proc``, stopped at
``COMMAND_TIMEOUT_S`` or ``MAX_OUTPUT`` bytes with whatever it started; a glob is matched lazily and never walks
more than it must to say "none" or "several". Every failure is an ``EnvFileError`` (a build error, exit 5) naming
the recipe key and what was read. ``value_of`` turns a command's answer into the value; it is pure, so its rules
are unit-tested with made-up answers.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .errors import BuildError
from .proc import Capped
from .regular_file import NotRegularFile, read_regular

COMMAND_TIMEOUT_S = 60.0
# an environment string longer than the kernel's MAX_ARG_STRLEN (128 KiB) makes every exec fail (E2BIG)
MAX_OUTPUT = MAX_FILE_VALUE = 64 * 1024


class EnvFileError(BuildError):
    """A value the environment reads is not there or cannot be a variable's value: a ``from_file`` file, a
    ``from_command`` command, a ``{glob:...}`` (a build error, exit 5; validation reports it as its own failure)."""


class EnvCommandError(EnvFileError):
    """A command named by a recipe's ``from_command`` is missing, fails, hangs or prints no value."""


def read_file_value(path: Path, workdir: Path, key: str, fix: str) -> str:
    """A file's text (relative: in ``workdir``), surrounding whitespace stripped (a version file ends with a
    newline)."""
    if not path.is_absolute():
        path = workdir / path
    fix = fix or (f"check out what provides {path.name} (flagtree-cpu sync, when it is a source's file), or "
                  f"correct the path in the recipe's {key}")
    try:
        data = read_regular(path, MAX_FILE_VALUE)  # a FIFO is refused, not waited on; /dev/zero is not read
    except OSError as exc:
        why = "which does not exist" if isinstance(exc, FileNotFoundError) else (
            "which is a folder, not a file" if isinstance(exc, IsADirectoryError) else
            f"which is {exc.kind}, not a regular file" if isinstance(exc, NotRegularFile) else
            f"which cannot be read ({exc.strerror or exc})")
        raise EnvFileError(f"{key} reads {path}, {why}", fix=fix) from None
    problem = (f"which is over {MAX_FILE_VALUE // 1024} KiB: too long for an environment variable"
               if len(data) > MAX_FILE_VALUE else "which holds a NUL byte (a binary file?)" if b"\0" in data
               else None)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        problem = problem or "which is not UTF-8 text"
    if problem:
        raise EnvFileError(f"{key} reads {path}, {problem}", fix=f"point {key} at a short text file")
    return text.strip()


# (argv, the environment so far, cwd, where its program is looked up) -> what it printed
CommandRunner = Callable[[Sequence[str], Mapping[str, str], "Path | None", str], Capped]


def run_command(argv: Sequence[str], env: Mapping[str, str], cwd: Path | None, search_path: str) -> Capped:
    """Run ``argv`` (its program looked up on ``search_path``) in ``env``; a missing program raises
    FileNotFoundError naming it."""
    import errno

    from .proc import capture_capped

    folder = cwd if cwd is not None and cwd.is_dir() else None
    if "/" in argv[0]:  # a path: relative ones are in the folder it runs in, as exec would find them
        program: str | None = str((folder or Path.cwd()) / argv[0])
    else:
        program = shutil.which(argv[0], path=search_path or None)
    if program is None or not Path(program).is_file():
        raise FileNotFoundError(errno.ENOENT, "not found", argv[0])
    return capture_capped([program, *argv[1:]], env=env, cwd=folder, timeout_s=COMMAND_TIMEOUT_S, limit=MAX_OUTPUT)


def value_of(answer: Capped, argv: Sequence[str], key: str, regex: str | None) -> str:
    """The value ``answer`` gives, or EnvCommandError saying why it gives none."""
    shown = shlex.join(argv)
    fix = f"run `{shown}` by hand to see what it prints, or correct the recipe's {key}"
    last = answer.stderr_tail.strip().splitlines()[-10:]
    if answer.timed_out:
        raise EnvCommandError(f"{key}: `{shown}` did not finish within {COMMAND_TIMEOUT_S:g} s", details=last,
                              fix=f"run `{shown}` by hand: it must print its answer and return without input")
    if answer.over_limit:
        raise EnvCommandError(f"{key}: `{shown}` printed more than {MAX_OUTPUT // 1024} KiB, too long for an "
                              "environment variable", fix=f"give {key} a regex that picks the value out")
    if answer.returncode != 0:
        raise EnvCommandError(f"{key}: `{shown}` failed (exit status {answer.returncode})", details=last, fix=fix)
    try:
        text = answer.stdout.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\0" in text:
        raise EnvCommandError(f"{key}: `{shown}` printed {'a NUL byte' if text else 'text that is not UTF-8'}, "
                              "which cannot be a variable's value", fix=fix)
    if regex is None:
        return text.strip()
    found = re.search(regex, text)
    if found is None:
        said = text.strip().splitlines()[:5]
        raise EnvCommandError(f"{key}: the output of `{shown}` has no match for {regex!r}",
                              details=[line[:200] for line in said] or ["(it printed nothing)"], fix=fix)
    return (found.group(1) if found.re.groups else found.group(0)) or ""


_GLOB = re.compile(r"\{glob:([^}]*)\}")  # as resolve leaves it: braces inside the pattern are escaped ([{])
_NAMED = 5  # matches named when a pattern matches several


def expand_globs(text: str, workdir: Path, key: str) -> str:
    """``text`` with each {glob:PATTERN} replaced by the one path PATTERN matches (relative: in ``workdir``)."""
    return _GLOB.sub(lambda found: _one_match(found.group(1), workdir, key), text)


def _one_match(pattern: str, workdir: Path, key: str) -> str:
    import glob
    import itertools

    where = pattern if pattern.startswith("/") else str(workdir / pattern)  # as the messages show it
    absolute = pattern if pattern.startswith("/") else f"{glob.escape(str(workdir))}/{pattern}"
    # lazily, and no further than it takes to name a few: a pattern over a huge folder says "several" at once
    found = sorted(itertools.islice(glob.iglob(absolute), _NAMED + 1))
    if len(found) == 1:
        return found[0]
    if not found:
        raise EnvFileError(f"{key}: {{glob:{where}}} matches nothing",
                           fix="run what makes it first (sync, fetch, build), or correct the pattern in the recipe's "
                           f"{key}")
    shown = ", ".join(found[:_NAMED]) + (" and more" if len(found) > _NAMED else "")
    raise EnvFileError(f"{key}: {{glob:{where}}} matches several paths, it must match one: {shown}",
                       fix=f"narrow the pattern in the recipe's {key}, or remove what should not be there")
