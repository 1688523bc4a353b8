"""The build stage: the recipe's build command, in the right environment, watched and explained.

``run_build`` acts on the build's plan (``stages/build/plan.py``: the mode, the stamp it would write, why it would run,
the inputs it lacks), computed once with the run's own options. When the plan says current, it says "up to date"
in about a second and runs nothing. Otherwise it goes prepare → build → verify → stamp:

- prepare: every missing input is listed at once (with ``--offline`` that check is the contract: nothing is
  downloaded afterwards), the interpreter and the build prerequisites are made ready, and a stacked recipe's
  base is guarded (``stacking``); then a fleet's wheelhouse is asked for a fitting build (``prebuilt``);
- build: the recipe's pre-build steps, its build command, its post-install steps (``steps``); the output goes
  to ``logs/build-<time>.log``, ninja's ``[N/M]`` lines drive a progress bar, and a failure is diagnosed from the
  log with the recipe's known failures first;
- verify: what the build must leave (the steps' marks, the links, the base's kept distributions);
- stamp: the build stamp (``build_stamp``: source trees, artifact digests, build command and the environment
  that matters, steps, Python, prerequisites and compilers), so an unchanged re-run is "up to date" and a
  changed one says what changed.

A recipe with several builds (``builds:`` next to ``build:``, ``recipe/builds.py``) runs each in ``needs`` order,
each as above with its own stamp (``build-NAME-editable.json``; `build` keeps ``build-editable.json``); a gate
check (``before: NAME``, ``gates.py``) runs before that build's command, and ``install_wheels`` (``wheels.py``)
installs the wheels its command made. ``build --only NAME`` runs that build and the ones it needs.

A recipe's build ``mode`` is ``editable`` (``build`` installs into the target Python; ``build
--wheel DIR`` makes a wheel instead) or ``wheel-only`` (``build`` always runs ``wheel_argv``
into ``{wheel_dir}``). Each kind keeps its own stamp (``build-editable.json``, ``build-wheel.json``).
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import compile_cache, pythonenv, stacking
from ...build_stamp import (
    STAMP_KEYS,
    Reason,
    products_of,
    say,
    stale_reasons,
    stamp_components,
    write_stamp,
)
from ...buildenv import BuildEnv, build_environment
from ...cmakeargs import place_links
from ...compile_farm import FarmSession
from ...envops import EnvFileError, EnvLayer, SourceScriptError
from ...errors import BuildError, UsageError
from ...recipe.builds import MAIN, final_build, named_builds
from ...stagekit.plan import PlanItem
from ...stagekit.stage import Action, RunOptions, StageContext, StageResult
from ...state import make_state_dir, read_state
from ...steps import failure, run_steps, unverified
from ...ui import UI
from ..links import plan_links
from . import install_only, prebuilt
from .farm import farm_for
from .gates import run_gates
from .plan import BuildItem, BuildPlan, check_prerequisites, judge, stored_components, view_of
from .watch import duration, new_wheel, run_command, wheels_in
from .wheels import install_wheels, wheel_marks


def run_build(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    """Act on the builds' plan (``stages/build/plan.plan_build``, made with these options), one build after the
    other in `needs` order: each "up to date", or prepare → gate checks → build → verify → stamp. A build after one
    that ran is judged again against what that one's new stamp holds."""
    start = time.monotonic()
    items = _gate(ctx, options, plan)  # an install-only board never gets here: its command took it (install_board)
    missing = list(dict.fromkeys(p for i in items if i.facts is not None for p in i.facts.problems))
    if missing and len(items) > 1:  # every build's missing inputs at once, before the first one runs
        raise _missing_inputs(missing, options)
    final = final_build(ctx.recipe)
    actions: list[Action] = []
    ran: set[str] = set()
    for item in items:
        assert item.facts is not None
        name, view = item.subject, view_of(ctx, item.subject)
        assert view.recipe.build is not None
        facts = item.facts
        if ran.intersection(view.recipe.build.needs) or None in facts.needs.values():
            facts = _judge_again(ctx, view, options, name, final)
        result = _run_one(view, options, facts, _Which(name, name == final))
        actions += result.actions
        if any(a.status != "ok" for a in result.actions):
            ran.add(name)
    return StageResult("build", tuple(actions), seconds=time.monotonic() - start)


