"""All output goes through here: human text on stderr (rich), machine output on stdout.

stdout carries only what a program would consume — the ``--json`` document, the YAML of
``recipe show``, the JSON Schema — so ``flagtree-cpu ... --json | jq`` always works. Under
``--json`` a command's result is not printed here but kept (``json_result``): the CLI's error
boundary prints it once, in the envelope that also carries the error, so a run writes exactly
one JSON document whatever happens.
Colour and animation are off when stderr is not a terminal or ``NO_COLOR`` is set
(rich honours both). User-supplied text is never parsed as rich markup: a recipe value
such as ``[aarch64]`` must print as written.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .errors import FlagtreeCpuError
from .invocation import Invocation, in_context
from .progress import ProgressTask, bar_columns, shared_unit_column
from .table_layout import ELLIPSIS, LABEL, Column, Kind, as_column, cell_lines, column_widths


class _ReaderGoneSafe:
    """A text stream whose writes survive the reader going away (`flagtree-cpu sync 2>&1 | head -3`).

    Well-behaved CLIs stop writing and finish (or stop) the work with their real exit code; an
    EPIPE must never abort a clone or turn a doctor verdict into "unexpected error". Once the pipe
    is gone, the descriptor is pointed at /dev/null so the interpreter's own flush at exit is quiet.
    """

    def __init__(self, stream: IO[str]):
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
                self._reader_went_away()
            except OSError as exc:
                if exc.errno != errno.EPIPE:
                    raise
                self._reader_went_away()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                self._reader_went_away()
            except OSError as exc:
                if exc.errno != errno.EPIPE:
                    raise
                self._reader_went_away()

    def _reader_went_away(self) -> None:
        self.reader_gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def survive_closed_pipes() -> None:
    """Make sys.stdout and sys.stderr safe against a reader that goes away (called once, by main)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _ReaderGoneSafe):
            setattr(sys, name, _ReaderGoneSafe(stream))


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
        self._shared: Any = None  # the live display while concurrent() is active
        self.json_result: object | None = None  # under --json: the command's result, for the envelope
        # the run's context as options (set once the workspace and recipe are known): every fix and next line
        # printed carries them, so a command copied into another shell or folder means the same thing
        self.invocation: Invocation | None = None
        # Set to stop work in other threads: their next progress update raises KeyboardInterrupt.
        self.cancel = threading.Event()
        self.github_actions = os.environ.get("GITHUB_ACTIONS") == "true"
        width = None if (stderr or sys.stderr).isatty() else plain_width()
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
        """An error for people (stderr); under --json the CLI's envelope carries it on stdout."""
        self.console.print(Text.assemble(("error: ", "bold red"), exc.message), soft_wrap=True)
        for line in exc.details:
            self.console.print(Text("  " + line.replace("\n", "\n  ")), soft_wrap=True)
        if exc.fix:
            self.console.print(Text.assemble(("fix: ", "bold"), self.in_context(exc.fix) or ""), soft_wrap=True)
        if self.verbose and exc.__cause__ is not None:
            self._traceback(exc.__cause__)

    def in_context(self, text: str | None) -> str | None:
        """``text`` (a fix, a next line) with this run's context options in each command it holds."""
        return in_context(text, self.invocation)

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

    def _traceback(self, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.console.print(Text(text.rstrip(), style="dim"), soft_wrap=True)

    def table(self, columns: Sequence[Column | str], rows: Sequence[Sequence[Any]], *, title: str | None = None,
              listing: bool = False) -> None:
        """A result table for people; --quiet means only warnings and errors, so none then. A ``listing`` (`recipe
        list`, `status`, `doctor`, `lock`, `validate --list`) is the command's product: it goes to stdout, as
        `pip list` does, so `| grep` and `| less` work; progress, warnings and logs stay on stderr.

        A column is a header (prose) or a ``table_layout.Column`` of its kind (``Column("link", PATH)``): on a
        terminal too narrow for a row, prose wraps at spaces and a path is elided in the middle, never split
        across lines (so it can be copied); anywhere else each row is one line, never wrapped or elided."""
        if self.quiet:
            return
        console = self._stdout_console() if listing else self._stderr_table_console()
        kinds = [as_column(c) for c in columns]
        cells = [[c if isinstance(c, Text) else Text(str(c)) for c in row] for row in rows]
        style = box.SIMPLE_HEAD if console.is_terminal else box.ASCII2
        table = Table(box=style, show_edge=False)
        widths = _fitted_widths(console, style, kinds, cells) if _on_terminal(console) else [None] * len(kinds)
        for column, width in zip(kinds, widths, strict=True):
            table.add_column(column.header, width=width, no_wrap=True, overflow="ellipsis")
        for row in cells:
            table.add_row(*(_laid_out(c, k.kind, w) if w is not None else c
                            for c, k, w in zip(row, kinds, widths, strict=True)))
        if title:  # on a line of its own, never wrapped: the workspace it names stays whole
            console.print(Text(title, style="table.title"), soft_wrap=True)
        console.print(table)

    def _stderr_table_console(self) -> Console:
        """stderr's console, or on a log or a pipe one as wide as the table's widest row (never wrapped)."""
        if _on_terminal(self.console):
            return self.console
        return Console(file=self.console.file, highlight=False, width=_UNWRAPPED)

    def _stdout_console(self) -> Console:
        """A console on stdout (looked up now: tests and pipes replace it). Not a terminal: one row per line,
        never wrapped, so a pipe to grep sees each row whole."""
        stream = self.stdout
        terminal = stream.isatty()
        return Console(file=stream, highlight=False, width=None if terminal else _UNWRAPPED,
                       no_color=None if terminal else True)

    @contextmanager
    def progress(self, description: str, *, total: float | None = None,
                 unit: str = "") -> Iterator[ProgressTask]:
        """A progress bar on a terminal; on logs, a line per quarter or per 10 seconds.

        Inside ``concurrent()`` the bar is a row of one shared display, so stages running in
        parallel (a clone and a download) each keep their own line.
        """
        if self.quiet:
            yield ProgressTask(None, None, description, cancel=self.cancel)
            return
        if not self.interactive:
            task = ProgressTask(None, self, description, total, cancel=self.cancel, unit=unit)
            yield task
            task.finish()
            return
        if self._shared is not None:
            task_id = self._shared.add_task(description, total=total, detail="", unit=unit)
            try:
                yield ProgressTask(self._shared, None, description, total, task_id, cancel=self.cancel)
            finally:
                self._shared.remove_task(task_id)
            return
        from rich.progress import Progress

        with Progress(*bar_columns(unit, total), console=self.console, transient=True) as bar:
            task_id = bar.add_task(description, total=total, detail="", unit=unit)
            yield ProgressTask(bar, None, description, total, task_id, cancel=self.cancel)

    @contextmanager
    def concurrent(self) -> Iterator[None]:
        """One live display for several progress bars updated from several threads."""
        if self.quiet or not self.interactive or self._shared is not None:
            yield
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), shared_unit_column(),
                      TextColumn("{task.fields[detail]}", style="dim"), console=self.console,
                      transient=True) as shared:
            self._shared = shared
            try:
                yield
            finally:
                self._shared = None

    # --- CI logs (GitHub Actions workflow commands) ------------------------------------

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A collapsible group in a GitHub Actions log; nothing elsewhere."""
        if not self.github_actions:
            yield
            return
        self._workflow_command(f"::group::{title}")
        try:
            yield
        finally:
            self._workflow_command("::endgroup::")

    def annotate_error(self, title: str, exc: FlagtreeCpuError) -> None:
        """An error annotation on the GitHub Actions run page, carrying the message and the fix."""
        if not self.github_actions:
            return
        body = "\n".join([exc.message, *exc.details[:6], *([f"fix: {self.in_context(exc.fix)}"] if exc.fix else [])])
        self._workflow_command(f"::error title={_escape_property(title)}::{_escape_data(body)}")

    def _workflow_command(self, line: str) -> None:
        # The runner reads workflow commands from stdout and stderr; stdout stays clean for --json.
        stream = self.console.file if self.json_mode else self.stdout
        stream.write(line + "\n")
        stream.flush()

    def styled(self, status: str) -> Text:
        return Text(status, style=_STATUS_STYLE.get(status, ""))

    def findings(self, findings: Sequence[Any], areas: Sequence[str]) -> None:
        """doctor's report: a table grouped by area (✓ ok, ! warn, ✗ fail, - skip) on stdout (the product), then
        the fixes on stderr."""
        symbols = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "bold red"), "skip": ("-", "dim")}
        rows: list[list[Any]] = []
        for area in areas:
            group = [f for f in findings if f.area == area]
            if not group:
                continue
            rows.append([Text(area, style="bold"), "", ""])
            for f in group:
                symbol, style = symbols[f.status]
                rows.append([Text(f"  {symbol}", style=style), f.id, f.detail])
        self.table([Column("", LABEL), Column("check", LABEL), "detail"], rows, listing=True)
        fixes = [f for f in findings if f.fix and f.status in ("fail", "warn")]
        if fixes and self.quiet:  # the problems alone, one per line
            for f in sorted(fixes, key=lambda f: f.status != "fail"):
                symbol, style = symbols[f.status]
                fix = self.in_context(f.fix)
                self.console.print(Text.assemble((symbol, style), f" {f.id}: {f.detail} — fix: {fix}"), soft_wrap=True)
        elif fixes:
            self.console.print(Text("fixes", style="bold"))
            for number, f in enumerate(sorted(fixes, key=lambda f: f.status != "fail"), 1):
                symbol, style = symbols[f.status]
                self.console.print(Text.assemble(f"{number:2}. ", (symbol, style), f" {f.id}: ",
                                                  self.in_context(f.fix) or ""),
                                   soft_wrap=True)

    # --- machine output (stdout) -----------------------------------------------------

    def emit_json(self, document: object) -> None:
        """A command's machine-readable result: under --json kept for the envelope (one per run: a
        second one is a bug), otherwise printed as it is (`recipe schema`, `doctor --schema`)."""
        if not self.json_mode:
            self.write_json(document)
        elif self.json_result is not None:
            raise RuntimeError("a command emitted two JSON results; --json prints exactly one document")
        else:
            self.json_result = document

    def write_json(self, document: object) -> None:
        self.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
        self.stdout.flush()

    def emit_text(self, text: str) -> None:
        self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()


_STATUS_STYLE = {"ok": "green", "created": "cyan", "updated": "yellow", "skipped": "dim", "failed": "bold red",
                 "interrupted": "bold red", "not run": "dim", "missing": "yellow", "differs": "yellow",
                 "dirty": "bold red", "stale": "yellow",
                 "create": "cyan", "update": "yellow", "conflict": "bold red", "dangling": "bold red",
                 "pass": "green", "FAIL": "bold red", "fail (optional)": "yellow", "skip": "dim",
                 "removed": "cyan", "would remove": "cyan", "kept": "dim"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _on_terminal(console: Console) -> bool:
    """Whether the table is read on a terminal (sized to it), judged as the console's width was: by isatty."""
    isatty = getattr(console.file, "isatty", None)
    return bool(isatty and isatty())


def _fitted_widths(console: Console, style: box.Box, columns: Sequence[Column],
                   cells: Sequence[Sequence[Text]]) -> list[int]:
    """Each column's width on this terminal; the rules and padding of the table's style are measured, not assumed."""
    probe = Table(box=style, show_edge=False)
    for _ in columns:
        probe.add_column(width=1)
    frame = Measurement.get(console, console.options, probe).maximum - len(columns)
    return column_widths(columns, [[c.plain for c in row] for row in cells], max(console.width - frame, len(columns)))


def _laid_out(cell: Text, kind: Kind, width: int) -> Text:
    """``cell`` as the lines it prints in ``width`` characters (styles kept; an elided part is "…")."""
    lines = [Text(ELLIPSIS, style="dim").join(cell[start:end] for start, end in parts)
             for parts in cell_lines(cell.plain, kind, width)]
    return Text("\n").join(lines)


_UNWRAPPED = 10_000  # a listing on a pipe: as wide as its widest row (rich sizes a table to its content)


def plain_width() -> int:
    """Log files and CI consoles are wide; 80 columns would fold every path."""
    try:
        return max(80, int(os.environ.get("COLUMNS", "120")))
    except ValueError:
        return 120
