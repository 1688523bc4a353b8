"""setup's preflight: the fast, blocking subset of doctor, run before anything is changed.

Each check here would make a later stage fail after minutes (no git, a host the recipe does not
build on, a missing pre-provisioned toolchain, a full disk), so all of them are listed at once, each
with its fix, and setup stops with exit 7. ``--ignore-host`` turns failures into warnings (except a
missing git); the recipe's missing apt packages are a warning with the one command that installs
them, run only with ``--install-system-packages`` (``system_packages`` does both). ``would_stop``
tells `setup --dry-run` where the real run would stop.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import DoctorFailed, FlagtreeCpuError
from .stagekit.stage import Action, RunOptions, StageContext, StageResult
from .system_packages import missing_system_packages as missing_system_packages  # importable here, as before
from .system_packages import system_install_argv as system_install_argv
from .system_packages import system_packages_action

if TYPE_CHECKING:
    from .doctor import DoctorReport, Finding
    from .stagekit.plan import PlanItem


# Without git nothing can be cloned, whatever --ignore-host says.
NEVER_IGNORED = ("toolchain.git",)
# the stages that fetch and place inputs: a check blocking none of them blocks only the build and what follows it
_PREPARING = ("sources", "artifacts", "links")


def stages_to_run(options: RunOptions) -> tuple[str, ...]:
    """The stages setup runs with these options (the others say why they are skipped)."""
    from .stages.registry import STAGES

    return tuple(s.name for s in STAGES if s.skip(options) is None)


def preflight_checks(options: RunOptions, stages: Iterable[str] | None = None) -> tuple[str, ...]:
    """Doctor's checks that block a stage about to run (``Check.blocks``: doctor's rule list is the preflight's);
    ``stages``: those stages (setup's, by default)."""
    from .doctor import all_checks

    running = set(stages_to_run(options) if stages is None else stages)
    return tuple(c.id for c in all_checks() if running & set(c.blocks))


def build_only(check_id: str) -> bool:
    """A check that blocks only the build and what follows it: `setup --skip-build` does not run it."""
    from .doctor import all_checks

    return any(c.id == check_id and c.blocks and not set(c.blocks) & set(_PREPARING) for c in all_checks())


def run_preflight_checks(ctx: StageContext, options: RunOptions, stages: Iterable[str] | None = None,
                         leave_out: Iterable[str] = ()) -> DoctorReport:
    from .cpuinfo import read_cpu
    from .doctor import DoctorContext, run_doctor

    doctor_ctx = DoctorContext(ctx.recipe, ctx.workspace, ctx.host, read_cpu(Path("/")), Path("/"), options,
                               dict(os.environ))
    checks = tuple(c for c in preflight_checks(options, stages) if c not in set(leave_out))
    if not checks:  # run_doctor runs every check when given none
        from .doctor import DoctorReport

        return DoctorReport((), 0.0, ctx.recipe.name, "/")
    return run_doctor(doctor_ctx, checks)


@dataclass(frozen=True)
class Stop:
    """Where the real setup would stop, seen from a dry run, and the error it would stop with."""

    stage: str  # preflight, or the area of the first plan item that stops
    error: type[FlagtreeCpuError]
    reason: str

    @property
    def exit_code(self) -> int:
        return int(self.error.exit_code)

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "exit_code": self.exit_code, "reason": self.reason}


def would_stop(preflight_stops: Sequence[Finding], items: Iterable[PlanItem]) -> Stop | None:
    """Where the real setup would stop: preflight, or the first item to stop at (its own error, else its
    stage's)."""
    from .stages.registry import stage_of_area

    if preflight_stops:
        return Stop("preflight", DoctorFailed, "; ".join(f"{f.id}: {f.detail}" for f in preflight_stops))
    for item in items:
        if item.will == "stop":
            stage = stage_of_area(item.area)
            error = item.stop or (stage.error if stage else FlagtreeCpuError)
            return Stop(item.area, error, item.action.removeprefix("stop:").strip())
    return None


def blocking(findings: Iterable[Finding], options: RunOptions) -> list[Finding]:
    return [f for f in findings if f.status == "fail" and (not options.ignore_host or f.id in NEVER_IGNORED)]


def install_only_stages(options: RunOptions, *, validating: bool | None = None) -> tuple[str, ...]:
    """What an install-only board (``stages/build/install_only``) runs, as preflight stages: the install (the checks
    of what running the published build needs: ``doctor.kit.INSTALL``), and the validation when it runs
    (``validating``: setup's, by default; `build` validates nothing). It syncs, fetches and compiles nothing, so the
    build's checks (compiler, cmake, memory, git, ...) do not judge it."""
    from .doctor.kit import INSTALL

    return (INSTALL, "validate") if (options.validating if validating is None else validating) else (INSTALL,)


def skipped_for_install_only(options: RunOptions, usual: Iterable[str] | None = None) -> tuple[str, ...]:
    """The checks the usual run would make that an install-only board leaves out (they judge the build); ``usual``:
    that run's stages (setup's, by default; `build`'s is the build alone)."""
    validating = None if usual is None else "validate" in usual
    running = set(preflight_checks(options, install_only_stages(options, validating=validating)))
    return tuple(c for c in preflight_checks(options, usual) if c not in running)


