"""``python.build``/``runtime`` entries that pip installs from a recipe source's checkout (``{source: NAME, subdir:
REL}``): a test dependency the project pins by a git tag (a Python package of googletest's), pinned here by the
source's commit and carried in a bundle as every source is.

A checkout is installed once per commit: the commit, the folder and the interpreter are kept in the recipe's state
(``python-sources.json``), and a run that finds them unchanged does nothing. pip builds in the folder it is given,
so the checkout is copied (without ``.git``) into a half-made folder first: the user's checkout gets no build/ nor
.egg-info, and a killed run leaves only a folder the next run sweeps. The build uses the target Python's own build
tools (``--no-build-isolation``: setuptools listed before it), so ``--offline`` needs no index; the project's own
dependencies then come from the imported wheelhouse, or must be there already."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import BuildError
from .stagekit.plan import PlanItem

if TYPE_CHECKING:
    from .recipe import Recipe, Requirement
    from .stagekit.stage import Action, RunOptions, StageContext

STATE = "python-sources.json"
MAX_STATE_BYTES = 1 << 20


def with_source_entries(recipe: Recipe) -> Recipe:
    """The recipe whose `source` entries are moved from python.build/runtime to ``python.from_sources`` (by key:
    python.build[3]): the lists the rest of the tool reads name distributions, these a folder."""
    python = recipe.python
    found = tuple((f"python.{key}[{i}]", e) for key in ("build", "runtime") for i, e in enumerate(getattr(python, key))
                  if e.source is not None)
    if not found:
        return recipe
    kept = {key: tuple(e for e in getattr(python, key) if e.source is None) for key in ("build", "runtime")}
    return replace(recipe, python=replace(python, build=kept["build"], runtime=kept["runtime"], from_sources=found))


def _wanted(ctx: StageContext, runtime: bool) -> list[tuple[str, Requirement]]:
    return [(key, e) for key, e in ctx.recipe.python.from_sources if runtime or key.startswith("python.build")]


def _folder(ctx: StageContext, entry: Requirement) -> tuple[Path, Path]:
    assert entry.source is not None
    checkout = ctx.workspace.root / ctx.recipe.source_path(entry.source)
    return checkout, checkout / (entry.subdir or "")


def _state(ctx: StageContext) -> dict[str, dict[str, str]]:
    """What was installed, by key; anything unreadable is nothing (the entries are installed again)."""
    from .regular_file import read_regular

    try:
        data = json.loads(read_regular(ctx.workspace.recipe_state / STATE, MAX_STATE_BYTES))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _record(ctx: StageContext, key: str, entry: dict[str, str]) -> None:
    from .atomic import write_atomic

    state = {**_state(ctx), key: entry}
    write_atomic(ctx.workspace.recipe_state / STATE, json.dumps(state, indent=1, sort_keys=True) + "\n")


def _want(ctx: StageContext, python: Path, key: str, entry: Requirement) -> tuple[dict[str, str] | None, str]:
    """What installing ``entry`` would record (None: its source is not checked out), and what to say about it."""
    from .gitcmd import head

    checkout, folder = _folder(ctx, entry)
    commit = head(checkout)
    if commit is None:
        return None, f"{key}: installs source {entry.source}'s checkout once sync has made it"
    record = {"commit": commit, "folder": str(folder), "python": str(python)}
    return record, f"{key}: {entry.source} at {commit[:12]} ({folder})"


def plan_source_entries(ctx: StageContext, python: Path, runtime: bool) -> list[PlanItem]:
    items = []
    state = _state(ctx)
    for key, entry in _wanted(ctx, runtime):
        record, said = _want(ctx, python, key, entry)
        if record is not None and state.get(key) == record:
            items.append(PlanItem("python", key, "ok", f"{said}: installed"))
        else:
            items.append(PlanItem("python", key, "missing", said, f"pip install {entry.source}'s checkout",
                                  "not installed at this commit", will="created"))
    return items


def install_source_entries(ctx: StageContext, python: Path, options: RunOptions) -> list[Action]:
    """pip install each source entry whose checkout, commit or interpreter changed since it was installed."""
    from .stagekit.stage import Action

    actions = []
    state = _state(ctx)
    for key, entry in _wanted(ctx, options.validating):
        record, said = _want(ctx, python, key, entry)
        if record is None:
            raise BuildError(f"{key} installs source {entry.source}, which is not checked out",
                             fix="flagtree-cpu sync   (then run the same command again)")
        if state.get(key) == record:
            actions.append(Action(key, "ok", said))
            continue
        _install(ctx, python, key, entry, options)
        _record(ctx, key, record)
        actions.append(Action(key, "created", f"installed from {said}"))
    return actions


def _install(ctx: StageContext, python: Path, key: str, entry: Requirement, options: RunOptions) -> None:
    from .installer import InstallFlags, choose_for
    from .partials import PartialFolder, sweep
    from .pip_constraints import constraints_file
    from .proc import log_path, run_logged
    from .pythonenv import _plain_env, offline_wheelhouse

    checkout, folder = _folder(ctx, entry)
    try:  # the subdir may be a link in the checkout: only the checkout's own folders are installed
        inside = folder.resolve().relative_to(checkout.resolve())
    except (ValueError, OSError):
        inside = None
    if inside is None or not folder.is_dir():
        raise BuildError(f"{key}: {folder} is not a folder inside source {entry.source}'s checkout",
                         fix=f"correct {key}.subdir to a folder of {entry.source} that holds setup.py or "
                         "pyproject.toml")
    parent = ctx.workspace.recipe_state / "python-sources"
    sweep(parent, ctx.ui.info, ctx.ui.warn)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)
    partial = PartialFolder.create(parent / safe)
    try:
        with partial.writing():
            shutil.copytree(folder, partial.tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        installer = choose_for(ctx.recipe, options.installer, python)
        argv = installer.install_argv(python, [str(partial.tree)], InstallFlags(
            no_build_isolation=True, no_index=options.offline,
            find_links=offline_wheelhouse(ctx.workspace) if options.offline else None,
            constraints=constraints_file(ctx.recipe, ctx.workspace)))
        ctx.ui.info(f"+ {' '.join(argv)}")
        result = run_logged(argv, cwd=ctx.workspace.root, env=installer.env(_plain_env()),
                            log=log_path(ctx.workspace.logs_dir, "python-sources"))
    finally:
        partial.remove()
    if not result.ok:
        raise BuildError(f"{installer.name} could not install {key} (source {entry.source}, {folder})",
                         details=(f"log: {result.log}",),
                         fix="read the log; a project built with --no-build-isolation needs its build tools in "
                         "the target Python: list them (setuptools, wheel) in python.build before this entry")
