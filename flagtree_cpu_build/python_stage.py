"""The python-environment stage (the guide's steps 1.1-1.2): the interpreter the build and the
kernels use — the workspace venv unless another is given — and the recipe's build and run-time
Python prerequisites in it. ``flagtree-cpu python`` runs it alone; ``setup`` runs it before build.

The interpreter questions (which distributions, which versions, pip) are ``pythonenv``'s; this
module decides what the stage wants and reports it.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .plans import PlanItem

if TYPE_CHECKING:
    from .recipe import Requirement
    from .stages import StageContext, StageResult


@dataclass(frozen=True)
class PythonOptions:
    python: Path
    offline: bool = False
    runtime: bool = True  # the run-time prerequisites too (false with --skip-validate: nothing runs kernels)
    no_runtime_flag: str = "--skip-validate"  # the option that turned them off, for the report


def wanted(ctx: StageContext, runtime: bool) -> list[Requirement]:
    # run-time ones only when the kernels will run: torch is a large download from an index that may
    # not be reachable, and with --skip-validate nothing here uses it
    return list(ctx.recipe.python.build) + (list(ctx.recipe.python.runtime) if runtime else [])


def _search_path(python: Path) -> str:
    return os.pathsep.join([str(python.parent), os.environ.get("PATH", "")])


def plan_python(ctx: StageContext, python: Path, *, runtime: bool = True) -> list[PlanItem]:
    from . import pythonenv

    ws = ctx.workspace
    requirements = wanted(ctx, runtime)
    if not python.exists():
        if python != ws.venv_dir / "bin" / "python":
            return [PlanItem("python", str(python), "missing", "does not exist", "stop: --python must exist",
                             "missing", will="stop", exit_code=5)]
        names = ", ".join(r.requirement for r in requirements)
        return [PlanItem("python", str(python), "missing", "no workspace venv yet",
                         f"create the venv {ws.venv_dir}" + (f"; pip install {names}" if names else ""), "missing",
                         will="created")]
    report = pythonenv.check(python, requirements, _search_path(python))
    if not report.missing:
        return [PlanItem("python", str(python), "ok", f"Python {report.version}; {len(requirements)} "
                         "prerequisites present")]
    return [PlanItem("python", str(python), "missing", f"Python {report.version}; missing: "
                     f"{', '.join(p.describe() for p in report.missing)}",
                     f"pip install {' '.join(p.requirement.requirement for p in report.missing)}", "missing",
                     {"missing": [p.name for p in report.missing]}, "created")]


def run_python(ctx: StageContext, options: PythonOptions) -> StageResult:
    from . import pythonenv
    from .errors import BuildError
    from .stages import Action, StageResult

    recipe, ws, python = ctx.recipe, ctx.workspace, options.python
    actions = []
    created = not python.exists()
    pythonenv.ensure_interpreter(python, ws, recipe.python.requires, ctx.ui)
    if created:
        actions.append(Action("venv", "created", str(python.parent.parent)))
    requirements = wanted(ctx, options.runtime)
    path = _search_path(python)
    report = pythonenv.check(python, requirements, path)
    if report.missing:
        commands = pythonenv.install_commands(python, report.missing)
        if options.offline:
            raise BuildError(f"{len(report.missing)} Python prerequisites are missing in {python} and "
                             "--offline forbids pip", details=tuple(p.describe() for p in report.missing),
                             fix=" && ".join(shlex.join(c) for c in commands) + "   (with PIP_FIND_LINKS=<wheel "
                             "folder> PIP_NO_INDEX=1 on an air-gapped machine), then run the same command again")
        names = ", ".join(p.name for p in report.missing)
        pythonenv.install_and_recheck(report, ws, ctx.ui, lambda: pythonenv.check(python, requirements, path))
        actions.append(Action("prerequisites", "created", f"installed {names}"))
    else:
        actions.append(Action("prerequisites", "ok", f"Python {report.version}; all {len(requirements)} present"))
    if recipe.python.runtime and not options.runtime:
        actions.append(Action("run-time prerequisites", "skipped", f"{options.no_runtime_flag}: not installed "
                              "(`flagtree-cpu validate --install-prereqs` installs them)"))
    return StageResult("python", tuple(actions))
