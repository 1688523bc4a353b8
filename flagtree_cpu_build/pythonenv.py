"""The target Python: which interpreter, its venv, and the recipe's prerequisites in it.

The interpreter is ``--python PATH``, else the active venv, else ``{workdir}/.venv``
(created when missing). Prerequisites are checked by asking the interpreter which
distributions it has (one short process, no pip); pip runs only for what is missing or
does not satisfy its version range. A requirement with ``system_command`` (cmake, ninja)
is also satisfied by that command on PATH when its version fits.

A pin with a local label (``torch==2.10.0+cpu``) names a build: a distribution whose metadata version has no
label but the same public version meets it when the package's own ``__version__`` carries that label (PyPI's
aarch64 torch wheels: metadata 2.10.0, torch.__version__ 2.10.0+cpu); ``local_labels`` reads those in one
more run of the interpreter, only when such a pin needs it.

Given the recipe (``check(..., recipe=)``), two more things hold:

- ``python.constraints`` bind every pip run (``-c <recipe state>/constraints.txt``), and an installed
  version outside a constraint counts as missing, so pip puts it right; a requirement that no version can
  satisfy together with a constraint is refused before pip (``ConstraintConflict``, exit 2).
- ``python.preinstalled`` packages come from a vendor's installer: they are checked, never installed
  (``require_preinstalled``, exit 5), and their ranges are written into the constraints file too, so no
  pip run of the recipe replaces them.

With ``--offline`` pip never reaches an index: what is missing comes from the wheelhouse a `bundle import`
left in the workspace (``pip install --no-index --find-links <workdir>/.flagtree-cpu/wheelhouse``), or the
stage stops and lists it.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement as PipRequirement
from packaging.specifiers import SpecifierSet

from .errors import BuildError, RecipeError, RecipeProblem
from .installer import PIP, Installer, InstallFlags
from .local_labels import RuntimeVersion, runtime_versions
from .pip_constraints import PREINSTALLED_WHY, constraints_file, pip_limits
from .proc import capture, log_path, run_logged
from .recipe import Constraint, Recipe, Requirement
from .ui import UI
from .versions import allows, cannot_meet_both, meets, parsed, reads_runtime_label, same_name
from .workspace import Workspace

__all__ = ["ConstraintConflict", "Prerequisite", "PythonReport", "check", "command_version", "constraints_file",
           "ensure_interpreter", "inspect", "install", "install_and_recheck", "install_commands", "query",
           "constraint_conflicts", "offline_wheelhouse", "refuse_conflicts", "require_preinstalled",
           "wheelhouse_dir"]

_QUERY = (
    "import json, sys\n"
    "from importlib import metadata\n"
    "found, urls = {}, {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        found[name] = metadata.version(name)\n"
    "        urls[name] = metadata.distribution(name).read_text('direct_url.json')\n"
    "    except metadata.PackageNotFoundError:\n"
    "        found[name] = None\n"
    "print(json.dumps({'python': '%d.%d.%d' % sys.version_info[:3], 'found': found, 'direct_urls': urls}))\n"
)


@dataclass(frozen=True)
class Prerequisite:
    requirement: Requirement
    installed: str | None  # version in the target interpreter
    system: str | None  # version of the system command that satisfies it, if that is what does
    satisfied: bool
    violates: Constraint | None = None  # the installed version is outside this constraint (pip will put it right)
    conflict: Constraint | None = None  # no version satisfies both the requirement and this constraint
    runtime: RuntimeVersion | None = None  # its own __version__, read when a local-label pin needed it

    @property
    def name(self) -> str:
        return PipRequirement(self.requirement.requirement).name

    @property
    def version(self) -> str | None:
        """The installed version to show: the package's own __version__ when it was read (2.10.0+cpu, where
        the metadata says 2.10.0), else the metadata's."""
        return self.runtime.version if self.runtime is not None and self.runtime.version else self.installed

    @property
    def wrong_version(self) -> bool:
        """Installed, but not a version (or build) that satisfies it: pip replaces it."""
        return self.installed is not None and not self.satisfied

    def finding(self) -> str:
        """What the interpreter has, without the requirement: "missing", "installed 2.13.0", ..."""
        if self.system:
            return f"system {self.requirement.system_command} {self.system}"
        if self.conflict is not None:
            return f"cannot be met together with the constraint {_with_why(self.conflict)}"
        if self.installed is None:
            return "missing"
        note = f" ({self.runtime.note(self.satisfied)})" if self.runtime is not None else ""
        if self.violates is not None:
            return f"installed {self.installed}{note}, outside the constraint {_with_why(self.violates)}"
        return f"installed {self.installed}{note}"

    def describe(self) -> str:
        plain = self.wrong_version and self.violates is None and self.conflict is None and self.runtime is None
        return f"{self.requirement.requirement}: {'wrong version: ' if plain else ''}{self.finding()}"


