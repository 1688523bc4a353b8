"""One run of the command line: the global options once parsed, the command that ran, what stopped it.

The error boundary (``boundary``) reads this to print the one ``--json`` envelope at the end of the
run; the commands read the global options from it. Nothing here imports typer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..ui import UI

if TYPE_CHECKING:
    from pathlib import Path

    from ..context import ContextRequest
    from ..errors import FlagtreeCpuError


@dataclass
class Options:
    """The global options, parsed once by the top-level callback."""

    recipe: str | None  # --recipe / FLAGTREE_CPU_RECIPE; None: the workspace's own recipe, else the default
    workdir: str | None
    overrides: list[str] = field(default_factory=list)
    recipes_dirs: list[str] = field(default_factory=list)
    ui: UI = field(default_factory=UI)
    wait: bool = False  # queue behind another run that holds the workspace, instead of exiting 8
    lock_file: str | None = None  # --lock-file: the lock kept outside the workspace
    variant: str | None = None  # --variant: the recipe's variant; None: the workspace's, else the recipe's default
    command: tuple[str, ...] = ()  # the command and its own arguments as typed (set when the command runs)
    installer: str | None = None  # --installer auto|uv|pip (installer.py); None: $FLAGTREE_CPU_INSTALLER, recipe, auto

    def request(self, *, python: Path | None = None, jobs: int | None = None,
                wheel_dir: Path | None = None) -> ContextRequest:
        """What `context.open_context` needs, from these options and a command's own."""
        from ..context import ContextRequest  # not at start-up: --version and --help need no workspace

        return ContextRequest(self.recipe, tuple(self.overrides), tuple(self.recipes_dirs), self.workdir,
                              self.lock_file, python=python, jobs=jobs, wheel_dir=wheel_dir, variant=self.variant,
                              command=self.command)


class Verdict(Exception):
    """Raised by a command that has shown its failing verdict already (status --check's list, doctor's
    table, the kernels' table): the boundary exits with the error's code and puts it in the --json
    envelope, without printing it a second time."""

    def __init__(self, error: FlagtreeCpuError):
        super().__init__(error.message)
        self.error = error


@dataclass
class Run:
    """The click context's ``obj`` for one invocation of the tool."""

    argv: Sequence[str]
    options: Options | None = None  # set by the top-level callback
    command: str | None = None  # "recipe list", once a command's own options were parsed
    error: FlagtreeCpuError | None = None  # what made the run fail (for the envelope)
    crash: BaseException | None = None  # an unexpected exception (a bug)

    @property
    def json_mode(self) -> bool:
        if self.options is not None:
            return self.options.ui.json_mode
        return json_requested(self.argv)

    @property
    def ui(self) -> UI:
        return self.options.ui if self.options is not None else UI(json_mode=self.json_mode)


def json_requested(args: Sequence[str]) -> bool:
    """Whether --json was given (before a `--`), for errors raised before the options are parsed."""
    args = list(args)
    return "--json" in (args[:args.index("--")] if "--" in args else args)


def named_paths(option: str, values: list[str], names: list[str], kind: str) -> dict[str, Path]:
    """Parse repeated ``NAME=PATH`` values of ``option``; a bare PATH is fine when only one name exists."""
    from pathlib import Path

    from ..errors import UsageError

    parsed = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            if len(names) != 1:
                raise UsageError(f"{option} {value!r} must look like NAME=PATH",
                                 fix=f"the recipe's {kind} are: {', '.join(names) or 'none'}")
            name, path = names[0], value
        if name not in names or not path:
            raise UsageError(f"{option} {value!r}: the recipe has no {kind[:-1]} named {name!r}",
                             fix=f"the recipe's {kind} are: {', '.join(names) or 'none'}")
        parsed[name] = Path(path).expanduser()
    return parsed


def artifact_names(option: str, values: list[str], names: list[str]) -> tuple[str, ...]:
    """Repeated ``option NAME`` values, each an artifact of the recipe (a typo is a usage error, not a no-op)."""
    from ..errors import UsageError

    for value in values:
        if value not in names:
            raise UsageError(f"{option} {value}: the recipe has no artifact named {value!r}",
                             fix=f"the recipe's artifacts are: {', '.join(names) or 'none'}")
    return tuple(dict.fromkeys(values))
