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

A recipe's build ``mode`` is ``editable`` (``build`` installs into the target Python; ``build
--wheel DIR`` makes a wheel instead) or ``wheel-only`` (``build`` always runs ``wheel_argv``
into ``{wheel_dir}``). Each kind keeps its own stamp (``build-editable.json``, ``build-wheel.json``).
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import compile_cache, pythonenv, stacking
from ...build_stamp import STAMP_KEYS, Reason, products_of, say, stale_reasons, stamp_components, write_stamp
from ...buildenv import BuildEnv, build_environment
from ...cache_url import redact
from ...digest import hash_file
from ...envops import EnvFileError, EnvLayer, SourceScriptError
from ...errors import BuildError
from ...proc import log_path, run_logged
from ...progress import ProgressTask
from ...recipe import Recipe
from ...stagekit.plan import PlanItem
from ...stagekit.stage import Action, RunOptions, StageContext, StageResult
from ...state import make_state_dir, read_state
from ...steps import failure, run_steps, unverified
from ...ui import UI
from ..links import plan_links
from . import prebuilt
from .plan import BuildItem, BuildPlan, check_prerequisites

_NINJA = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)")


def run_build(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> StageResult:
    """Act on the build's plan (``stages/build/plan.plan_build``, made with these options): "up to date", or prepare →
    build → verify → stamp."""
    start = time.monotonic()
    facts = _gate(ctx, options, plan)
    if facts.current:
        assert facts.build_env is not None and facts.components is not None
        _warn_inherited(ctx.ui, facts.build_env)
        return _up_to_date(ctx, options, facts.stored, facts.components, start)
    ready = _prepare(ctx, options, facts)
    if not ready.reasons:  # the plan could not compare before the prerequisites were there; now it is current
        return _up_to_date(ctx, options, facts.stored, ready.components, start)
    taken = _take_published(ctx, options, facts, ready, start)
    if taken is not None:
        return taken
    built = _build(ctx, options, facts, ready)
    _verify(ctx, options, ready.kept)
    return _stamp(ctx, options, facts, ready, built, start)


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
    wheel_dir: Path | None
    wheels_before: dict[Path, float]


def _gate(ctx: StageContext, options: RunOptions, plan: list[PlanItem]) -> BuildPlan:
    """The build's plan, once the recipe has a build and this machine may run it."""
    if ctx.recipe.build is None:
        raise BuildError(f"recipe {ctx.recipe.name} has no build section", fix="add `build:` to the recipe")
    _arch_gate(ctx, options)
    facts = [i.facts for i in plan if isinstance(i, BuildItem) and i.facts is not None]
    if len(facts) != 1:
        raise ValueError(f"run_build acts on the build's plan (stages/build/plan.plan_build), not on {plan!r}")
    return facts[0]


def _up_to_date(ctx: StageContext, options: RunOptions, stored: dict[str, Any] | None,
                components: dict[str, Any], start: float) -> StageResult:
    assert stored is not None
    data = {"stamp": stored["digest"], **({"wheel": stored["wheel"]} if stored.get("wheel") else {}),
            **({"wheelhouse": stored["origin"]} if isinstance(stored.get("origin"), dict) else {})}
    if options.build.publish:
        data["published"] = prebuilt.publish(ctx, options, components, stored.get("wheel"))
    return StageResult("build", (Action("build", "ok", "up to date", data),), seconds=time.monotonic() - start)


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
                                                                    report, facts.mode)
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
        report = pythonenv.install_and_recheck(report, ws, ctx.ui, recheck, wheelhouse=wheelhouse)
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