@dataclass(frozen=True)
class PythonReport:
    python: Path
    version: str
    prerequisites: tuple[Prerequisite, ...]
    extra_found: Mapping[str, str | None]  # other distributions asked about (the build's own)
    preinstalled: tuple[Prerequisite, ...] = ()  # python.preinstalled, when the recipe was given
    recipe: Recipe | None = None  # whose constraints bind pip (install_and_recheck passes them on)

    @property
    def missing(self) -> list[Prerequisite]:
        """Every prerequisite not satisfied: not installed, or installed in a wrong version (pip installs both)."""
        return [p for p in self.prerequisites if not p.satisfied]

    @property
    def unmet(self) -> dict[str, str | None]:
        """{name: the installed version that does not satisfy it, or None when it is not installed}."""
        return {p.name: p.version if p.wrong_version else None for p in self.missing}

    @property
    def unprovided(self) -> list[Prerequisite]:
        """The preinstalled packages that are missing or of a version outside their range."""
        return [p for p in self.preinstalled if not p.satisfied]


def ensure_interpreter(python: Path, ws: Workspace, requires: str | None, ui: UI) -> None:
    """Create the workspace venv when it is the target and missing; refuse a wrong Python version."""
    if not python.exists():
        if python != ws.venv_dir / "bin" / "python":
            raise BuildError(f"--python {python} does not exist", fix="give the path of a python3 executable")
        ui.info(f"creating the workspace venv {ws.venv_dir} with {sys.executable}")
        result = run_logged([sys.executable, "-m", "venv", str(ws.venv_dir)], cwd=ws.root, env=_plain_env(),
                            log=log_path(ws.logs_dir, "venv"))
        if not result.ok:
            raise BuildError(f"could not create the venv {ws.venv_dir}", details=(f"log: {result.log}",),
                             fix="install the venv module (sudo apt-get install -y python3-venv), or pass --python")
    version = query(python, [])[0]
    if requires and not SpecifierSet(requires).contains(version, prereleases=True):
        raise BuildError(f"{python} is Python {version}; the recipe needs Python {requires}",
                         fix="pass --python with a suitable interpreter, or activate a venv made with one")


def query(python: Path, names: Sequence[str]) -> tuple[str, dict[str, str | None]]:
    """(Python version, {distribution: version or None}) of the target interpreter."""
    answer = inspect(python, names)
    return answer["python"], answer["found"]


def inspect(python: Path, names: Sequence[str]) -> dict:
    """One short run of the interpreter: its version, and for each distribution its version and
    PEP 610 direct_url.json (how it was installed: editable from which folder)."""
    result = capture([str(python), "-c", _QUERY, *names], env=_plain_env())
    if result.returncode != 0:
        raise BuildError(f"{python} does not run: {result.stderr.strip().splitlines()[-1:] or result.returncode}",
                         fix="check the interpreter (--python), or delete a broken workspace venv")
    return json.loads(result.stdout)


