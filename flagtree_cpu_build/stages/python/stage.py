"""The python-environment stage (the guide's steps 1.1-1.2): the interpreter the build and the
kernels use — the workspace venv unless another is given — and the recipe's build and run-time
Python prerequisites in it. ``flagtree-cpu python`` runs it alone; ``setup`` runs it before build.

The interpreter questions (which distributions, which versions, pip) are ``pythonenv``'s; this
module decides what the stage wants and reports it. With ``--offline`` what is missing comes only from
the wheelhouse a `bundle import` left in the workspace; without one the stage stops and lists it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import BuildError
from ...stagekit.plan import PlanItem

if TYPE_CHECKING:
    from ...recipe import Requirement
    from ...stagekit.stage import RunOptions, StageContext, StageResult


def wanted(ctx: StageContext, runtime: bool, *, planning: bool = False) -> list[Requirement]:
    """The requirements to install; those of a requirements_file whose source was not checked out when the recipe
    was opened are read now (setup syncs first), or, ``planning``, left out (the plan says when they are read)."""
    from ...requirements_files import expanded, is_synced, read_entry

    python = ctx.recipe.python
    late: dict[str, list[Requirement]] = {"build": [], "runtime": []}
    for key, entry in python.files:
        if key not in python.unread:
            continue
        assert entry.requirements_file is not None
        if not is_synced(ctx.recipe, ctx.workspace.root, entry.requirements_file):
            if planning:
                continue
            raise BuildError(f"{key} reads {entry.requirements_file.file} from source "
                             f"{entry.requirements_file.source}, which is not checked out",
                             fix="flagtree-cpu sync   (then run the same command again)")
        read = read_entry(ctx.recipe, ctx.workspace.root, key, entry.requirements_file)
        late[key.split("[")[0].removeprefix("python.")] += expanded(read, entry)
    # run-time ones only when the checks will run: torch is a large download from an index that may
    # not be reachable, and with --skip-validate nothing here uses it
    return once(list(python.build) + late["build"] + (list(python.runtime) + late["runtime"] if runtime else []))


def once(requirements: list[Requirement]) -> list[Requirement]:
    """Each requirement once, in its first place: a project's requirements file (python.build) and the recipe's
    run-time list may both name pytest; the plan and pip are told it once. Requirements that only share a name
    (pytest, pytest>=8) both stay: each is checked."""
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Parsed

    seen: dict[tuple[str, str | None, str | None], Requirement] = {}
    for entry in requirements:
        try:
            text = str(Parsed(entry.requirement))  # one spelling of the same requirement (case, spaces)
        except InvalidRequirement:  # the recipe check reports it; keep it as written
            text = entry.requirement
        seen.setdefault((text.lower(), entry.index_url, entry.system_command), entry)
    return list(seen.values())


def unread_note(ctx: StageContext) -> str:
    """What the plan cannot list yet: the requirements files of sources sync has still to check out."""
    from ...requirements_files import describe_unread, is_synced

    files = dict(ctx.recipe.python.files)
    notes = [f"{key}: {describe_unread(files[key])}" for key in ctx.recipe.python.unread
             if not is_synced(ctx.recipe, ctx.workspace.root, files[key].requirements_file)]  # type: ignore[arg-type]
    return "; ".join(notes)


def _search_path(python: Path) -> str:
    return os.pathsep.join([str(python.parent), os.environ.get("PATH", "")])


def plan_python(ctx: StageContext, options: RunOptions) -> list[PlanItem]:
    """The python item, whose detail also says when the active venv was passed over as the tool's own."""
    from dataclasses import replace

    from ...workspace import own_venv_note
    from .uninstall import plan_uninstall

    items = _plan_items(ctx, options)
    later = unread_note(ctx)
    if later:
        items = [replace(item, detail=f"{item.detail}; {later}") for item in items]
    note = own_venv_note(ctx.workspace, options.python, os.environ)
    if note:
        items = [replace(item, detail=f"{item.detail}; {note}") for item in items]
    # after the prerequisites (which may pull in what it removes), unless the stage stops before them
    if any(i.will == "stop" for i in items):
        return items
    from ...python_sources import plan_source_entries

    return items + plan_source_entries(ctx, options.python, options.validating) + plan_uninstall(ctx, options.python)