def _build(ctx: StageContext, options: RunOptions, facts: BuildPlan, ready: _Ready) -> _Built:
    """The recipe's pre-build steps, its build command (watched and logged), then its post-install steps."""
    recipe, ws, ui = ctx.recipe, ctx.workspace, ctx.ui
    assert recipe.build is not None
    for reason in ready.reasons:
        ui.info(f"building because {say(reason)}")
    pythonenv.constraints_file(recipe, ws)  # PIP_CONSTRAINT names it: the build's own pip runs keep to it
    wheel_dir = _wheel_dir(ctx, options, facts.mode)
    wheels_before = _wheels(wheel_dir)
    argv = list(recipe.build.wheel_argv if facts.mode == "wheel" else recipe.build.argv)
    if facts.mode == "wheel" and not argv:
        raise BuildError(f"recipe {recipe.name} has no build.wheel_argv", fix="add it to the recipe's build section")
    if wheel_dir is not None:
        wheel_dir.mkdir(parents=True, exist_ok=True)
    cache = compile_cache.prepare(options.compile_cache, recipe.build.compile_cache, recipe.name,
                                  ready.build_env.env, ui.warn, base_dir=str(ws.root))
    step_options = _step_options(ctx, options)
    steps = run_steps("pre-build", recipe, ctx.host, **step_options)
    result = _run(argv, recipe, ws.logs_dir, ready.build_env, ui, options, cache.env if cache else {})
    if not result.ok:
        raise failure(result, recipe, options.jobs, "the build failed")
    steps += run_steps("post-install", recipe, ctx.host, **step_options)
    return _Built(result, steps, cache, wheel_dir, wheels_before)


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
           start: float) -> StageResult:
    """Write the build stamp (what this build was made from, its products, its wheel) and say what was done."""
    wheel = _new_wheel(built.wheel_dir, built.wheels_before) if built.wheel_dir is not None else None
    write_stamp(facts.stamp_file, ready.components, products_of(ctx.recipe), wheel, built.result.log)
    prebuilt.forget_downloads(ctx.workspace)  # a wheelhouse download that stalled before this build is of no use now
    detail = f"built in {_duration(built.result.seconds)}; log {built.result.log}"
    data: dict[str, Any] = {"log": str(built.result.log), "reasons": [say(r) for r in ready.reasons]}
    if built.cache is not None:
        data["compile_cache"], line = compile_cache.finish(built.cache, ready.build_env.env, ctx.ui.warn)
        detail += f"; {line}" if line else ""
    if built.steps:
        data["steps"] = built.steps
    if wheel:
        data["wheel"] = wheel
    if options.build.publish:
        data["published"] = prebuilt.publish(ctx, options, ready.components, wheel)
    status = "updated" if facts.stored is not None else "created"
    return StageResult("build", (Action("build", status, detail, data),), seconds=time.monotonic() - start)


def _wheel_dir(ctx: StageContext, options: RunOptions, mode: str) -> Path | None:
    """Where the wheel goes: --wheel DIR, or for a wheel-only recipe the {wheel_dir} its wheel_argv names."""
    if mode != "wheel":
        return None
    return options.build.wheel_dir or ctx.workspace.root / "dist"  # the {wheel_dir} default (placeholders.py)


# --- running and watching ------------------------------------------------------------------------------


class _Display:
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


def _run(argv: list[str], recipe: Recipe, logs_dir: Path, build_env: BuildEnv, ui: UI, options: RunOptions,
         cache_env: Mapping[str, str]) -> Any:
    assert recipe.build is not None
    log = log_path(logs_dir, "build")
    ui.info(f"+ {shlex.join(argv)}")
    ui.info(f"  in {recipe.build.cwd}; full output: {log}")
    header = [c.describe() for c in build_env.changes] + [  # the log never holds the cache's password
        f"{k}={redact(v)} (compile cache)" for k, v in cache_env.items()]
    with ui.progress(f"building {recipe.name}") as task:
        display = _Display(task, ui, options.verbose)
        return run_logged(argv, cwd=Path(recipe.build.cwd), env={**build_env.env, **cache_env}, log=log,
                          header=header, on_line=display.line, on_idle=display.idle)


def _wheels(folder: Path | None) -> dict[Path, float]:
    return {p: p.stat().st_mtime for p in folder.glob("*.whl")} if folder and folder.is_dir() else {}


def _new_wheel(folder: Path, before: dict[Path, float]) -> dict[str, Any]:
    fresh = [p for p in folder.glob("*.whl") if before.get(p) != p.stat().st_mtime]
    if not fresh:
        raise BuildError(f"the build succeeded but wrote no wheel into {folder}",
                         fix="check the recipe's build.wheel_argv writes to {wheel_dir}")
    wheel = max(fresh, key=lambda p: p.stat().st_mtime)
    return {"path": str(wheel), "size": wheel.stat().st_size, "sha256": hash_file(wheel)}


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes else f"{seconds:.1f}s"
