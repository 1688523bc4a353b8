"""Progress of long steps: a bar on a terminal, a line per phase and per interval in a log, nothing under
--quiet — and the point where work in another thread notices a cancellation (Ctrl-C in the main thread).

``UI.progress`` makes the tasks; this module is what they are and how they are drawn.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class ProgressTask:
    """What a long step reports; rendered as a bar, as periodic log lines, or not at all.

    Every update is also where work in another thread notices a cancellation (Ctrl-C in the
    main thread): downloads, unpacking, clones and builds all update as they go.
    """

    LOG_EVERY_S = 10.0

    def __init__(self, bar: Any, plain: Any, description: str, total: float | None = None,
                 task_id: Any = None, *, cancel: threading.Event | None = None, unit: str = ""):
        self._bar, self._plain, self._task_id = bar, plain, task_id
        self._cancel = cancel
        self.description = description
        self.total = total
        self.unit = unit
        self.completed = 0.0
        self._started = time.monotonic()
        self._first: float | None = None  # where this run started (a resumed download starts part-way)
        self._last_log = 0.0
        self._last_detail: str | None = None
        self._logged = False

    def update(self, completed: float, total: float | None = None, detail: str = "") -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise KeyboardInterrupt
        if self._first is None:
            self._first, self._started = completed, time.monotonic()
        self.completed = completed
        if total is not None:
            self.total = total
        if self._bar is not None:
            self._bar.update(self._task_id, completed=completed, total=self.total, detail=detail)
        elif self._plain is not None:
            self._log_plain(detail)

    def _log_plain(self, detail: str) -> None:
        """Logs get a line when a phase starts and then every LOG_EVERY_S seconds, not a bar: what is done
        (bytes and rate, or N of M), so a CI log shows that a long download or build is moving."""
        now = time.monotonic()
        if detail != self._last_detail:  # a new phase (or the start): its name and where it is
            self._last_detail, self._last_log, self._logged = detail, now, True
            self._plain.info(", ".join(x for x in (f"{self.description}: {detail or 'started'}",
                                                   self._amount(now, rate=False)) if x))
        elif now - self._last_log >= self.LOG_EVERY_S:
            self._last_log = now
            self._plain.info(f"{self.description}: " + ", ".join(x for x in (detail, self._amount(now)) if x))

    def _amount(self, now: float, *, rate: bool = True) -> str:
        """"45%, 365.0 MB of 812.0 MB, 12.1 MB/s" for bytes; "45%, 120 of 268" for counts."""
        parts = [f"{100 * self.completed / self.total:.0f}%"] if self.total and self.completed else []
        if self.unit == "bytes":
            of = f" of {_size(self.total)}" if self.total else ""
            parts.append(f"{_size(self.completed)}{of}" if self.completed else f"{_size(self.total)} in all"
                         if self.total else "")
            if rate and self.completed:
                moved = self.completed - (self._first or 0.0)
                parts.append(f"{_size(moved / max(now - self._started, 1e-3))}/s")
        elif self.unit and self.total and self.completed:
            parts.append(f"{self.completed:.0f} of {self.total:.0f}")
        return ", ".join(p for p in parts if p)

    def finish(self) -> None:
        if self._plain is not None and self._logged:
            now = time.monotonic()
            took = f" in {now - self._started:.0f} s" if now - self._started >= 1 else ""
            amount = f" ({_size(self.completed)}{took})" if self.unit == "bytes" and self.completed else ""
            self._plain.info(f"{self.description}: done{amount}")


def human_bytes(size: float) -> str:
    """``812 MB``, ``1.5 GB``, ``640 KB``: sizes for people (decimal units, as download tools print them)."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit in ("B", "KB") else f"{size:.1f} {unit}".replace(".0 ", " ")
        size /= 1000
    return f"{size:.1f} GB"  # pragma: no cover - the loop always returns


def _size(count: float | None) -> str:
    return "?" if count is None else human_bytes(count)


def bar_columns(unit: str, total: float | None) -> list[Any]:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TaskProgressColumn()]
    if unit == "bytes":
        columns += [DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn()]
    elif total is not None:
        columns += [MofNCompleteColumn(), TimeRemainingColumn()]
    return columns + [TextColumn("{task.fields[detail]}", style="dim"), TimeElapsedColumn()]


def shared_unit_column() -> Any:
    """For a shared display: each row shows what its own columns would (bytes and rate, or N/M).
    Made on first use, so commands without progress bars never import rich.progress."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        ProgressColumn,
        TaskProgressColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )
    from rich.table import Table as Grid

    class UnitColumn(ProgressColumn):
        def __init__(self) -> None:
            super().__init__()
            self.bar, self.share, self.elapsed = BarColumn(), TaskProgressColumn(), TimeElapsedColumn()
            self.bytes, self.speed, self.count = DownloadColumn(), TransferSpeedColumn(), MofNCompleteColumn()

        def render(self, task: Any) -> Any:
            cells = [self.bar, self.share]
            if task.fields.get("unit") == "bytes":
                cells += [self.bytes, self.speed]
            elif task.total is not None:
                cells.append(self.count)
            cells.append(self.elapsed)
            grid = Grid.grid(padding=(0, 1))
            grid.add_row(*(cell(task) for cell in cells))
            return grid

    return UnitColumn()
