"""The options that reproduce a run's context, for every command the tool prints for the user to copy.

A fix or a "next:" line is copied into another shell, often from another folder: `flagtree-cpu env` printed after
`--recipe triton-cpu setup` ran FlagTree's recipe there and exported FlagTree's variables. So every command the
tool prints carries the context it was printed in: ``-w`` with the workspace's absolute path (works from any
folder), ``--recipe`` unless it is the default recipe, ``--variant`` when one is in use, ``--lock-file`` when the
lock lives outside the workspace. This module is the one place that renders them; the CLI hands the run's
``Invocation`` to the UI, which applies it to each fix and next line it prints.
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


@dataclass(frozen=True)
class Invocation:
    """The context of one run, as options: what a printed command needs to mean the same thing elsewhere."""

    workdir: Path  # absolute
    recipe: str | None = None  # a bundled name, or a recipe file's absolute path; None: the default recipe
    variant: str | None = None
    lock_file: Path | None = None  # absolute; None: the lock inside the workspace

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

    def apply(self, text: str) -> str:
        """``text`` with the context options put after each ``flagtree-cpu <command>`` in it."""
        return _COMMAND.sub(lambda _: shlex.join([PROGRAM, *self.options()]) + " ", text)


def in_context(text: str | None, invocation: Invocation | None) -> str | None:
    """``text`` as the user should copy it: unchanged without a context (an error before the workspace was
    known), else with the context's options in each command."""
    if text is None or invocation is None:
        return text
    return invocation.apply(text)
