"""The options that reproduce a run's context, for every command the tool prints for the user to copy.

A fix or a "next:" line is copied into another shell, often from another folder: `flagtree-cpu env` printed after
`--recipe triton-cpu setup` ran FlagTree's recipe there and exported FlagTree's variables. So every command the
tool prints carries the context it was printed in: ``-w`` with the workspace's absolute path (works from any
folder), ``--recipe`` unless it is the default recipe, ``--variant`` when one is in use, ``--lock-file`` when the
lock lives outside the workspace. This module is the one place that renders them; the CLI hands the run's
``Invocation`` to the UI, which applies it to each fix and next line it prints.

A command meant for ANOTHER machine ("on a connected machine run `flagtree-cpu fetch --cache-dir DIR`", "make the
bundle again", "on the board: doctor --snapshot") must not carry this machine's workspace or lock paths: they mean
nothing there. Such a command is written with ``elsewhere(...)``, which marks it; the rendering gives it the
recipe and variant only (``Invocation.portable``), always with an explicit ``--recipe`` — on the other machine the
folder it is typed in may be a workspace of another recipe — and a recipe file by its name (the user copies it
along; this machine's path means nothing there).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

PROGRAM = "flagtree-cpu"
# the commands a printed `flagtree-cpu <command>` may start; prose such as "flagtree-cpu never deletes it" or a
# group title "flagtree-cpu setup: preflight" outside a fix is left alone
COMMANDS = ("setup", "status", "sync", "fetch", "link", "python", "build", "validate", "env", "doctor", "bundle",
            "clean", "lock", "recipe", "schema")
_COMMAND = re.compile(rf"(?<![\w./-]){re.escape(PROGRAM)} (?=(?:{'|'.join(COMMANDS)})\b)")
# a command for another machine, as written where it is raised (``elsewhere``); rendered by ``in_context`` always
_ELSEWHERE = f"{PROGRAM}@another-machine"
_ELSEWHERE_COMMAND = re.compile(rf"{re.escape(_ELSEWHERE)} ")


def elsewhere(*words: str) -> str:
    """``flagtree-cpu <words>`` to be run on another machine (a connected one, the board): rendered with the
    recipe and variant of this run, never with this machine's ``-w`` or ``--lock-file``."""
    return shlex.join([_ELSEWHERE, *words])


@dataclass(frozen=True)
class Invocation:
    """The context of one run, as options: what a printed command needs to mean the same thing elsewhere."""

    workdir: Path  # absolute
    recipe: str | None = None  # a bundled name, or a recipe file's absolute path; None: the default recipe
    variant: str | None = None
    lock_file: Path | None = None  # absolute; None: the lock inside the workspace
    # --recipe as another machine is told it: a bundled name (the default's too), or a recipe file's name
    portable_recipe: str | None = None

    def options(self) -> list[str]:
        args = ["-w", str(self.workdir)]
        if self.recipe is not None:
            args += ["--recipe", self.recipe]
        if self.variant is not None:
            args += ["--variant", self.variant]
        if self.lock_file is not None:
            args += ["--lock-file", str(self.lock_file)]
        return args

    def command(self, *words: str) -> str:
        """``flagtree-cpu <context options> <words>``, quoted for a POSIX shell."""
        return shlex.join([PROGRAM, *self.options(), *words])

    def portable(self) -> list[str]:
        """The options of a command for another machine: the recipe and the variant, no path of this one."""
        args = ["--recipe", self.portable_recipe] if self.portable_recipe is not None else []
        return args + (["--variant", self.variant] if self.variant is not None else [])

    def apply(self, text: str) -> str:
        """``text`` with the context options put after each ``flagtree-cpu <command>`` in it, and the portable
        ones after each command for another machine. A command already rendered (options after the program) is
        left alone, so applying twice changes nothing."""
        text = _COMMAND.sub(lambda _: shlex.join([PROGRAM, *self.options()]) + " ", text)
        return _ELSEWHERE_COMMAND.sub(lambda _: shlex.join([PROGRAM, *self.portable()]) + " ", text)


def in_context(text: str | None, invocation: Invocation | None) -> str | None:
    """``text`` as the user should copy it: without a context (an error before the workspace was known) its
    commands as written, else with the context's options in each command."""
    if text is None:
        return text
    if invocation is None:
        return _ELSEWHERE_COMMAND.sub(f"{PROGRAM} ", text)
    return invocation.apply(text)
