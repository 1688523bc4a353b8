"""The target Python: which interpreter, its venv, and the recipe's prerequisites in it.

The interpreter is ``--python PATH``, else the active venv, else ``{workdir}/.venv``
(created when missing). Prerequisites are checked by asking the interpreter which
distributions it has (one short process, no pip); pip runs only for what is missing or
does not satisfy its version range. A requirement with ``system_command`` (cmake, ninja)
is also satisfied by that command on PATH when its version fits.
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
from packaging.version import InvalidVersion, Version

from .errors import BuildError
from .proc import capture, log_path, run_logged
from .recipe import Requirement
from .ui import UI
from .workspace import Workspace

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

    @property
    def name(self) -> str:
        return PipRequirement(self.requirement.requirement).name

    def describe(self) -> str:
        if self.system:
            return f"{self.requirement.requirement}: system {self.requirement.system_command} {self.system}"
        return f"{self.requirement.requirement}: {'installed ' + self.installed if self.installed else 'missing'}"


@dataclass(frozen=True)
class PythonReport:
    python: Path
    version: str
    prerequisites: tuple[Prerequisite, ...]
    extra_found: Mapping[str, str | None]  # other distributions asked about (the build's own)

    @property
    def missing(self) -> list[Prerequisite]:
        return [p for p in self.prerequisites if not p.satisfied]


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
          also: Sequence[str] = ()) -> PythonReport:
    """Which prerequisites the interpreter (or the system, for system commands) satisfies."""
    names = [PipRequirement(r.requirement).name for r in requirements]
    version, found = query(python, [*names, *also])
    statuses = []
    for requirement, name in zip(requirements, names, strict=True):
        specifier = PipRequirement(requirement.requirement).specifier
        installed = found.get(name)
        if installed is not None and _fits(specifier, installed):
            statuses.append(Prerequisite(requirement, installed, None, True))
            continue
        system = command_version(requirement.system_command, path) if requirement.system_command else None
        if system is not None and _fits(specifier, system):
            statuses.append(Prerequisite(requirement, installed, system, True))
        else:
            statuses.append(Prerequisite(requirement, installed, None, False))
    return PythonReport(python, version, tuple(statuses), {n: found.get(n) for n in also})


def install(python: Path, missing: Sequence[Prerequisite], ws: Workspace, ui: UI) -> None:
    """pip install what is missing, one pip run per package index."""
    for argv in install_commands(python, missing):
        ui.info(f"+ {shlex.join(argv)}")
        with ui.progress("installing Python prerequisites") as task:
            result = run_logged(argv, cwd=ws.root, env=_plain_env(), log=log_path(ws.logs_dir, "prerequisites"),
                                on_line=lambda line: task.update(0, None, detail="pip"))
        if not result.ok:
            raise BuildError(f"pip could not install the prerequisites ({', '.join(argv[5:])})",
                             details=(f"log: {result.log}",),
                             fix="read the log; behind a proxy set https_proxy, or install them yourself with the "
                             "command above")


def install_and_recheck(report: PythonReport, ws: Workspace, ui: UI,
                        recheck: Callable[[], PythonReport]) -> PythonReport:
    """pip install what ``report`` says is missing, then check again: what pip did not provide is an error."""
    install(report.python, report.missing, ws, ui)
    after = recheck()
    if after.missing:
        raise BuildError("Python prerequisites are still missing after pip ran",
                         details=tuple(p.describe() for p in after.missing),
                         fix=f"read the pip log in {ws.logs_dir}")
    return after


def install_commands(python: Path, missing: Sequence[Prerequisite]) -> list[list[str]]:
    by_index: dict[str | None, list[str]] = {}
    for prerequisite in missing:
        by_index.setdefault(prerequisite.requirement.index_url, []).append(prerequisite.requirement.requirement)
    commands = []
    for index, requirements in by_index.items():
        argv = [str(python), "-m", "pip", "install", *requirements]
        if index:
            argv += ["--index-url", index]
        commands.append(argv)
    return commands


def command_version(command: str, path: str) -> str | None:
    executable = shutil.which(command, path=path)
    if executable is None:
        return None
    result = capture([executable, "--version"], timeout_s=20)
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", result.stdout + result.stderr)
    return match.group(1) if match else None


def _fits(specifier: SpecifierSet, version: str) -> bool:
    try:
        return specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _plain_env() -> dict[str, str]:
    """The caller's environment for Python and pip, without a venv activation that is not the target."""
    import os

    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env