def _plan_items(ctx: StageContext, options: RunOptions) -> list[PlanItem]:
    from ... import pythonenv

    recipe, ws = ctx.recipe, ctx.workspace
    python, requirements = options.python, wanted(ctx, options.validating, planning=True)
    conflicts = pythonenv.constraint_conflicts(recipe, requirements)
    if conflicts:  # the recipe contradicts itself: the run stops before the venv and pip (exit 2)
        return [PlanItem("python", str(python), "conflict", "; ".join(p.describe() for p in conflicts),
                         "stop: a requirement and a constraint of the recipe cannot both hold (python.constraints)",
                         "conflict", will="stop", stop=pythonenv.ConstraintConflict)]
    vendor = ", ".join(r.requirement for r in recipe.python.preinstalled)
    if not python.exists():
        if python != ws.venv_dir / "bin" / "python":
            return [PlanItem("python", str(python), "missing", "does not exist", "stop: --python must exist",
                             "missing", will="stop", stop=BuildError)]
        if vendor:  # a new venv cannot have what only the vendor's installer provides
            return [PlanItem("python", str(python), "missing", "no workspace venv yet", f"stop: {vendor} must be "
                             "provided by the vendor's installer (python.preinstalled); pass --python with the "
                             "interpreter that has it", "missing", will="stop", stop=BuildError)]
        names = ", ".join(r.requirement for r in requirements)
        return [PlanItem("python", str(python), "missing", "no workspace venv yet",
                         f"create the venv {ws.venv_dir}" + (f"; pip install {names}" if names else ""), "missing",
                         will="created")]
    report = pythonenv.check(python, requirements, _search_path(python), recipe=recipe)
    if report.unprovided:
        return [PlanItem("python", str(python), "missing", f"Python {report.version}; not provided: "
                         f"{', '.join(p.describe() for p in report.unprovided)}",
                         f"stop: {', '.join(p.requirement.requirement for p in report.unprovided)} must be provided "
                         "by the vendor's installer (python.preinstalled); pip never installs it", "missing",
                         {"unprovided": [p.name for p in report.unprovided]}, will="stop", stop=BuildError)]
    provided = "".join(f"; preinstalled {p.name} {p.installed}" for p in report.preinstalled)
    if not report.missing:
        return [PlanItem("python", str(python), "ok", f"Python {report.version}; {len(requirements)} "
                         f"prerequisites present{provided}")]
    limits = len(recipe.python.constraints)
    return [PlanItem("python", str(python), "missing", f"Python {report.version}; missing: "
                     f"{', '.join(p.describe() for p in report.missing)}{provided}",
                     f"pip install {' '.join(p.requirement.requirement for p in report.missing)}"
                     + (f" (within the recipe's {limits} constraints)" if limits else ""), "missing",
                     {"missing": [p.name for p in report.missing]}, "created")]


def run_python(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    """The venv and the prerequisites. The interpreter is asked again rather than trusted from ``plan``: the
    stages before this one (a stacked recipe's base) may have changed it since the plan was made."""
    from ... import pythonenv
    from ...installer import choose_for
    from ...stagekit.stage import Action, StageResult
    from ...workspace import own_venv_note
    from .uninstall import run_uninstall

    recipe, ws, python = ctx.recipe, ctx.workspace, options.python
    note = own_venv_note(ws, python, os.environ)
    if note:
        ctx.ui.info(note)
    requirements = wanted(ctx, options.validating)
    pythonenv.refuse_conflicts(recipe, requirements)  # a contradiction in the recipe: before the venv and pip
    if recipe.python.files and not options.frozen:
        record_reads(ctx)
    actions = []
    created = not python.exists()
    if created and python == ws.venv_dir / "bin" / "python" and recipe.python.preinstalled:
        # a new venv cannot have what only the vendor's installer provides: say so before making one
        pythonenv.require_preinstalled(pythonenv.PythonReport(python, "", (), {}, tuple(
            pythonenv.Prerequisite(r, None, None, False) for r in recipe.python.preinstalled)))
    pythonenv.ensure_interpreter(python, ws, recipe.python.requires, ctx.ui)
    if created:
        actions.append(Action("venv", "created", str(python.parent.parent)))
    path = _search_path(python)
    report = pythonenv.check(python, requirements, path, recipe=recipe)
    # checked with and without --offline alike: pip is never what provides them
    pythonenv.require_preinstalled(report)
    if report.preinstalled:
        actions.append(Action("preinstalled", "ok", ", ".join(f"{p.name} {p.installed}"
                                                             for p in report.preinstalled)))
    if report.missing:
        names = ", ".join(p.name for p in report.missing)
        installer = choose_for(recipe, options.installer, python)
        wheelhouse = pythonenv.install_missing(report, ws, ctx.ui,
                                               lambda: pythonenv.check(python, requirements, path, recipe=recipe),
                                               offline=options.offline, installer=installer)
        origin = f" from the wheelhouse {wheelhouse}" if wheelhouse else ""
        actions.append(Action("prerequisites", "created", f"installed {names}{origin} with {installer.name}",
                              {"installer": installer.name, **({"wheelhouse": str(wheelhouse)} if wheelhouse else {})}))
    else:
        actions.append(Action("prerequisites", "ok", f"Python {report.version}; all {len(requirements)} present"))
    from ...python_sources import install_source_entries

    actions += install_source_entries(ctx, python, options)  # built with the prerequisites' build tools
    actions += run_uninstall(ctx, python, options.installer)  # after the prerequisites: what they pulled in goes too
    if recipe.python.runtime and not options.validating:
        actions.append(Action("run-time prerequisites", "skipped", f"{options.runtime_flag}: not installed "
                              "(`flagtree-cpu validate --install-prereqs` installs them)"))
    return StageResult("python", tuple(actions))


def record_reads(ctx: StageContext) -> None:
    """Write what each requirements_file entry read into the lock (the file, its includes' digests, the source's
    commit as the lock has it, the requirements)."""
    from dataclasses import replace

    from ...lockfile import RequirementsFileLock, update_lock
    from ...requirements_files import read_entry

    recipe, ws = ctx.recipe, ctx.workspace
    entries = {}
    for key, entry in recipe.python.files:
        rf = entry.requirements_file
        assert rf is not None
        read = read_entry(recipe, ws.root, key, rf)
        entries[key] = (rf, read)

    def change(lock):  # type: ignore[no-untyped-def]
        commit = {name: s.commit for name, s in lock.sources.items()}
        return replace(lock, requirements_files={
            key: RequirementsFileLock(source=rf.source, file=rf.file, commit=commit.get(rf.source),
                                      files=dict(read.files), requirements=read.requirements)
            for key, (rf, read) in entries.items()})

    update_lock(ws.lock_file, recipe.name, recipe.digest, change, variant=recipe.variant)