def check(python: Path, requirements: Sequence[Requirement], path: str, *,
          also: Sequence[str] = (), recipe: Recipe | None = None) -> PythonReport:
    """Which prerequisites the interpreter (or the system, for system commands) satisfies; with ``recipe``
    also within its constraints, and which of its preinstalled packages are there."""
    limits = pip_limits(recipe) if recipe is not None else ()
    preinstalled = tuple(recipe.python.preinstalled) if recipe is not None else ()
    names = [PipRequirement(r.requirement).name for r in requirements]
    vendor = [PipRequirement(r.requirement).name for r in preinstalled]
    version, found = query(python, list(dict.fromkeys([*names, *vendor, *also])))
    pins = [(PipRequirement(r.requirement).name, r.requirement) for r in (*requirements, *preinstalled)]
    pins += [(n, c.requirement) for n in dict.fromkeys(names) for c in limits if same_name(c.requirement, n)]
    runtime = runtime_versions(python, _label_reads(pins, found), _plain_env())
    statuses = []
    for requirement, name in zip(requirements, names, strict=True):
        specifier = PipRequirement(requirement.requirement).specifier
        same = [c for c in limits if same_name(c.requirement, name)]
        conflict = next((c for c in same if cannot_meet_both(requirement.requirement, c.requirement)), None)
        installed, read = found.get(name), runtime.get(name)
        own = read.version if read is not None else None
        violates = next((c for c in same if installed is not None and not allows(c.requirement, installed, own)),
                        None)
        if conflict is not None:
            statuses.append(Prerequisite(requirement, installed, None, False, violates, conflict, read))
            continue
        if installed is not None and meets(specifier, installed, own) and violates is None:
            statuses.append(Prerequisite(requirement, installed, None, True, runtime=read))
            continue
        system = command_version(requirement.system_command, path) if requirement.system_command else None
        if system is not None and meets(specifier, system) and all(allows(c.requirement, system) for c in same):
            statuses.append(Prerequisite(requirement, installed, system, True))
        else:
            statuses.append(Prerequisite(requirement, installed, None, False, violates, runtime=read))
    vendor_statuses = tuple(
        Prerequisite(r, found.get(n), None, found.get(n) is not None and meets(
            PipRequirement(r.requirement).specifier, found[n] or "", runtime[n].version if n in runtime else None),
            runtime=runtime.get(n))
        for r, n in zip(preinstalled, vendor, strict=True))
    return PythonReport(python, version, tuple(statuses), {n: found.get(n) for n in also}, vendor_statuses, recipe)


def _label_reads(pins: Sequence[tuple[str, str]], found: Mapping[str, str | None]) -> list[str]:
    """The distributions whose own __version__ must say which build they are (versions.reads_runtime_label)."""
    return list(dict.fromkeys(name for name, requirement in pins if (pip := parsed(requirement)) is not None
                              and found.get(name) and reads_runtime_label(pip.specifier, found[name] or "")))


def require_preinstalled(report: PythonReport) -> None:
    """Stop (exit 5) when a package the recipe expects from a vendor's installer is missing or of another
    version: pip cannot provide it (a vendor torch is built for the vendor's driver), so it is never tried."""
    unprovided = report.unprovided
    if not unprovided:
        return
    names = ", ".join(p.requirement.requirement for p in unprovided)
    raise BuildError(
        f"{names} must be provided by the vendor's installer (python.preinstalled), and {report.python} "
        + ("does not have a version in range" if any(p.installed for p in unprovided) else
           "does not have it" if len(unprovided) == 1 else "does not have them"),
        details=tuple(f"{p.requirement.requirement}: "
                      + (f"installed {p.installed}, outside the range" if p.installed else "missing")
                      for p in unprovided),
        fix=f"install {names} with the vendor's installer (its wheel or setup script) into {report.python}, or "
        "pass --python with the interpreter that has it; flagtree-cpu never installs python.preinstalled "
        "packages with pip")


def preinstalled_problems(report: PythonReport) -> list[str]:
    """Each python.preinstalled package the interpreter lacks, as one missing input of the build, with its fix."""
    return [f"{p.requirement.requirement} in {report.python}: "
            + (f"installed {p.installed}, outside the range" if p.installed else "missing")
            + " — install it with the vendor's installer (python.preinstalled: never pip), or pass --python with "
            "the interpreter that has it" for p in report.unprovided]


