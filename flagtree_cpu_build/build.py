"""The build stage: the recipe's build command, in the right environment, watched and explained.

Before anything runs, every input is checked — sources at their pins, links, the published
artifacts, the pre-provisioned toolchains, the build prerequisites — and all missing ones are
listed at once (with ``--offline`` that check is the contract: nothing is downloaded afterwards).
The recipe's pre-build steps run before the build command, its post-install steps after it
(``steps``). A build stamp (source trees, artifact digests, build command and the environment that
matters, steps, Python, prerequisites and compilers) makes an unchanged re-run a one-second
"up to date"; a changed one says what changed. The output goes to ``logs/build-<time>.log``;
ninja's ``[N/M]`` lines drive a progress bar; a failure is diagnosed from the log with the
recipe's known failures first.

A recipe's build ``mode`` is ``editable`` (``build`` installs into the target Python; ``build
--wheel DIR`` makes a wheel instead) or ``wheel-only`` (``build`` always runs ``wheel_argv``
into ``{wheel_dir}``). Each kind keeps its own stamp (``build-editable.json``, ``build-wheel.json``).
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import compile_cache, prebuilt, pythonenv, stacking
from .build_stamp import build_mode, products_of, reasons_to_build, stamp_components, stamp_path, write_stamp
from .buildenv import BuildEnv, applicable_toolchains, build_environment, toolchain_missing
from .cache_url import redact
from .digest import hash_file
from .envops import EnvFileError, EnvLayer, SourceScriptError
from .errors import BuildError
from .links import plan_links
from .lockfile import read_lock
from .proc import log_path, run_logged
from .progress import ProgressTask
from .recipe import Recipe
from .recipe.resolve import toolchain_override_var
from .stages import Action, RunOptions, StageContext, StageResult
from .state import make_state_dir, read_state
from .steps import failure, missing_creates, run_steps, unverified
from .ui import UI

STAMP_KEYS = ("digest", "components")  # what a build stamp must hold to be compared at all
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)")


def run_build(ctx: StageContext, options: RunOptions) -> StageResult:
    start = time.monotonic()
    recipe, ws, ui = ctx.recipe, ctx.workspace, ctx.ui
    if recipe.build is None:
        raise BuildError(f"recipe {recipe.name} has no build section", fix="add `build:` to the recipe")
    _arch_gate(ctx, options)
    if not options.python.exists():  # report missing inputs before creating a venv a failing build would leave
        early = missing_inputs(ctx)
        if early:
            raise _missing_inputs(early, options)
    pythonenv.ensure_interpreter(options.python, ws, recipe.python.requires, ui)
    try:
        build_env = build_environment(recipe, options.python, offline=options.offline, host=ctx.host,
                                      workdir=ws.root)
    except (EnvFileError, SourceScriptError):  # a file the env reads (a source's, a toolchain's script) is not
        # there yet: say everything that is missing, not only the first
        early = [*stacking.base_problems(ctx), *missing_inputs(ctx)]
        if early:
            raise _missing_inputs(early, options) from None
        raise
    mode = build_mode(recipe, options.build.wheel_dir)
    report = _preflight(ctx, options, build_env, mode)
    kept = stacking.require_kept(ctx, options.python)
    for conflict in build_env.conflicts:
        ui.warn(f"inherited {conflict.describe()}")
    components = stamp_components(recipe, ctx, options.python, build_env, report, mode)
    stamp_file = stamp_path(recipe, ws, mode)
    stored = read_state(stamp_file, needs=STAMP_KEYS, repair=True, notice=ui.warn)
    built_before = stored is not None
    gone = missing_creates(recipe, ctx.host) + unverified(recipe, ctx.host, options.python)
    reasons = reasons_to_build(stored, components, report, options.python, gone,
                               force=options.force)
    if not reasons:
        assert stored is not None
        data = {"stamp": stored["digest"], **({"wheel": stored["wheel"]} if stored.get("wheel") else {}),
                **({"wheelhouse": stored["origin"]} if isinstance(stored.get("origin"), dict) else {})}
        if options.build.publish:
            data["published"] = prebuilt.publish(ctx, options, components, stored.get("wheel"))
        return StageResult("build", (Action("build", "ok", "up to date", data),), seconds=time.monotonic() - start)
    step_options = {"logs_dir": ws.logs_dir, "ui": ui, "jobs": options.jobs, "verbose": options.verbose,
                    "env_for": lambda step: build_environment(
                        recipe, options.python, offline=options.offline, host=ctx.host, workdir=ws.root,
                        extra=[EnvLayer(step.env, f"steps.{step.name}.env")])}
    make_state_dir(ws.empty_dir)  # the recipe's env may point variables at it (an empty folder)
    taken = prebuilt.take(ctx, options, components, stamp_file, start=start,
                          post_install=lambda: run_steps("post-install", recipe, ctx.host, **step_options))
    if taken is not None:
        return taken
    for reason in reasons:
        ui.info(f"building because {reason}")
    pythonenv.constraints_file(recipe, ws)  # PIP_CONSTRAINT names it: the build's own pip runs keep to it
    wheel_dir = _wheel_dir(ctx, options, mode)
    wheels_before = _wheels(wheel_dir)
    argv = list(recipe.build.wheel_argv if mode == "wheel" else recipe.build.argv)
    if mode == "wheel" and not argv:
        raise BuildError(f"recipe {recipe.name} has no build.wheel_argv", fix="add it to the recipe's build section")
    if wheel_dir is not None:
        wheel_dir.mkdir(parents=True, exist_ok=True)
    cache = compile_cache.prepare(options.compile_cache, recipe.build.compile_cache, recipe.name, build_env.env,
                                  ui.warn, base_dir=str(ws.root))
    steps = run_steps("pre-build", recipe, ctx.host, **step_options)
    result = _run(argv, recipe, ws.logs_dir, build_env, ui, options, cache.env if cache else {})
    if not result.ok:
        raise failure(result, recipe, options.jobs, "the build failed")
    steps += run_steps("post-install", recipe, ctx.host, **step_options)
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
    products = products_of(recipe)
    wheel = _new_wheel(wheel_dir, wheels_before) if wheel_dir is not None else None
    write_stamp(stamp_file, components, products, wheel, result.log)
    prebuilt.forget_downloads(ws)  # a wheelhouse download that stalled before this build is of no use now
    detail = f"built in {_duration(result.seconds)}; log {result.log}"
    data: dict[str, Any] = {"log": str(result.log), "reasons": reasons}
    if cache is not None:
        data["compile_cache"], line = compile_cache.finish(cache, build_env.env, ui.warn)
        detail += f"; {line}" if line else ""
    if steps:
        data["steps"] = steps
    if wheel:
        data["wheel"] = wheel
    if options.build.publish:
        data["published"] = prebuilt.publish(ctx, options, components, wheel)
    status = "updated" if built_before else "created"
    return StageResult("build", (Action("build", status, detail, data),), seconds=time.monotonic() - start)


def _wheel_dir(ctx: StageContext, options: RunOptions, mode: str) -> Path | None:
    """Where the wheel goes: --wheel DIR, or for a wheel-only recipe the {wheel_dir} its wheel_argv names."""
    if mode != "wheel":
        return None
    return options.build.wheel_dir or ctx.workspace.root / "dist"  # the {wheel_dir} default (placeholders.py)


def build_freshness(ctx: StageContext, python: Path, *, offline: bool = False,
                    assume: Mapping[str, Mapping[str, str]] | None = None) -> list[str]:
    """Why `build` would run now; empty when it would say "up to date". Read-only (for status and plans).

    ``assume`` ({"sources": {name: commit}, "artifacts": {name: sha256}}) judges the build as it will be
    once sync and fetch have brought those in (the dry run), instead of refusing while they are not there."""
    recipe = ctx.recipe
    if recipe.build is None:
        return []
    problems = missing_inputs(ctx) if assume is None else []
    if problems:
        return ["its inputs are not ready: " + problems[0].split(" — ")[0]]
    if not python.exists():
        return [f"there is no interpreter at {python} yet"]
    build_env = build_environment(recipe, python, offline=offline, host=ctx.host, workdir=ctx.workspace.root)
    mode = build_mode(recipe, None)
    report = pythonenv.check(python, recipe.python.build, build_env.env.get("PATH", ""),
                             also=_installed_distribution(recipe, mode), recipe=recipe)
    if report.missing:
        return [f"build prerequisites are missing or of the wrong version: "
                f"{', '.join(p.name for p in report.missing)}"]
    options = RunOptions(python=python, offline=offline)
    components = stamp_components(recipe, ctx, options.python, build_env, report, mode)
    if assume is not None:
        for name, commit in assume["sources"].items():
            components["sources"][name] = {**components["sources"].get(name, {}), "commit": commit}
        components["artifacts"].update(assume["artifacts"])
    stored = read_state(stamp_path(recipe, ctx.workspace, mode), needs=STAMP_KEYS)
    gone = missing_creates(recipe, ctx.host) + unverified(recipe, ctx.host, options.python)
    return reasons_to_build(stored, components, report, options.python, gone,
                            force=options.force)


def _installed_distribution(recipe: Recipe, mode: str) -> list[str]:
    """The distribution an editable build installs (its absence means build again); a wheel installs nothing."""
    assert recipe.build is not None
    return [recipe.build.distribution] if recipe.build.distribution and mode == "editable" else []


# --- gates and inputs ----------------------------------------------------------------------------


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


def _preflight(ctx: StageContext, options: RunOptions, build_env: BuildEnv,
               mode: str) -> pythonenv.PythonReport:
    """Check every input; list all that are missing at once, each with what provides it."""
    recipe, ws = ctx.recipe, ctx.workspace
    problems = [*stacking.base_problems(ctx), *missing_inputs(ctx)]
    if recipe.links is not None and not problems:
        bad = [link for link in plan_links(recipe, ws).links if link.state != "ok"]
        if bad:
            problems.append(f"links: {len(bad)} of {len(recipe.links.entries)} are not in place "
                            f"({', '.join(b.path for b in bad[:3])}{' ...' if len(bad) > 3 else ''}) — run "
                            "`flagtree-cpu link`")
    also = _installed_distribution(recipe, mode)
    pythonenv.refuse_conflicts(recipe, recipe.python.build)  # the recipe contradicts itself: exit 2, nothing run
    report = pythonenv.check(options.python, recipe.python.build, build_env.env.get("PATH", ""), also=also,
                             recipe=recipe)
    pythonenv.require_preinstalled(report)  # a vendor's package pip must not (and cannot) provide
    wheelhouse = pythonenv.offline_wheelhouse(ws) if options.offline else None
    if report.missing:
        limits = pythonenv.constraints_file(recipe, ws)
        commands = " && ".join(shlex.join(c) for c in pythonenv.install_commands(options.python, report.missing,
                                                                                  limits, wheelhouse))
        if (options.offline and wheelhouse is None) or problems:
            problems.append(f"Python prerequisites missing in {options.python}: "
                            f"{', '.join(p.describe() for p in report.missing)} — run `{commands}` "
                            "(online, or with PIP_FIND_LINKS pointing at a wheel folder)")
    if problems:
        raise _missing_inputs(problems, options)
    if report.missing:
        report = pythonenv.install_and_recheck(report, ws, ctx.ui, lambda: pythonenv.check(
            options.python, recipe.python.build, build_env.env.get("PATH", ""), also=also, recipe=recipe),
            wheelhouse=wheelhouse)
    return report


def _missing_inputs(problems: list[str], options: RunOptions) -> BuildError:
    mode = "an offline build" if options.offline else "the build"
    return BuildError(f"{len(problems)} input{'s' if len(problems) > 1 else ''} of {mode} "
                      f"{'are' if len(problems) > 1 else 'is'} missing; nothing was run",
                      details=tuple(problems), fix="run the commands listed (or `flagtree-cpu setup`, which "
                      "does all of them), then build again")


def missing_inputs(ctx: StageContext) -> list[str]:
    """What build refuses to run without: sources sync would still move, artifacts fetch would still publish,
    pre-provisioned toolchains that are not on this host."""
    return _source_problems(ctx.recipe, ctx) + _artifact_problems(ctx.recipe, ctx) + _toolchain_problems(ctx)


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


def _source_problems(recipe: Recipe, ctx: StageContext) -> list[str]:
    """Sources sync would still move (their plan, read-only; local changes at the pin are the user's)."""
    from .plans.sources import plan_sources
    from .stages import RunOptions

    lock = read_lock(ctx.workspace.lock_file)
    return [f"source {i.subject}: {i.detail} — run `flagtree-cpu sync`"
            for i in plan_sources(ctx, lock, RunOptions(python=Path()), count_changes=False) if i.will != "ok"]


def _artifact_problems(recipe: Recipe, ctx: StageContext) -> list[str]:
    """Artifacts fetch would still publish (their plan: the same rule fetch skips by)."""
    from .plans.artifacts import plan_artifacts
    from .stages import RunOptions

    lock = read_lock(ctx.workspace.lock_file)
    return [f"artifact {i.subject}: not published and verified at {i.data['path']} — run `flagtree-cpu fetch` "
            "(offline: `flagtree-cpu fetch --offline --from FILE`)"
            for i in plan_artifacts(recipe, lock, RunOptions(python=Path())) if i.will != "ok"]


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
