"""All output goes through here: human text on stderr (rich), machine output on stdout.

stdout carries only what a program would consume — ``--json`` documents, the YAML of
``recipe show``, the JSON Schema — so ``flagtree-cpu ... --json | jq`` always works.
Colour and animation are off when stderr is not a terminal or ``NO_COLOR`` is set
(rich honours both). User-supplied text is never parsed as rich markup: a recipe value
such as ``[aarch64]`` must print as written.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .errors import FlagtreeCpuError


class UI:
    def __init__(
        self,
        *,
        json_mode: bool = False,
        verbose: bool = False,
        quiet: bool = False,
        stderr: IO[str] | None = None,
        stdout: IO[str] | None = None,
    ):
        self.json_mode = json_mode
        self.verbose = verbose
        self.quiet = quiet
        self._stdout = stdout
        width = None if (stderr or sys.stderr).isatty() else _plain_width()
        self.console = Console(file=stderr or sys.stderr, highlight=False, width=width)

    @property
    def stdout(self) -> IO[str]:
        return self._stdout or sys.stdout

    @property
    def interactive(self) -> bool:
        return self.console.is_terminal

    # --- human output (stderr) -------------------------------------------------------

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(message, markup=False, soft_wrap=True)

    def success(self, message: str) -> None:
        if not self.quiet:
            self.console.print(Text.assemble(("ok ", "bold green"), message), soft_wrap=True)

    def warn(self, message: str) -> None:
        self.console.print(Text.assemble(("warning: ", "bold yellow"), message), soft_wrap=True)

    def error(self, exc: FlagtreeCpuError) -> None:
        self.console.print(Text.assemble(("error: ", "bold red"), exc.message), soft_wrap=True)
        for line in exc.details:
            self.console.print(Text("  " + line.replace("\n", "\n  ")), soft_wrap=True)
        if exc.fix:
            self.console.print(Text.assemble(("fix: ", "bold"), exc.fix), soft_wrap=True)
        if self.verbose and exc.__cause__ is not None:
            self._traceback(exc.__cause__)
        if self.json_mode:
            self.emit_json({"ok": False, "error": exc.to_json()})

    def unexpected(self, exc: BaseException) -> None:
        """A bug or an unforeseen failure: say so plainly; the traceback needs --verbose."""
        self.console.print(
            Text.assemble(("error: ", "bold red"), f"unexpected {type(exc).__name__}: {exc}"),
            soft_wrap=True,
        )
        if self.verbose:
            self._traceback(exc)
        else:
            self.console.print("re-run with --verbose for the traceback, and please report it",
                               markup=False, soft_wrap=True)
        if self.json_mode:
            self.emit_json({"ok": False, "error": {"kind": "unexpected", "exit_code": 1,
                                                   "message": f"{type(exc).__name__}: {exc}"}})

    def _traceback(self, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.console.print(Text(text.rstrip(), style="dim"), soft_wrap=True)

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> None:
        table = Table(
            title=title,
            box=box.SIMPLE_HEAD if self.interactive else box.ASCII2,
            show_edge=False,
            title_justify="left",
        )
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in row))
        self.console.print(table)

    # --- machine output (stdout) -----------------------------------------------------

    def emit_json(self, document: Any) -> None:
        self.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
        self.stdout.flush()

    def emit_text(self, text: str) -> None:
        self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()


def _plain_width() -> int:
    """Log files and CI consoles are wide; 80 columns would fold every path."""
    try:
        return max(80, int(os.environ.get("COLUMNS", "120")))
    except ValueError:
        return 120
