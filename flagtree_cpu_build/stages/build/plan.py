"""The build's plan: whether the last build is current, why `build` would run, and the facts its run acts on.

The freshness decision lives here. ``judge`` reads the stamp, checks the inputs, the interpreter and its
prerequisites, computes the stamp this build would write and compares (``build_stamp.stale_reasons``): the answer
is a ``BuildPlan`` with the mode, the components and the reasons as values, whose words ``build_stamp.say``
makes. ``build.run_build`` receives the plan and acts on it; it compares with the stamp itself only where the plan
could not (no interpreter, prerequisites or environment yet: ``BuildPlan.decided``), by the same rule.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import pythonenv
from ...build_stamp import (
    STAMP_KEYS,
    UNDECIDED,
    EnvUnreadable,
    InputsNotReady,
    NeedsFirst,
    NoInterpreter,
    NoPreviousBuild,
    PrerequisitesMissing,
    Reason,
    Unresolved,
    build_mode,
    build_view,
    say,
    stale_reasons,
    stamp_components,
    stamp_path,
)
from ...buildenv import BuildEnv, applicable_toolchains, build_environment, toolchain_missing, toolchain_shortfall
from ...cmakeargs import fetchcontent_problems
from ...envops import EnvFileError, SourceScriptError
from ...lockfile import read_lock
from ...pythonenv import PythonReport
from ...recipe.builds import MAIN, final_build, named_builds, needed_by
from ...recipe.resolve import toolchain_override_var
from ...stacking import base_problems
from ...stagekit.plan import PlanItem
from ...stagekit.stage import RunOptions, StageContext
from ...state import read_state
from ...wheelhouse import configured, imported_wheelhouse
from ..artifacts import plan_artifacts
from ..links import plan_links
from ..sources import plan_sources

if TYPE_CHECKING:
    from ...recipe import Recipe


# --- the facts the run acts on ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildPlan:
    """What the build's plan found, computed once with the run's own options (python, offline, wheel_dir, force)."""

    mode: str  # "editable" or "wheel" (build_stamp.build_mode): which command and which stamp
    stamp_file: Path
    stored: dict[str, Any] | None  # the stamp there; None: none, or damaged
    reasons: tuple[Reason, ...]  # why the build would run; empty: it is up to date
    problems: tuple[str, ...] = ()  # inputs the build refuses to run without, each with what provides it
    build_env: BuildEnv | None = None  # None: not made (inputs or interpreter missing, or it failed)
    report: PythonReport | None = None  # the prerequisites, read in that environment
    components: dict[str, Any] | None = None  # the stamp this build would write, when it could be computed
    needs: dict[str, Any] = field(default_factory=dict)  # the components of the builds it needs, by name

    @property
    def current(self) -> bool:
        return not self.reasons

    @property
    def decided(self) -> bool:
        """False when the stamp could not be compared (no interpreter, prerequisites or environment yet): the run
        compares once it has prepared them."""
        return not any(isinstance(r, UNDECIDED) for r in self.reasons)


@dataclass(frozen=True)
class BuildItem(PlanItem):
    """One build's plan item (its subject is the build's name); ``facts`` is what its run acts on (never in the
    JSON: the words made from it are)."""

    facts: BuildPlan | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Assumed:
    """The inputs as sync and fetch will bring them in (as their plans say): the dry run judges the build against
    them instead of refusing while they are not there."""

    sources: dict[str, str]  # name -> commit
    artifacts: dict[str, str]  # name -> sha256
    unknown: tuple[Unresolved, ...] = ()


def plan_build(ctx: StageContext, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    """``earlier``: the plans of the stages before (when one is not current, the build is judged as it will be
    once they have run; the run's own plan has none, as the stages before it have run). Judged with the options
    the run gets: its interpreter, --offline, --wheel DIR and --force."""
    builds = named_builds(ctx.recipe)
    if not builds:
        return []
    final = final_build(ctx.recipe)
    asked = _wheelhouse_note(ctx, options)
    if options.skip_build:
        return [PlanItem("build", "build", "skipped", "--skip-build", will="skipped")]
    ready = all(i.current for i in earlier)
    assume = None if ready else _pinned_inputs(earlier)
    items: list[PlanItem] = []
    planned: dict[str, BuildPlan] = {}
    for name in chosen_builds(ctx.recipe, options.build.only):
        needs = {n: planned[n].components if n in planned else stored_components(ctx, n)
                 for n in builds[name].needs}
        facts = judge(view_of(ctx, name), options.python, offline=options.offline, force=options.force,
                      wheel_dir=options.build.wheel_dir if name == final else None, assume=assume, name=name,
                      needs=needs)
        planned[name] = facts
        items.append(_item(facts, ready, asked if name == final else "", name))
    return items


def chosen_builds(recipe: Recipe, only: str | None) -> list[str]:
    """The builds a run makes, in order: all of them, or with `build --only NAME` that one and the builds it needs
    (each still skipped when current)."""
    if only is None:
        return list(named_builds(recipe))
    builds = named_builds(recipe)
    if only not in builds:
        from ...errors import UsageError
        from ...recipe.schema import suggest

        raise UsageError(f"recipe {recipe.name} has no build named {only!r}{suggest(only, builds)}",
                         fix=f"name one of its builds: {', '.join(builds)}")
    return needed_by(recipe, only)


def view_of(ctx: StageContext, name: str) -> StageContext:
    """The stage context as the build ``name`` sees it (``build_stamp.build_view``)."""
    return replace(ctx, recipe=build_view(ctx.recipe, name)) if ctx.recipe.builds else ctx


def stored_components(ctx: StageContext, name: str) -> dict[str, Any] | None:
    """What the last build ``name`` was made from (its stamp); None: it has not been built (or it is damaged)."""
    view = view_of(ctx, name)
    stored = read_state(stamp_path(view.recipe, ctx.workspace, build_mode(view.recipe, None), name), needs=STAMP_KEYS)
    return stored["components"] if stored is not None else None


def _item(facts: BuildPlan, ready: bool, asked: str, name: str = MAIN) -> BuildItem:
    stored = facts.stored
    if stored is None:
        return BuildItem("build", name, "missing", "no build stamp in this workspace", "build",
                         "no previous build" + asked, will="created", facts=facts)
    data = {"stamp": stored["digest"]}
    came = _came_from(stored)
    if came:
        data["origin"] = stored["origin"]
    if facts.current:
        why = "up to date" if ready else "the stages above restore what it was built from"
        return BuildItem("build", name, "ok", f"{why} (stamp {stored['digest'][:12]}{came})", data=data,
                         facts=facts)
    words = [say(r, ahead=not ready) for r in facts.reasons]
    return BuildItem("build", name, "stale", f"stamp {stored['digest'][:12]} differs", "build",
                     "; ".join(words) + asked, {**data, "reasons": words}, "updated", facts=facts)


# --- the freshness rule ------------------------------------------------------------------------------------------


def judge(ctx: StageContext, python: Path, *, offline: bool = False, wheel_dir: Path | None = None,
          force: bool = False, assume: Assumed | None = None, name: str = MAIN,
          needs: dict[str, dict[str, Any] | None] | None = None) -> BuildPlan:
    """Whether the build ``name`` (``ctx`` is its view: ``view_of``) is current, and why not (read-only). With
    ``assume`` the build is judged as it will be once sync and fetch have brought those inputs in (the dry run),
    instead of refusing while they are not there. ``needs``: the components of the builds it needs (None: not
    known until that one has run)."""
    recipe = ctx.recipe
    assert recipe.build is not None
    mode = build_mode(recipe, wheel_dir)
    stamp_file = stamp_path(recipe, ctx.workspace, mode, name)
    plan = BuildPlan(mode, stamp_file, read_state(stamp_file, needs=STAMP_KEYS), (), needs=needs or {})
    if assume is not None and (assume.unknown or plan.stored is None):  # nothing to compare with before they run
        return replace(plan, reasons=assume.unknown or (NoPreviousBuild(),))
    problems = refusals(ctx) if assume is None else ()
    if problems:
        return replace(plan, reasons=(InputsNotReady(problems),), problems=problems)
    unknown = [n for n, c in (needs or {}).items() if c is None]
    if unknown:  # compared once the build it needs has run
        return replace(plan, reasons=(NoPreviousBuild(),) if plan.stored is None else (NeedsFirst(unknown[0]),))
    if not python.exists():
        return replace(plan, reasons=(NoInterpreter(python),))
    return _compare(ctx, plan, python, offline=offline, force=force, assume=assume)


def _compare(ctx: StageContext, plan: BuildPlan, python: Path, *, offline: bool, force: bool,
             assume: Assumed | None) -> BuildPlan:
    recipe = ctx.recipe
    try:
        build_env = build_environment(recipe, python, offline=offline, host=ctx.host, workdir=ctx.workspace.root)
    except (EnvFileError, SourceScriptError) as err:
        return replace(plan, reasons=(EnvUnreadable(err.message),))
    report = check_prerequisites(recipe, python, build_env, plan.mode)
    plan = replace(plan, build_env=build_env, report=report)
    lacking = [*report.missing, *report.unprovided]
    if lacking:
        return replace(plan, reasons=(PrerequisitesMissing(tuple(p.name for p in lacking)),))
    components = stamp_components(recipe, ctx, python, build_env, report, plan.mode, plan.needs)
    if assume is not None:
        components = _as_assumed(components, assume)
    return replace(plan, components=components,
                   reasons=stale_reasons(ctx, python, plan.stored, components, report, force=force))


def check_prerequisites(recipe: Recipe, python: Path, build_env: BuildEnv, mode: str) -> PythonReport:
    """The build prerequisites in ``python`` (or on the build's PATH), and the distributions the build must find
    installed: the one an editable build installs (a wheel installs nothing), those a stacked recipe keeps."""
    assert recipe.build is not None
    own = [recipe.build.distribution] if recipe.build.distribution and mode == "editable" else []
    return pythonenv.check(python, recipe.python.build, build_env.env.get("PATH", ""),
                 also=list(dict.fromkeys([*own, *recipe.keep_installed])), recipe=recipe)


def _as_assumed(components: dict[str, Any], assume: Assumed) -> dict[str, Any]:
    # only the build's own inputs (a build with `inputs` records some of them)
    sources = {name: {**components["sources"].get(name, {}), "commit": commit}
               for name, commit in assume.sources.items() if name in components["sources"]}
    artifacts = {name: sha for name, sha in assume.artifacts.items() if name in components["artifacts"]}
    return {**components, "sources": {**components["sources"], **sources},
            "artifacts": {**components["artifacts"], **artifacts}}


def _pinned_inputs(earlier: list[PlanItem]) -> Assumed:
    """The commits and digests sync and fetch will bring in (as their plans say); and what cannot be known before
    they run."""
    sources, artifacts, unknown = {}, {}, []
    for item in earlier:
        if item.area == "sources":
            if item.data.get("pin"):
                sources[item.subject] = str(item.data["pin"])
            else:
                unknown.append(Unresolved("sources", item.subject, item.action))
        elif item.area == "artifacts":
            if item.data.get("sha256"):
                artifacts[item.subject] = str(item.data["sha256"])
            else:
                unknown.append(Unresolved("artifacts", item.subject, item.action))
    return Assumed(sources, artifacts, tuple(unknown))


# --- what the build refuses to run without ----------------------------------------------------------------------


def refusals(ctx: StageContext) -> tuple[str, ...]:
    """Every input the build refuses to run without, each with what provides it: a stacked recipe's base, the
    inputs (``missing_inputs``) and, when those are there, the recipe's links."""
    problems = [*base_problems(ctx), *missing_inputs(ctx)]
    if ctx.recipe.links is not None and not problems:
        problems += _link_problems(ctx)
    return tuple(problems)


def missing_inputs(ctx: StageContext) -> list[str]:
    """Sources sync would still move, artifacts fetch would still publish, build prerequisites a requirements file
    of a source not checked out yet names, pre-provisioned toolchains that are not on this host; a FetchContent
    dependency's input says so, and a FetchContent folder that is not usable is listed."""
    listed = fetchcontent_problems(ctx.recipe, ctx.workspace.root, _source_problems(ctx) + _artifact_problems(ctx))
    return listed + _unread_requirements(ctx) + _toolchain_problems(ctx)


def _unread_requirements(ctx: StageContext) -> list[str]:
    """python.build entries whose requirements file is in a source sync has still to check out: what they name is
    not known, so the prerequisites listed beside them cannot be all of them."""
    from ...requirements_files import describe_unread, is_synced

    python = ctx.recipe.python
    files = dict(python.files)
    return [f"{key}: {describe_unread(files[key])} — run `flagtree-cpu sync`" for key in python.unread
            if key.startswith("python.build[") and key in files
            and not is_synced(ctx.recipe, ctx.workspace.root, files[key].requirements_file)]  # type: ignore[arg-type]


def _link_problems(ctx: StageContext) -> list[str]:
    recipe = ctx.recipe
    assert recipe.links is not None
    bad = [link for link in plan_links(recipe, ctx.workspace).links if link.state != "ok"]
    if not bad:
        return []
    return [f"links: {len(bad)} of {len(recipe.links.entries)} are not in place "
            f"({', '.join(b.path for b in bad[:3])}{' ...' if len(bad) > 3 else ''}) — run `flagtree-cpu link`"]


def _toolchain_problems(ctx: StageContext) -> list[str]:
    """Toolchains installed by other means (never downloaded): their folder and expected files must be here."""
    recipe = ctx.recipe
    problems = []
    for name, toolchain in applicable_toolchains(recipe, ctx.host).items():
        absent, shortfall = toolchain_missing(toolchain), toolchain_shortfall(toolchain)
        if shortfall is None:
            continue
        variant = f" (variant {recipe.variant})" if recipe.variant else ""
        listed = ", ".join(absent[:3]) + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")
        what = f"{listed} {'is' if len(absent) == 1 else 'are'} missing" if absent else shortfall
        why = f" ({toolchain.why})" if toolchain.why else ""
        override = toolchain_override_var(name)
        if toolchain.fix and override in toolchain.fix:  # the recipe's fix already says it: not twice
            problems.append(f"toolchain {name}{variant}: {what}{why} — {toolchain.fix}")
            continue
        how = f"{toolchain.fix}, or" if toolchain.fix else "install it, or"
        problems.append(f"toolchain {name}{variant}: {what}{why} "
                        f"— {how} point {override} at this host's copy (export {override}=/path/to/{name})")
    return problems


def _source_problems(ctx: StageContext) -> list[str]:
    """Sources sync would still move (their plan, read-only; local changes at the pin are the user's)."""
    lock = read_lock(ctx.workspace.lock_file)
    return [f"source {i.subject}: {i.detail} — run `flagtree-cpu sync`"
            for i in plan_sources(ctx, lock, RunOptions(python=Path()), count_changes=False)
            if i.will != "ok" and _uses(ctx.recipe, "sources", i.subject)]


def _artifact_problems(ctx: StageContext) -> list[str]:
    """Artifacts fetch would still publish (their plan: the same rule fetch skips by)."""
    lock = read_lock(ctx.workspace.lock_file)
    return [f"artifact {i.subject}: {i.reason} — run `flagtree-cpu sync`, then `flagtree-cpu fetch`"
            if "waiting" in i.data.get("reads", {}) else
            f"artifact {i.subject}: not published and verified at {i.data['path']} — run `flagtree-cpu fetch` "
            "(offline: `flagtree-cpu fetch --offline --from FILE`)"
            for i in plan_artifacts(ctx.recipe, lock, RunOptions(python=Path()), ctx.workspace.root)
            if i.will != "ok" and _uses(ctx.recipe, "artifacts", i.subject)]


def _uses(recipe: Recipe, kind: str, name: str) -> bool:
    """Whether the build (a view) uses that source or artifact: every one, unless its `inputs` says which."""
    chosen = recipe.build.inputs if recipe.build is not None else None
    return chosen is None or name in getattr(chosen, kind)


# --- words of the plan item -------------------------------------------------------------------------------------


def _wheelhouse_note(ctx: StageContext, options: RunOptions) -> str:
    """What the dry run adds when a wheelhouse is configured: it is asked before the build (not now)."""
    final = final_build(ctx.recipe)
    assert final is not None
    chosen = configured(options.wheelhouse, os.environ, named_builds(ctx.recipe)[final].wheelhouse,
                        imported_wheelhouse(ctx.workspace.recipe_state))
    return f" (the wheelhouse {chosen[0]} is asked first)" if chosen else ""


def _came_from(stamp: dict) -> str:
    """Where a build that was not compiled here came from (prebuilt.py), as status shows it."""
    origin = stamp.get("origin")
    if not isinstance(origin, dict) or not origin.get("wheelhouse"):
        return ""
    built_on = origin.get("built_on") if isinstance(origin.get("built_on"), dict) else {}
    return (f"; installed from the wheelhouse {origin['wheelhouse']}, built on {built_on.get('host', '?')} at "
            f"{built_on.get('at', '?')}")