def skipped_note(options: RunOptions, usual: Iterable[str] | None = None) -> str:
    """Which checks an install-only board's preflight skipped, and why (setup's detail, the dry run's line, build's
    line); ``usual`` as for ``skipped_for_install_only``."""
    skipped = skipped_for_install_only(options, usual)
    if not skipped:
        return ""
    return (f"install-only: {len(skipped)} build check{'s' if len(skipped) > 1 else ''} skipped, nothing is built "
            f"here ({', '.join(skipped)}); the wheelhouse matched the build's target class (arch, CPU features, "
            "glibc, Python) to this machine")


def run_preflight(ctx: StageContext, options: RunOptions, *, install_only: bool = False) -> StageResult:
    """setup's first stage: every blocking host problem listed at once (exit 7), before anything changes;
    ``install_only``: the board takes a published build, so only what running it needs is judged."""
    report = run_preflight_checks(ctx, options, install_only_stages(options) if install_only else None)
    stops = blocking(report.findings, options)
    if stops:
        fix = _fix("setup")
        # e.g. an x86_64 laptop preparing for an Arm board (an install-only board builds nothing: no such advice)
        if not install_only and all(build_only(f.id) for f in stops):
            fix = ("on this machine `flagtree-cpu setup --skip-build` is what works: it prepares the sources, the "
                   "downloads and the links (no build); build where the recipe can build. Otherwise " + fix)
        raise _host_problems(stops, "setup", "fail later; nothing was changed", fix)
    warnings, ignored = [], 0
    for f in report.findings:
        if f.status == "fail":
            ignored += 1
            warnings.append(f"{f.id}: {f.detail} (ignored: --ignore-host)")
        elif f.status == "warn" and f.id != "system.packages":  # that one is handled below
            warnings.append(f"{f.id}: {f.detail}" + (f" — fix: {f.fix}" if f.fix else ""))
    detail = f"{report.summary()['ok']} of {len(report.findings)} checks ok"
    if ignored:
        detail += f", {ignored} failed (ignored: --ignore-host)"
    status = "ok"
    if install_only and skipped_note(options):
        detail += f"; {skipped_note(options)}"
    # an install-only board makes a venv (python3-venv) and compiles nothing: the build's packages are not wanted
    packages = system_packages_action(ctx, install=options.install_system_packages, offline=options.offline,
                                      stages=("python",) if install_only else stages_to_run(options))
    if packages is not None:
        missing = packages.data.get("missing") or packages.data.get("installed")
        if packages.status == "created":
            status, detail = "created", f"{detail}; installed {len(missing)} system packages"
        else:
            detail += f"; {len(missing)} system packages missing"
            warnings.append(packages.detail)
    data = {"checks": [f.to_json() for f in report.findings], **(packages.data if packages else {}),
            **({"skipped_checks": list(skipped_for_install_only(options))} if install_only else {})}
    return StageResult("preflight", (Action("host", status, detail, data),), tuple(warnings))


# What the build itself lists with every other missing input (sources, downloads, prerequisites: `build --offline`
# names them all at once); stopped on here, they would be named alone and hide the rest.
LISTED_BY_THE_BUILD = ("python.preinstalled", "toolchain.provisioned")


def check_host_for_build(ctx: StageContext, options: RunOptions, *, install_only: bool = False) -> list[str]:
    """`build`'s preflight: doctor's checks that block the build (setup's preflight runs them too), every blocking
    problem listed at once (DoctorFailed, exit 7, as doctor and setup give); the failures --ignore-host let
    through, by id. ``install_only``: the board installs a published build (``install_board``), so only what
    running it needs is judged, and which build checks were skipped is said."""
    stages = install_only_stages(options, validating=False) if install_only else ("build",)
    report = run_preflight_checks(ctx, options, stages, leave_out=LISTED_BY_THE_BUILD)
    stops = blocking(report.findings, options)
    if stops:
        if install_only:  # e.g. a CPU without the features the published build was compiled for
            raise _host_problems(stops, "installing the wheelhouse's build", "fail; nothing was installed",
                                 _fix("build"))
        raise _host_problems(stops, "build", "fail; nothing was run", _fix("build"))
    if install_only and (note := skipped_note(options, ("build",))):
        ctx.ui.info(f"preflight: {note}")
    return [f.id for f in report.findings if f.status == "fail"]


def _fix(command: str) -> str:
    return (f"fix them and run {command} again (`flagtree-cpu doctor` shows every check); --ignore-host proceeds "
            "anyway, for testing")


def _host_problems(stops: Sequence[Finding], command: str, outcome: str, fix: str) -> DoctorFailed:
    details: list[str] = []
    for f in stops:
        details += [f"{f.id}: {f.detail}"] + ([f"   fix: {f.fix}"] if f.fix else [])
    return DoctorFailed(f"{len(stops)} problem{'s' if len(stops) > 1 else ''} on this machine would make {command} "
                        f"{outcome}", details=tuple(details), fix=fix)
