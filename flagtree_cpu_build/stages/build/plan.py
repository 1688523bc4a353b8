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
    NoInterpreter,
    NoPreviousBuild,
    PrerequisitesMissing,
    Reason,
    Unresolved,
    build_mode,
    say,
    stale_reasons,
    stamp_components,
    stamp_path,
)
from ...buildenv import BuildEnv, applicable_toolchains, build_environment, toolchain_missing
from ...envops import EnvFileError, SourceScriptError
from ...lockfile import read_lock
from ...pythonenv import PythonReport
from ...recipe.resolve import toolchain_override_var
from ...stacking import base_problems
from ...stagekit.plan import PlanItem
from ...stagekit.stage import RunOptions
from ...state import read_state
from ...wheelhouse import configured
from ..artifacts import plan_artifacts
from ..links import plan_links
from ..sources import plan_sources

if TYPE_CHECKING:
    from ...recipe import Recipe
    from ...stagekit.stage import StageContext


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
    """The build's plan item; ``facts`` is what its run acts on (never in the JSON: the words made from it are)."""

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
    if ctx.recipe.build is None:
        return []
    asked = _wheelhouse_note(ctx, options)
    if options.skip_build:
        return [PlanItem("build", "build", "skipped", "--skip-build", will="skipped")]
    ready = all(i.current for i in earlier)
    facts = judge(ctx, options.python, offline=options.offline, wheel_dir=options.build.wheel_dir,
                  force=options.force, assume=None if ready else _pinned_inputs(earlier))
    return [_item(facts, ready, asked)]


def _item(facts: BuildPlan, ready: bool, asked: str) -> BuildItem:
    stored = facts.stored
    if stored is None:
        return BuildItem("build", "build", "missing", "no build stamp in this workspace", "build",
                         "no previous build" + asked, will="created", facts=facts)
    data = {"stamp": stored["digest"]}
    came = _came_from(stored)
    if came:
        data["origin"] = stored["origin"]
    if facts.current:
        why = "up to date" if ready else "the stages above restore what it was built from"
        return BuildItem("build", "build", "ok", f"{why} (stamp {stored['digest'][:12]}{came})", data=data,
                         facts=facts)
    words = [say(r, ahead=not ready) for r in facts.reasons]
    return BuildItem("build", "build", "stale", f"stamp {stored['digest'][:12]} differs", "build",
                     "; ".join(words) + asked, {**data, "reasons": words}, "updated", facts=facts)


# --- the freshness rule ------------------------------------------------------------------------------------------


def judge(ctx: StageContext, python: Path, *, offline: bool = False, wheel_dir: Path | None = None,
          force: bool = False, assume: Assumed | None = None) -> BuildPlan:
    """Whether the build is current, and why not (read-only). With ``assume`` the build is judged as it will be
    once sync and fetch have brought those inputs in (the dry run), instead of refusing while they are not there."""
    recipe = ctx.recipe
    assert recipe.build is not None
    mode = build_mode(recipe, wheel_dir)
    stamp_file = stamp_path(recipe, ctx.workspace, mode)
    plan = BuildPlan(mode, stamp_file, read_state(stamp_file, needs=STAMP_KEYS), ())
    if assume is not None and (assume.unknown or plan.stored is None):  # nothing to compare with before they run
        return replace(plan, reasons=assume.unknown or (NoPreviousBuild(),))
    problems = refusals(ctx) if assume is None else ()
    if problems:
        return replace(plan, reasons=(InputsNotReady(problems),), problems=problems)
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
    components = stamp_components(recipe, ctx, python, build_env, report, plan.mode)
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
    sources = {name: {**components["sources"].get(name, {}), "commit": commit}
               for name, commit in assume.sources.items()}
    return {**components, "sources": {**components["sources"], **sources},
            "artifacts": {**components["artifacts"], **assume.artifacts}}


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
    """Sources sync would still move, artifacts fetch would still publish, pre-provisioned toolchains that are not
    on this host."""
    return _source_problems(ctx) + _artifact_problems(ctx) + _toolchain_problems(ctx)


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
        absent = toolchain_missing(toolchain)
        if not absent:
            continue
        variant = f" (variant {recipe.variant})" if recipe.variant else ""
        listed = ", ".join(absent[:3]) + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")
        why = f" ({toolchain.why})" if toolchain.why else ""
        how = f"{toolchain.fix}, or" if toolchain.fix else "install it, or"
        problems.append(f"toolchain {name}{variant}: {listed} {'is' if len(absent) == 1 else 'are'} missing{why} "
                        f"— {how} point {toolchain_override_var(name)} at this host's copy "
                        f"(export {toolchain_override_var(name)}=/path/to/{name})")
    return problems


def _source_problems(ctx: StageContext) -> list[str]:
    """Sources sync would still move (their plan, read-only; local changes at the pin are the user's)."""
    lock = read_lock(ctx.workspace.lock_file)
    return [f"source {i.subject}: {i.detail} — run `flagtree-cpu sync`"
            for i in plan_sources(ctx, lock, RunOptions(python=Path()), count_changes=False) if i.will != "ok"]


def _artifact_problems(ctx: StageContext) -> list[str]:
    """Artifacts fetch would still publish (their plan: the same rule fetch skips by)."""
    lock = read_lock(ctx.workspace.lock_file)
    return [f"artifact {i.subject}: {i.reason} — run `flagtree-cpu sync`, then `flagtree-cpu fetch`"
            if "waiting" in i.data.get("reads", {}) else
            f"artifact {i.subject}: not published and verified at {i.data['path']} — run `flagtree-cpu fetch` "
            "(offline: `flagtree-cpu fetch --offline --from FILE`)"
            for i in plan_artifacts(ctx.recipe, lock, RunOptions(python=Path()), root=ctx.workspace.root)
            if i.will != "ok"]


# --- words of the plan item -------------------------------------------------------------------------------------


def _wheelhouse_note(ctx: StageContext, options: RunOptions) -> str:
    """What the dry run adds when a wheelhouse is configured: it is asked before the build (not now)."""
    assert ctx.recipe.build is not None
    chosen = configured(options.wheelhouse, os.environ, ctx.recipe.build.wheelhouse)
    return f" (the wheelhouse {chosen[0]} is asked first)" if chosen else ""


def _came_from(stamp: dict) -> str:
    """Where a build that was not compiled here came from (prebuilt.py), as status shows it."""
    origin = stamp.get("origin")
    if not isinstance(origin, dict) or not origin.get("wheelhouse"):
        return ""
    built_on = origin.get("built_on") if isinstance(origin.get("built_on"), dict) else {}
    return (f"; installed from the wheelhouse {origin['wheelhouse']}, built on {built_on.get('host', '?')} at "
            f"{built_on.get('at', '?')}")
