"""One context for every command: the recipe (overrides applied, this host's artifact variants
selected, placeholders filled in), the workspace it applies to, the host, and the UI.

Every command opens its context here — the stage commands, `status`, `doctor`, `env`, `clean`,
`recipe show`'s resolved view — so they all see the same recipe in the same workspace. The
assembly order matters and lives only here: load (with --set), select variants for the host,
compute the placeholder values (which depend on the selected build section's memory settings),
then resolve.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .workspace import Workspace, default_workdir, open_workspace, target_python

if TYPE_CHECKING:
    from .host import HostFacts
    from .recipe import Recipe
    from .stagekit.stage import StageContext
    from .ui import UI
    from .workspace_recipe import Recorded


@dataclass(frozen=True)
class ContextRequest:
    """What the command line says about the context (the global options and a command's own)."""

    recipe: str | None  # a name from `recipe list`, or a YAML file; None: the workspace's own, else the default
    overrides: tuple[str, ...] = ()  # --set KEY=VALUE
    recipes_dirs: tuple[str, ...] = ()  # --recipes-dir (FLAGTREE_CPU_RECIPES is read by the loader)
    workdir: str | None = None  # --workdir / FLAGTREE_CPU_WORKDIR; None: the workspace around the current folder
    lock_file: str | None = None  # --lock-file / FLAGTREE_CPU_LOCK_FILE
    python: Path | None = None  # --python; None: the active venv, else the workspace venv
    jobs: int | None = None  # --jobs; None: from cores and memory
    farm_slots: int = 0  # a compile farm's slots in use, added to each build's {jobs} (compile_farm.py)
    wheel_dir: Path | None = None  # build --wheel DIR
    sysroot: Path = Path("/")  # whose /etc and /proc describe the host (doctor --sysroot: a board's snapshot)
    variant: str | None = None  # --variant; None: the recipe's default
    host: HostFacts | None = None  # the machine to resolve for, when known otherwise than by a sysroot (a wheel tag)
    command: tuple[str, ...] = ()  # the command and its own arguments as typed, for fixes that repeat it


@dataclass(frozen=True)
class ResolvedView:
    """`recipe show`'s resolved recipe and the line that says for what it was resolved."""

    recipe: Recipe  # as loaded (overrides applied, nothing resolved): file, digest and warnings come from it
    shown: Recipe  # variants selected and placeholders filled in
    context: str  # "resolved for workdir ... on aarch64 ubuntu (8 jobs)"


def chosen_python(request: ContextRequest, ws: Workspace) -> Path:
    """The target interpreter: --python (absolute), else an active venv, else the workspace's own venv."""
    if request.python is not None:
        return Path(os.path.abspath(request.python.expanduser()))
    return target_python(ws, os.environ)


def requested_recipe(request: ContextRequest) -> Recipe:
    """The recipe as written, with --set overrides applied (validated like the file)."""
    from .recipe.files import DEFAULT_RECIPE, load_recipe, user_recipe_dirs

    return load_recipe(request.recipe or DEFAULT_RECIPE, request.overrides, user_recipe_dirs(request.recipes_dirs),
                       request.variant)


def recipe_and_workspace(request: ContextRequest, *, check: bool = True) -> tuple[Recipe, Workspace, ContextRequest]:
    """The recipe this request means on its workspace, the workspace, and the request as the workspace completed
    it. The workspace's record (``workspace_recipe``) supplies what the command line left out; a recipe or variant
    other than the recorded one is refused (``check``) before anything is read from the workspace. Outside every
    workspace the recipe names the folder (./flagtree-workspace, ./<recipe>-workspace)."""
    from dataclasses import replace

    from .workspace import located_workspace
    from .workspace_recipe import record_of, recorded, refuse_another, stacked_with

    root = located_workspace(request.workdir)
    loaded = requested_recipe(request) if root is None and request.recipe is not None else None
    if root is None:  # outside every workspace: the recipe names the folder
        root = Path.cwd() / default_workdir(_folder_name(loaded, request) if loaded is not None else None)
    found = recorded(root)
    completed = _recipe_from(request, found)
    if loaded is None or completed != request:
        loaded = requested_recipe(completed)
    mine = _own_options(completed, request, found, loaded)  # the workspace's recipe: its variant and lock too
    if mine != completed:
        completed, loaded = mine, requested_recipe(mine)
    ws = open_workspace(root, completed.lock_file)
    stacked = stacked_with(loaded, found, lambda recipe: _bases(recipe, request), lambda: requested_recipe(
        replace(request, recipe=found.recipe_arg if found else None, variant=found.variant if found else None,
                overrides=())))
    if check:
        refuse_another(loaded, found, ws, request.command, stacked)
    # a base run on its stack's workspace leaves the record naming the top of the stack
    record = found.record if stacked == "below" and found is not None else record_of(loaded, ws.lock_path)
    return loaded, replace(ws, record=record), completed


def _recipe_from(request: ContextRequest, found: Recorded | None) -> ContextRequest:
    """``request`` naming the workspace's recipe when the command line names none."""
    if found is None or request.recipe is not None:
        return request
    from dataclasses import replace

    return replace(request, recipe=found.recipe_arg)


def _own_options(completed: ContextRequest, given: ContextRequest, found: Recorded | None,
                loaded: Recipe) -> ContextRequest:
    """When ``loaded`` is the workspace's recipe (by name: an edited or moved file is still it), the recorded
    variant and lock where the command line gave none."""
    if found is None or loaded.name != found.recipe:
        return completed
    from dataclasses import replace

    return replace(completed, variant=given.variant if given.variant is not None else found.variant,
                   lock_file=given.lock_file or found.lock_file)


def _folder_name(loaded: Recipe, request: ContextRequest) -> str:
    """What names a recipe's default workspace folder: a stacked recipe lives in its bottom base's workspace
    (FlagGems goes on the FlagTree set up from the same folder, not on a second clone of it); a variant other
    than the recipe's own default gets a folder of its own (a workspace is set up for one variant)."""
    from dataclasses import replace

    bases = _bases(loaded, request)
    if bases:
        return bases[-1]
    if request.variant and loaded.variants and request.variant != requested_recipe(
            replace(request, variant=None)).variant:
        return f"{loaded.name}-{request.variant}"
    return loaded.name


def _bases(recipe: Recipe, request: ContextRequest) -> list[str]:
    """The names of the recipes ``recipe`` is stacked on (``extends``, followed down; locate refuses a cycle)."""
    from .recipe.files import load_base, user_recipe_dirs

    names: list[str] = []
    while recipe.extends is not None and len(names) < 64:
        recipe = load_base(recipe, user_recipe_dirs(request.recipes_dirs))
        if recipe.name in names:  # a circle: opening the stack refuses it (exit 2); here it only ends the walk
            break
        names.append(recipe.name)
    return names


def resolve_for(loaded: Recipe, request: ContextRequest, ws: Workspace, host: HostFacts) -> tuple[Recipe, str]:
    """``loaded`` for this workspace and host, and the jobs count its placeholders got."""
    from .placeholders import placeholder_values
    from .recipe import resolve, select_variants
    from .recipe.selector import uses_compiler
    from .requirements_files import with_requirements_files

    if uses_compiler(loaded) and request.sysroot == Path("/"):  # only this machine's compiler can be asked
        from dataclasses import replace

        from .compiler_facts import host_compiler

        loaded = replace(loaded, host_compiler=host_compiler())
    selected = select_variants(loaded, host.os_id, host.arch, host.glibc, host.os_version_id)
    values = placeholder_values(selected, ws, host, os.environ, jobs=request.jobs, farm_slots=request.farm_slots,
                                python=chosen_python(request, ws) if request.python else None,
                                wheel_dir=request.wheel_dir)
    reads = reads_of(selected, ws)
    if any(a.choosing for a in selected.artifacts.values()) and reads:  # a variant chosen by a value read
        selected = select_variants(loaded, host.os_id, host.arch, host.glibc, host.os_version_id, reads)
        reads = reads_of(selected, ws)
    # a project's own requirements files, read from its checkout (those not synced yet: by the python stage)
    from .python_sources import with_source_entries

    resolved = with_source_entries(with_requirements_files(resolve(selected, ws.root, values, os.environ, reads),
                                                           ws.root))
    if request.sysroot != Path("/"):  # another machine's: its toolkits are not here
        return resolved, values["jobs"]
    from .toolchain_search import with_located

    return with_located(resolved, lambda found: with_source_entries(with_requirements_files(
        resolve(selected, ws.root, values, os.environ, reads, located=found), ws.root)),
        host=host, python=Path(values["python"]), environ=os.environ), values["jobs"]


def reads_of(selected: Recipe, ws: Workspace) -> dict[str, str]:
    """The values ``selected``'s artifacts read from sources' files, as far as they can be read now (a source not
    checked out yet: the lock's, else read after sync)."""
    from .recipe.reads import names_used

    if not any(names_used(a) for a in selected.artifacts.values()):
        return {}
    from .errors import UsageError
    from .lockfile import read_lock
    from .source_reads import read_all

    try:
        lock = read_lock(ws.lock_file)
    except UsageError:  # a damaged lock is reported by whoever reads it for its own sake (doctor, sync, fetch)
        lock = None
    return read_all(selected, ws.root, lock).by_marker()


def open_context(request: ContextRequest, ui: UI) -> StageContext:
    """The recipe resolved for the workspace and host the request names: what every stage is given."""
    from .host import read_host
    from .recipe.upgrade import note_upgraded
    from .workspace_recipe import invocation_of

    loaded, ws, request = recipe_and_workspace(request)
    ui.invocation = invocation_of(loaded, ws)  # the context every command it prints carries
    note_upgraded(ui, loaded)  # a version 1 file: one line on stderr saying `recipe upgrade` rewrites it
    host = request.host or read_host(request.sysroot)
    return _context_of(loaded, request, ws, host, ui)


def _context_of(loaded: Recipe, request: ContextRequest, ws: Workspace, host: HostFacts, ui: UI) -> StageContext:
    """``loaded`` resolved for ``ws``, and the way to resolve it again (values read from sources' files change
    when sync moves a source)."""
    from dataclasses import replace

    def reopen(farm_slots: int | None = None) -> StageContext:
        asked = request if farm_slots is None else replace(request, farm_slots=farm_slots)
        return _context_of(loaded, asked, ws, host, ui)

    return replace(_resolved_context(loaded, request, ws, host, ui), reopen=reopen)


def _resolved_context(loaded: Recipe, request: ContextRequest, ws: Workspace, host: HostFacts,
                      ui: UI) -> StageContext:
    """``loaded`` resolved for ``ws``; a stacked recipe (``extends``) gets its base opened first, for the same
    workspace, and then its own state folder and the constraints that protect the base."""
    from dataclasses import replace

    from .recipe.files import load_base, user_recipe_dirs
    from .stacking import constrained, own_constraints, restack, with_pip_constraint
    from .stagekit.stage import StageContext

    if loaded.extends is None:
        recipe, _ = resolve_for(loaded, request, ws, host)
        return StageContext(with_pip_constraint(recipe, ws), ws, host, ui)
    # the base as its own file says (no --set, its default variant), bound by the stack's constraints too
    base = constrained(load_base(loaded, user_recipe_dirs(request.recipes_dirs)),
                       own_constraints(loaded, "stacked on it by"))
    base_ws = replace(ws, layer=base.name if base.extends else None, lock_path=None)
    base_request = replace(request, recipe=base.file, overrides=(), variant=None, lock_file=None)
    base_ctx = _context_of(base, base_request, base_ws, host, ui)
    top_ws = replace(ws, layer=loaded.name)
    top, _ = resolve_for(loaded, request, top_ws, host)
    top = constrained(top, own_constraints(base_ctx.recipe, "needed by"))
    top = replace(with_pip_constraint(top, top_ws), base=base_ctx.recipe)
    return restack(StageContext(top, top_ws, host, ui, base=base_ctx))


def resolved_view(request: ContextRequest, name: str | None = None) -> ResolvedView:
    """The lighter context of `recipe show`: the recipe ``name`` (default: the request's) resolved for the
    workspace and host, without a UI or a stage context."""
    from dataclasses import replace

    from .host import read_host

    if name is not None:
        request = replace(request, recipe=name)
    # `recipe show NAME` shows any recipe as it would resolve there; the workspace's own is only the default
    loaded, ws, request = recipe_and_workspace(request, check=name is None)
    host = request.host or read_host(request.sysroot)
    shown, jobs = resolve_for(loaded, request, ws, host)
    context = f"resolved for workdir {ws.root} on {host.arch} {host.os_id or 'unknown-os'} ({jobs} jobs)"
    return ResolvedView(loaded, shown, context)