@dataclass(frozen=True)
class _Which:
    """Which build runs: its name, and whether it is the final one (its steps, wheel, wheelhouse and --publish)."""

    name: str
    final: bool

    def called(self, what: str = "the build") -> str:
        return what if self.name == MAIN else f"{what} {self.name}"


def _run_one(ctx: StageContext, options: RunOptions, facts: BuildPlan, which: _Which) -> StageResult:
    start = time.monotonic()
    if facts.current:
        assert facts.build_env is not None and facts.components is not None
        _warn_inherited(ctx.ui, facts.build_env)
        return _up_to_date(ctx, options, facts.stored, facts.components, start, which)
    ready = _prepare(ctx, options, facts)
    if not ready.reasons:  # the plan could not compare before the prerequisites were there; now it is current
        return _up_to_date(ctx, options, facts.stored, ready.components, start, which)
    run_gates(ctx, options, which.name, ready.build_env)
    taken = _take_published(ctx, options, facts, ready, start) if which.final else None
    if taken is not None:
        return taken
    built = _build(ctx, options, facts, ready, which)
    _verify(ctx, options, ready.kept)
    return _stamp(ctx, options, facts, ready, built, start, which)


def _judge_again(ctx: StageContext, view: StageContext, options: RunOptions, name: str, final: str | None) -> BuildPlan:
    """The build ``name`` judged after the builds it needs have run, against the stamps they wrote."""
    assert view.recipe.build is not None
    needs = {n: stored_components(ctx, n) for n in view.recipe.build.needs}
    return judge(view, options.python, offline=options.offline, force=options.force, name=name, needs=needs,
                 wheel_dir=options.build.wheel_dir if name == final else None)


@dataclass(frozen=True)
class _Ready:
    """What prepare made ready: the environment, the stamp the build will write, why it runs, what must stay."""

    build_env: BuildEnv
    components: dict[str, Any]
    reasons: tuple[Reason, ...]
    kept: dict[str, stacking.Installed]


@dataclass(frozen=True)
class _Built:
    result: Any  # proc.run_logged's result (ok, log, seconds)
    steps: list[dict[str, Any]]
    cache: compile_cache.CacheSession | None
    farm: FarmSession | None
    wheel_dir: Path | None
    wheels_before: dict[Path, float]