class ConstraintConflict(RecipeError):
    """A requirement of python.build/runtime that no version satisfies together with a constraint of the same
    name: the recipe contradicts itself, so it is a recipe error (exit 2), raised before pip runs — pip
    would only fail after resolving, with a message that names neither key."""

    def __init__(self, recipe: Recipe, conflicting: Sequence[Prerequisite]):
        origin = recipe.file or recipe.name
        problems = [RecipeProblem(origin, None, _key_of(recipe, p.requirement),
                                  f"{p.requirement.requirement} cannot be met together with the constraint "
                                  f"{_with_why(p.conflict)}: no version satisfies both",
                                  _conflict_fix(p)) for p in conflicting if p.conflict is not None]
        super().__init__(origin, problems, fix="make each requirement agree with the constraint of the same name "
                         "(python.constraints), then run the same command again; pip was not run")
        first = conflicting[0]
        assert first.conflict is not None
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        self.message = (f"recipe {origin}: the requirement {first.requirement.requirement} and the constraint "
                        f"{_with_why(first.conflict)} cannot both hold{more}")
        self.args = (self.message,)


def constraint_conflicts(recipe: Recipe, requirements: Sequence[Requirement]) -> list[Prerequisite]:
    """The requirements that no version satisfies together with a same-name constraint of the recipe (or a
    preinstalled package's range): known from the recipe alone, before any interpreter or pip."""
    limits = pip_limits(recipe)
    found = []
    for requirement in requirements:
        name = PipRequirement(requirement.requirement).name
        conflict = next((c for c in limits if same_name(c.requirement, name)
                         and cannot_meet_both(requirement.requirement, c.requirement)), None)
        if conflict is not None:
            found.append(Prerequisite(requirement, None, None, False, conflict=conflict))
    return found


def refuse_conflicts(recipe: Recipe, requirements: Sequence[Requirement]) -> None:
    """Raise ConstraintConflict (exit 2) when a requirement cannot be met together with a constraint."""
    conflicting = constraint_conflicts(recipe, requirements)
    if conflicting:
        raise ConstraintConflict(recipe, conflicting)


def wheelhouse_dir(ws: Workspace) -> Path:
    """Where `bundle import` puts a bundle's wheels (and the sdists of what has no wheel)."""
    return ws.state_dir / "wheelhouse"


def offline_wheelhouse(ws: Workspace) -> Path | None:
    """The imported wheelhouse, when there is one: with --offline pip installs from it and nothing else."""
    folder = wheelhouse_dir(ws)
    return folder if folder.is_dir() and any(folder.iterdir()) else None


def install(python: Path, missing: Sequence[Prerequisite], ws: Workspace, ui: UI, *,
            recipe: Recipe | None = None, wheelhouse: Path | None = None, installer: Installer = PIP) -> None:
    """Install what is missing with ``installer``, one run per package index (or one from ``wheelhouse``, with no
    index); with ``recipe`` under its constraints (a requirement that cannot meet them is refused first:
    ConstraintConflict)."""
    constraints = None
    if recipe is not None:
        refuse_conflicts(recipe, [p.requirement for p in missing])
        constraints = constraints_file(recipe, ws)
    for names, argv in _install_runs(python, missing, constraints, wheelhouse, installer):
        ui.info(f"+ {shlex.join(argv)}")
        with ui.progress("installing Python prerequisites") as task:
            result = run_logged(argv, cwd=ws.root, env=installer.env(_plain_env()),
                                log=log_path(ws.logs_dir, "prerequisites"),
                                on_line=lambda line: task.update(0, None, detail=installer.name))
        if not result.ok:
            raise BuildError(f"{installer.name} could not install the prerequisites ({', '.join(names)})"
                             + (f" from the wheelhouse {wheelhouse}" if wheelhouse else ""),
                             details=(f"log: {result.log}",),
                             fix="read the log; " + (
                                 "a wheel the bundle lacks, or one for another platform: make the bundle again "
                                 "for this machine (bundle create --platform/--target-python)" if wheelhouse else
                                 "behind a proxy set https_proxy, or install them yourself with the command above"))


def install_and_recheck(report: PythonReport, ws: Workspace, ui: UI, recheck: Callable[[], PythonReport], *,
                        wheelhouse: Path | None = None, installer: Installer = PIP) -> PythonReport:
    """Install what ``report`` says is missing, then check again: what the installer did not provide (or said it
    did: an installer that exits 0 is not believed) is an error."""
    install(report.python, report.missing, ws, ui, recipe=report.recipe, wheelhouse=wheelhouse, installer=installer)
    after = recheck()
    if after.missing:
        raise BuildError(f"Python prerequisites are still missing after {installer.name} ran",
                         details=tuple(p.describe() for p in after.missing),
                         fix=f"read the {installer.name} log (prerequisites-*.log) in {ws.logs_dir}")
    return after


