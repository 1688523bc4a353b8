"""Running the build command and watching it: ninja's ``[N/M]`` lines drive a progress bar, CMake and pip lines
name the phase, quiet spells get a heartbeat; the wheel a wheel build made is found by what changed in its folder."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...buildenv import BuildEnv
from ...cache_url import redact
from ...digest import hash_file
from ...errors import BuildError
from ...proc import log_path, run_logged
from ...progress import ProgressTask
from ...recipe import Recipe
from ...recipe.builds import MAIN
from ...stagekit.stage import RunOptions
from ...ui import UI

_NINJA = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)")

class Display:
    """ninja's [N/M] drive the bar; CMake and pip lines name the phase; quiet spells get a heartbeat."""

    def __init__(self, task: ProgressTask, ui: UI, verbose: bool):
        self.task, self.ui, self.verbose = task, ui, verbose
        self.phase, self.done, self.total = "starting", 0.0, None

    def line(self, text: str) -> None:
        if self.verbose:
            self.ui.console.print(text, markup=False, highlight=False, soft_wrap=True)
        match = _NINJA.match(text)
        if match:
            self.phase, self.done, self.total = "compiling", float(match.group(1)), float(match.group(2))
            self._show(match.group(3))
            return
        if text.startswith("-- ") or text.startswith("CMake "):
            self.phase = "configuring"
        elif text.startswith(("Successfully installed", "Installing collected packages")):
            self.phase = "installing"
        self._show(text)

    def idle(self, seconds: float) -> None:
        self._show(f"quiet for {int(seconds)} s")

    def _show(self, text: str) -> None:
        # logs get a line per phase (and every few seconds); a terminal shows the latest line too
        detail = f"{self.phase}: {text[:80]}" if self.ui.interactive else self.phase
        self.task.update(self.done, self.total, detail=detail)


def run_command(argv: list[str], recipe: Recipe, logs_dir: Path, build_env: BuildEnv, ui: UI, options: RunOptions,
         cache_env: Mapping[str, str], name: str = MAIN) -> Any:
    assert recipe.build is not None
    log = log_path(logs_dir, "build" if name == MAIN else f"build-{name}")
    ui.info(f"+ {shlex.join(argv)}")
    ui.info(f"  in {recipe.build.cwd}; full output: {log}")
    header = [c.describe() for c in build_env.changes] + [  # the log never holds the cache's password
        f"{k}={redact(v)} (compile cache or farm)" for k, v in cache_env.items()]
    with ui.progress(f"building {recipe.name}") as task:
        display = Display(task, ui, options.verbose)
        return run_logged(argv, cwd=Path(recipe.build.cwd), env={**build_env.env, **cache_env}, log=log,
                          header=header, on_line=display.line, on_idle=display.idle)


def wheels_in(folder: Path | None) -> dict[Path, float]:
    return {p: p.stat().st_mtime for p in folder.glob("*.whl")} if folder and folder.is_dir() else {}


def new_wheel(folder: Path, before: dict[Path, float]) -> dict[str, Any]:
    fresh = [p for p in folder.glob("*.whl") if before.get(p) != p.stat().st_mtime]
    if not fresh:
        raise BuildError(f"the build succeeded but wrote no wheel into {folder}",
                         fix="check the recipe's build.wheel_argv writes to {wheel_dir}")
    wheel = max(fresh, key=lambda p: p.stat().st_mtime)
    return {"path": str(wheel), "size": wheel.stat().st_size, "sha256": hash_file(wheel)}


def duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes else f"{seconds:.1f}s"