def _gate(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> list[BuildItem]:
    """The builds' plan items, once the recipe has a build and this machine may run it."""
    if not named_builds(ctx.recipe):
        raise BuildError(f"recipe {ctx.recipe.name} has no build section", fix="add `build:` to the recipe")
    _arch_gate(ctx, options)
    items = [i for i in plan if isinstance(i, BuildItem) and i.facts is not None]
    if not items:
        raise ValueError(f"run_build acts on the build's plan (stages/build/plan.plan_build), not on {plan!r}")
    final = final_build(ctx.recipe)
    if (options.build.publish or options.build.wheel_dir) and final not in (i.subject for i in items):
        flag = "--publish" if options.build.publish else "--wheel"
        raise UsageError(f"{flag} is for the final build {final!r}; --only {options.build.only} does not run it",
                         fix=f"flagtree-cpu build --only {final} {flag} ...   (or leave out {flag})")
    return items


def _up_to_date(ctx: StageContext, options: RunOptions, stored: dict[str, Any] | None,
                components: dict[str, Any], start: float, which: _Which) -> StageResult:
    assert stored is not None
    data = {"stamp": stored["digest"], **({"wheel": stored["wheel"]} if stored.get("wheel") else {}),
            **({"wheelhouse": stored["origin"]} if isinstance(stored.get("origin"), dict) else {})}
    if options.build.publish and which.final:
        data["published"] = prebuilt.publish(ctx, options, components, stored.get("wheel"))
    return StageResult("build", (Action(which.name, "ok", "up to date", data),), seconds=time.monotonic() - start)


# --- prepare ---------------------------------------------------------------------------------------------------


def _prepare(ctx: StageContext, options: RunOptions, facts: BuildPlan) -> _Ready:
    """Refuse what is missing (all of it at once), make the interpreter and its prerequisites ready, guard a
    stacked recipe's base; then the stamp this build will write, and why it runs."""
    if facts.problems and not options.python.exists():  # before creating a venv a failing build would leave
        raise _missing_inputs(list(facts.problems), options)
    pythonenv.ensure_interpreter(options.python, ctx.workspace, ctx.recipe.python.requires, ctx.ui)
    build_env = _environment(ctx, options, facts)
    report = _prerequisites(ctx, options, facts, build_env)
    kept = stacking.require_kept(ctx, options.python)
    _warn_inherited(ctx.ui, build_env)
    planned = report is facts.report and facts.components is not None
    components = facts.components if planned else stamp_components(ctx.recipe, ctx, options.python, build_env,
                                                                    report, facts.mode, facts.needs)
    assert components is not None
    reasons = facts.reasons if facts.decided else stale_reasons(ctx, options.python, facts.stored, components,
                                                                report, force=options.force)
    # the plan read a damaged stamp as none; the build moves it aside (and says so) before writing a new one
    read_state(facts.stamp_file, needs=STAMP_KEYS, repair=True, notice=ctx.ui.warn)
    make_state_dir(ctx.workspace.empty_dir)  # the recipe's env may point variables at it (an empty folder)
    return _Ready(build_env, components, reasons, kept)


def _take_published(ctx: StageContext, options: RunOptions, facts: BuildPlan, ready: _Ready,
                    start: float) -> StageResult | None:
    """A fleet's wheelhouse build that fits, installed instead of building here; None: build here."""
    return prebuilt.take(ctx, options, ready.components, facts.stamp_file, start=start,
                         post_install=lambda: run_steps("post-install", ctx.recipe, ctx.host,
                                                        **_step_options(ctx, options)))


def _environment(ctx: StageContext, options: RunOptions, facts: BuildPlan) -> BuildEnv:
    if facts.build_env is not None:
        return facts.build_env
    try:
        return build_environment(ctx.recipe, options.python, offline=options.offline, host=ctx.host,
                                 workdir=ctx.workspace.root)
    except (EnvFileError, SourceScriptError):  # a file the env reads (a source's, a toolchain's script) is not
        # there yet: say everything that is missing, not only the first
        if facts.problems:
            raise _missing_inputs(list(facts.problems), options) from None
        raise


def _prerequisites(ctx: StageContext, options: RunOptions, facts: BuildPlan,
                   build_env: BuildEnv) -> pythonenv.PythonReport:
    """The build prerequisites, installed when missing; every missing input (the plan's, and prerequisites pip
    may not install here) refused at once."""
    recipe, ws = ctx.recipe, ctx.workspace
    pythonenv.refuse_conflicts(recipe, recipe.python.build)  # the recipe contradicts itself: exit 2, nothing run
    recheck = lambda: check_prerequisites(recipe, options.python, build_env, facts.mode)  # noqa: E731
    report = facts.report if facts.report is not None else recheck()
    wheelhouse = pythonenv.offline_wheelhouse(ws) if options.offline else None
    vendor = pythonenv.preinstalled_problems(report)  # a vendor's package pip must not (and cannot) provide
    pip = _uninstallable(ctx, options, report, wheelhouse, others=bool(facts.problems or vendor))
    if vendor and not (facts.problems or pip):
        pythonenv.require_preinstalled(report)  # alone: its own words, with the vendor's installer as the fix
    problems = [*facts.problems, *vendor, *pip]  # every missing input at once, not only the first kind
    if problems:
        raise _missing_inputs(problems, options)
    if report.missing:
        from ...installer import choose_for

        installer = choose_for(recipe, options.installer, options.python)
        ctx.ui.info(f"installer: {installer.why}")
        report = pythonenv.install_and_recheck(report, ws, ctx.ui, recheck, wheelhouse=wheelhouse, installer=installer)
    return report


def _uninstallable(ctx: StageContext, options: RunOptions, report: pythonenv.PythonReport,
                   wheelhouse: Path | None, *, others: bool) -> list[str]:
    """Missing prerequisites as one more missing input, with the pip command that installs them: offline without
    an imported wheelhouse (pip has nowhere to get them), or when other inputs are missing (nothing runs)."""
    if not report.missing or not ((options.offline and wheelhouse is None) or others):
        return []
    limits = pythonenv.constraints_file(ctx.recipe, ctx.workspace)
    commands = " && ".join(shlex.join(c) for c in pythonenv.install_commands(options.python, report.missing,
                                                                              limits, wheelhouse))
    return [f"Python prerequisites missing in {options.python}: {', '.join(p.describe() for p in report.missing)} "
            f"— run `{commands}` (online, or with PIP_FIND_LINKS pointing at a wheel folder)"]


def _warn_inherited(ui: UI, build_env: BuildEnv) -> None:
    for conflict in build_env.conflicts:
        ui.warn(f"inherited {conflict.describe()}")


def _arch_gate(ctx: StageContext, options: RunOptions) -> None:
    """The build runs on the recipe's host architectures (a cross recipe's host, not its target)."""
    host = ctx.recipe.platform.host
    if ctx.host.arch in host.arch or options.ignore_host:
        return
    why = f" ({host.why})" if host.why else ""
    instead = host.advice or "build on a machine of that architecture"
    raise BuildError(f"recipe {ctx.recipe.name} builds on {', '.join(host.arch)} and this machine is "
                     f"{ctx.host.arch}{why}",
                     fix=f"{instead}; or pass --ignore-host to try anyway (for testing)")


def _missing_inputs(problems: list[str], options: RunOptions) -> BuildError:
    mode = "an offline build" if options.offline else "the build"
    return BuildError(f"{len(problems)} input{'s' if len(problems) > 1 else ''} of {mode} "
                      f"{'are' if len(problems) > 1 else 'is'} missing; nothing was run",
                      details=tuple(problems), fix="run the commands listed (or `flagtree-cpu setup`, which "
                      "does all of them), then build again")


# --- build, verify, stamp --------------------------------------------------------------------------------------


def _build(ctx: StageContext, options: RunOptions, facts: BuildPlan, ready: _Ready, which: _Which) -> _Built:
    """The recipe's pre-build steps, its build command (watched and logged), the wheels it installs, then its
    post-install steps."""
    recipe, ws, ui = ctx.recipe, ctx.workspace, ctx.ui
    assert recipe.build is not None
    for reason in ready.reasons:
        ui.info(f"building because {say(reason)}")
    pythonenv.constraints_file(recipe, ws)  # PIP_CONSTRAINT names it: the build's own pip runs keep to it
    wheel_dir = _wheel_dir(ctx, options, facts.mode)
    wheels_before = wheels_in(wheel_dir)
    # with a farm, the command runs resolved with its slots in {jobs} (the stamp's components are the local ones)
    farm, run, run_env = farm_for(ctx, options, which.name, ready.build_env)
    assert run.recipe.build is not None
    argv = list(run.recipe.build.wheel_argv if facts.mode == "wheel" else run.recipe.build.argv)
    if facts.mode == "wheel" and not argv:
        raise BuildError(f"recipe {recipe.name} has no build.wheel_argv", fix="add it to the recipe's build section")
    if wheel_dir is not None:
        wheel_dir.mkdir(parents=True, exist_ok=True)
    cache = compile_cache.prepare(options.compile_cache, recipe.build.compile_cache, recipe.name,
                                  ready.build_env.env, ui.warn, base_dir=str(ws.root))
    step_options = _step_options(ctx, options)
    steps = run_steps("pre-build", recipe, ctx.host, **step_options)
    for link in place_links(recipe, ws.root):  # a FetchContent dependency at the project's own folder (`at`)
        ui.info(f"linked {link} -> {os.readlink(link)}")
    # the wheels there before the command: afterwards, one it did not write or rewrite is an earlier build's
    before = wheel_marks(recipe.build.install_wheels, Path(recipe.build.cwd)) if recipe.build.install_wheels else {}
    result = run_command(argv, run.recipe, ws.logs_dir, run_env, ui, options,
                         {**(cache.env if cache else {}), **(farm.env if farm else {})}, which.name)
    if not result.ok:
        raise failure(result, recipe, options.jobs, f"{which.called()} failed")
    if recipe.build.install_wheels:
        install_wheels(ctx, options, which.name, ready.build_env, before)
    steps += run_steps("post-install", recipe, ctx.host, **step_options)
    return _Built(result, steps, cache, farm, wheel_dir, wheels_before)


def _step_options(ctx: StageContext, options: RunOptions) -> dict[str, Any]:
    """How the recipe's steps run: each in the build environment plus its own env."""
    return {"logs_dir": ctx.workspace.logs_dir, "ui": ctx.ui, "jobs": options.jobs, "verbose": options.verbose,
            "env_for": lambda step: build_environment(
                ctx.recipe, options.python, offline=options.offline, host=ctx.host, workdir=ctx.workspace.root,
                extra=[EnvLayer(step.env, f"steps.{step.name}.env")])}


def _verify(ctx: StageContext, options: RunOptions, kept: dict[str, stacking.Installed]) -> None:
    """What the build must leave, or its stamp is not written: the base's kept distributions as they were, what
    the steps verify, the recipe's links."""
    recipe, ws = ctx.recipe, ctx.workspace
    stacking.check_kept(ctx, options.python, kept)
    still = unverified(recipe, ctx.host, options.python)
    if still:  # the step ran and said nothing, but did not do its job (a patch script that found no pattern)
        raise BuildError("the steps ran, but what they should have left is not there", details=tuple(still),
                         fix="read the step's log in " + str(ws.logs_dir) + "; the distribution may be another "
                         "version than the step's script knows")
    broken = [link for link in plan_links(recipe, ws).links if link.state != "ok"]
    if broken:
        raise BuildError("the build changed the recipe's links", details=tuple(f"{b.path}: {b.detail}" for b in broken),
                         fix="run `flagtree-cpu link`, then build again")


def _stamp(ctx: StageContext, options: RunOptions, facts: BuildPlan, ready: _Ready, built: _Built,
           start: float, which: _Which) -> StageResult:
    """Write the build stamp (what this build was made from, its products, its wheel) and say what was done."""
    wheel = new_wheel(built.wheel_dir, built.wheels_before) if built.wheel_dir is not None else None
    write_stamp(facts.stamp_file, ready.components, products_of(ctx.recipe), wheel, built.result.log)
    prebuilt.forget_downloads(ctx.workspace)  # a wheelhouse download that stalled before this build is of no use now
    install_only.forget(ctx.workspace)  # built here now: no longer what the wheelhouse delivered
    detail = f"built in {duration(built.result.seconds)}; log {built.result.log}"
    data: dict[str, Any] = {"log": str(built.result.log), "reasons": [say(r) for r in ready.reasons]}
    if built.cache is not None:
        data["compile_cache"], line = compile_cache.finish(built.cache, ready.build_env.env, ctx.ui.warn)
        detail += f"; {line}" if line else ""
    if built.farm is not None:
        data["compile_farm"] = built.farm.data()
        detail += f"; {built.farm.summary()}"
    if built.steps:
        data["steps"] = built.steps
    if wheel:
        data["wheel"] = wheel
    if options.build.publish and which.final:
        data["published"] = prebuilt.publish(ctx, options, ready.components, wheel)
    status = "updated" if facts.stored is not None else "created"
    return StageResult("build", (Action(which.name, status, detail, data),), seconds=time.monotonic() - start)


def _wheel_dir(ctx: StageContext, options: RunOptions, mode: str) -> Path | None:
    """Where the wheel goes: --wheel DIR, or for a wheel-only recipe the {wheel_dir} its wheel_argv names."""
    if mode != "wheel":
        return None
    return options.build.wheel_dir or ctx.workspace.root / "dist"  # the {wheel_dir} default (placeholders.py)