def install_missing(report: PythonReport, ws: Workspace, ui: UI, recheck: Callable[[], PythonReport], *,
                    offline: bool, installer: Installer) -> Path | None:
    """What ``report`` says is missing, installed and checked again (``install_and_recheck``); the wheelhouse it came
    from. Offline, only an imported bundle's wheelhouse may provide them (the installer then reads that folder
    alone); without one, the commands to run by hand are the error."""
    wheelhouse = offline_wheelhouse(ws) if offline else None
    if offline and wheelhouse is None:
        commands = install_commands(report.python, report.missing, constraints_file(report.recipe, ws))
        raise BuildError(f"{len(report.missing)} Python prerequisites are missing in {report.python} and "
                         "--offline forbids pip", details=tuple(p.describe() for p in report.missing),
                         fix=" && ".join(shlex.join(c) for c in commands) + "   (with PIP_FIND_LINKS=<wheel "
                         "folder> PIP_NO_INDEX=1 on an air-gapped machine; or import a bundle made on a "
                         "connected machine: flagtree-cpu bundle import FILE), then run the same command again")
    ui.info(f"installer: {installer.why}")
    install_and_recheck(report, ws, ui, recheck, wheelhouse=wheelhouse, installer=installer)
    return wheelhouse


def install_commands(python: Path, missing: Sequence[Prerequisite], constraints: Path | None = None,
                     wheelhouse: Path | None = None, installer: Installer = PIP) -> list[list[str]]:
    """The installer runs that install ``missing`` (pip's, for a printed fix): one per package index, each under
    ``constraints`` (a file); with a ``wheelhouse`` one run that reads only that folder (it holds what every index
    gave)."""
    return [argv for _names, argv in _install_runs(python, missing, constraints, wheelhouse, installer)]


def _install_runs(python: Path, missing: Sequence[Prerequisite], constraints: Path | None, wheelhouse: Path | None,
                  installer: Installer) -> list[tuple[list[str], list[str]]]:
    """(the requirements, the argv) of each installer run."""
    by_index: dict[str | None, list[str]] = {}
    for prerequisite in missing:
        index = None if wheelhouse else prerequisite.requirement.index_url
        by_index.setdefault(index, []).append(prerequisite.requirement.requirement)
    return [(requirements, installer.install_argv(python, requirements, InstallFlags(
        index_url=index, find_links=wheelhouse, no_index=wheelhouse is not None, constraints=constraints)))
        for index, requirements in by_index.items()]


def _with_why(constraint: Constraint | None) -> str:
    if constraint is None:
        return ""
    return constraint.requirement + (f" ({constraint.why})" if constraint.why else "")


def _key_of(recipe: Recipe, requirement: Requirement) -> str:
    """Where a requirement sits in the recipe, e.g. python.build[2]."""
    for key in ("build", "runtime"):
        entries = getattr(recipe.python, key)
        if requirement in entries:
            return f"python.{key}[{entries.index(requirement)}]"
    return "python"


def _conflict_fix(p: Prerequisite) -> str:
    assert p.conflict is not None
    limit = p.conflict.requirement
    if p.conflict.why == PREINSTALLED_WHY:  # the vendor's package decides: the requirement must follow it
        return f"change the requirement to a range the preinstalled {limit} allows, or drop it (the vendor's " \
               "installer provides the package)"
    return (f"change the requirement to a range the constraint allows (e.g. {limit}), or, when the constraint's "
            f"reason no longer holds, change or remove {limit} in python.constraints")


def command_version(command: str, path: str) -> str | None:
    executable = shutil.which(command, path=path)
    if executable is None:
        return None
    result = capture([executable, "--version"], timeout_s=20)
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", result.stdout + result.stderr)
    return match.group(1) if match else None


def _plain_env() -> dict[str, str]:
    """The caller's environment for Python and pip, without a venv activation that is not the target."""
    import os

    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env
