"""Where a pre-provisioned toolchain is on this host, and whether what is there will do.

Users keep a toolkit where their own environment has it, not where a recipe's author guessed: a CUDA torch in the
venv on PATH, a vendor SDK in ``/opt/vendor`` or ``~/vendor``. So each place is judged in turn -- the folder, the
files the recipe expects in it, the version read from a file or a command against the recipe's range -- and the
first that fits is the toolchain. FLAGTREE_CPU_TOOLCHAIN_<NAME> is the user's explicit word: only that place.

Everything read here comes from outside: a version file is read capped (a FIFO or /dev/zero is refused), a version
command and an interpreter run bounded in time and output (``proc.capture_bounded``), and what an interpreter
answers is type-checked before use.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .recipe.toolchain import Toolchain

if TYPE_CHECKING:
    from .host import HostFacts
    from .recipe.model import Recipe

VERSION_BYTES = 64 * 1024  # a version file or a --version answer; more is not a version
QUERY_TIMEOUT_S = 120.0  # `import torch` of a large CUDA build takes seconds on a cold disk
_DEFAULT_VERSION = r"\d+(?:\.\d+)+"

# asked of an interpreter: where MODULE lives and the value of its ATTR (one JSON line, last on stdout)
_QUERY = """\
import importlib, json, sys
try:
    mod = importlib.import_module(sys.argv[1])
except BaseException as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]})); raise SystemExit(0)
value = mod
for part in [p for p in sys.argv[2].split(".") if p]:
    value = getattr(value, part, None)
folder = getattr(mod, "__path__", None)
print(json.dumps({"folder": list(folder)[0] if folder else None, "file": getattr(mod, "__file__", None),
                  "value": None if value is None else str(value)}))
"""


@dataclass(frozen=True)
class Place:
    """One place a toolchain was looked for, and what was found there."""

    origin: str  # how it came to be looked at: "path", "paths[1]", "FLAGTREE_CPU_TOOLCHAIN_CUDA", "torch of ..."
    path: str  # "" when an interpreter has no such module
    missing: tuple[str, ...] = ()  # the folder, else expected files, absent there
    wrong: str | None = None  # anything else that rules it out: a version outside the range, no module ...
    version: str | None = None

    @property
    def fits(self) -> bool:
        return not self.missing and self.wrong is None

    def reason(self) -> str:
        if self.missing:
            return f"missing {', '.join(self.missing)}"
        return self.wrong or "fits"


@dataclass(frozen=True)
class Search:
    """Every place looked at, in order; ``chosen`` is the first that fits, else the one the problem is told about."""

    places: tuple[Place, ...]
    chosen: Place | None

    @property
    def found(self) -> bool:
        return self.chosen is not None and self.chosen.fits

    def others(self) -> list[str]:
        """The places that did not do, each with its reason (for a failure's detail)."""
        return [f"{p.origin}: {p.reason()}" for p in self.places if p is not self.chosen]


def locate(name: str, toolchain: Toolchain, *, override_var: str, environ: Mapping[str, str],
           interpreters: Sequence[tuple[str, Path]]) -> Search:
    """Judge each place ``toolchain`` may be in (its fields already resolved) and choose one.

    ``interpreters`` are (label, python) pairs asked in order when the toolchain has ``discover``."""
    given = environ.get(override_var)
    if given:
        place = judge(given, toolchain, origin=override_var)
        return Search((place,), place)
    places: list[Place] = []
    if toolchain.discover is not None:
        places += [_discovered(toolchain, label, python) for label, python in _distinct(interpreters)]
    home = environ.get("HOME", "")
    fixed = [("path", toolchain.path)] if toolchain.path else []
    fixed += [(f"paths[{i}]", p) for i, p in enumerate(toolchain.paths)]
    places += [judge(_home(p, home), toolchain, origin=origin) for origin, p in fixed]
    fitting = next((p for p in places if p.fits), None)
    return Search(tuple(places), fitting or _told_about(places))


def judge(path: str, toolchain: Toolchain, *, origin: str, discovered: str | None = None) -> Place:
    """The place ``path``: its folder and expected files, then its version against the recipe's range."""
    root = Path(path)
    if not root.is_dir():
        return Place(origin, path, missing=(str(root),))
    absent = tuple(str(root / f) for f in toolchain.expect if not (root / f).exists())
    if absent:
        return Place(origin, path, missing=absent)
    rule = toolchain.version
    if rule is None:
        return Place(origin, path, version=discovered)
    if not (rule.file or rule.command):  # only a range: it judges what `discover` read, a fixed folder has none
        if discovered is None:
            return Place(origin, path)
        version, problem = discovered, None
    else:
        version, problem = _read_version(root, rule.file, rule.command, rule.regex)
    if problem is not None:
        return Place(origin, path, wrong=problem)
    if rule.range and not _in_range(version or "", rule.range):
        return Place(origin, path, wrong=f"found {version} at {path}, the recipe needs {rule.range}", version=version)
    return Place(origin, path, version=version)


def _discovered(toolchain: Toolchain, label: str, python: Path) -> Place:
    assert toolchain.discover is not None
    wanted = toolchain.discover.python
    origin = f"{wanted.module} of {python} ({label})"
    answer, problem = _ask(python, wanted.module, wanted.attr or "")
    if problem is not None:
        return Place(origin, "", wrong=problem)
    folder = answer.get("folder") or (os.path.dirname(answer["file"]) if answer.get("file") else None)
    if not folder:
        return Place(origin, "", wrong=f"{wanted.module} has no folder there (a namespace or built-in module)")
    if wanted.attr and answer.get("value") is None:
        return Place(origin, folder, wrong=f"{wanted.module} at {folder} has no {wanted.module}.{wanted.attr} "
                     "(None: a build without it)")
    return judge(folder, toolchain, origin=origin, discovered=answer.get("value"))


def _ask(python: Path, module: str, attr: str) -> tuple[dict, str | None]:
    """What ``python`` says of ``module``: {folder, file, value}, or a problem in words."""
    from .proc import capture_bounded

    if not os.access(python, os.X_OK):
        return {}, f"{python} does not exist"
    try:  # cwd /: a folder named like the module in the caller's cwd must not shadow the installed one
        done = capture_bounded([str(python), "-c", _QUERY, module, attr], limit=VERSION_BYTES, cwd=Path("/"),
                               timeout_s=QUERY_TIMEOUT_S)
    except OSError as exc:
        return {}, f"{python} does not run ({exc.strerror or exc})"
    if done.timed_out or done.overflowed:
        return {}, f"{python} did not answer ({'no answer in time' if done.timed_out else 'too much output'})"
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not all(v is None or isinstance(v, str) for v in answer.values()):
        tail = (done.stderr.strip().splitlines() or ["no answer"])[-1][:200]
        return {}, f"{python} gave no answer about {module} ({tail})"
    if answer.get("error"):
        return {}, f"no {module} there ({answer['error']})"
    return answer, None


def _read_version(root: Path, file: str | None, command: Sequence[str], regex: str | None) -> tuple[str | None,
                                                                                                    str | None]:
    """(version, None), or (None, why it could not be read)."""
    from .proc import capture_bounded
    from .regular_file import read_capped

    if file is not None:
        where = str(root / file)
        try:  # a FIFO, a device or a huge file is refused, never read
            text = read_capped(root / file, VERSION_BYTES).decode("utf-8", "replace")
        except OSError as exc:
            return None, f"could not read its version file {where}: {exc.strerror or exc}"
    else:
        program = command[0] if "/" not in command[0] or os.path.isabs(command[0]) else str(root / command[0])
        where = " ".join([program, *command[1:]])
        try:
            done = capture_bounded([program, *command[1:]], limit=VERSION_BYTES, timeout_s=60.0, cwd=root)
        except OSError as exc:
            return None, f"could not run `{where}`: {exc.strerror or exc}"
        if done.timed_out or done.overflowed or done.returncode != 0:
            why = "no answer in time" if done.timed_out else "too much output" if done.overflowed \
                else f"exit {done.returncode}"
            return None, f"`{where}` gave no version ({why})"
        text = done.stdout + "\n" + done.stderr
    found = re.search(regex or _DEFAULT_VERSION, text)
    if found is None:
        return None, f"no version in {where} (looked for /{regex or _DEFAULT_VERSION}/)"
    return (found.group(1) if found.groups() else found.group(0)).strip()[:64], None


def _in_range(version: str, specifier: str) -> bool:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _distinct(interpreters: Sequence[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """One per environment: a venv's python and python3 are the same place (its bin folder)."""
    seen: set[str] = set()
    kept = []
    for label, python in interpreters:
        key = os.path.abspath(python.parent)
        if key not in seen:
            seen.add(key)
            kept.append((label, python))
    return kept


def _told_about(places: list[Place]) -> Place | None:
    """The place a failure is told about: the nearest miss first -- a version outside the range, then a folder that
    exists -- else the first fixed folder, else the first place looked at."""
    versioned = [p for p in places if p.version is not None]
    exists = [p for p in places if p.path and Path(p.path).is_dir()]
    fixed = [p for p in places if p.origin == "path" or p.origin.startswith("paths[")]
    return (versioned or exists or fixed or places or [None])[0]


def _home(path: str, home: str) -> str:
    return home + path[1:] if home and (path == "~" or path.startswith("~/")) else path


def interpreters_to_ask(target: Path | None, environ: Mapping[str, str]) -> list[tuple[str, Path]]:
    """The target interpreter, the python3 on PATH, the active venv's: where the user's own environment is."""
    found: list[tuple[str, Path]] = []
    if target is not None:
        found.append(("the target interpreter", target))
    on_path = shutil.which("python3", path=environ.get("PATH", os.defpath))
    if on_path:
        found.append(("python3 on PATH", Path(on_path)))
    venv = environ.get("VIRTUAL_ENV")
    if venv:
        found.append(("the active venv, VIRTUAL_ENV", Path(venv) / "bin" / "python"))
    return found


def with_located(recipe: Recipe, resolve_again: Callable[[dict[str, str]], Recipe], *, host: HostFacts, python: Path,
                 environ: Mapping[str, str]) -> Recipe:
    """``recipe`` (resolved) with each toolchain this host needs looked for, the search kept on it (``searched``);
    where a toolchain was found elsewhere than its first folder, resolved again so every placeholder names it."""
    from .recipe.resolve import toolchain_override_var

    wanted = recipe.toolchains_on(recipe.facts_on(host))
    if not wanted:
        return recipe
    asked = interpreters_to_ask(python, environ)
    searches = {name: locate(name, t, override_var=toolchain_override_var(name), environ=environ, interpreters=asked)
                for name, t in wanted.items()}
    found = {name: s.chosen.path for name, s in searches.items() if s.chosen is not None and s.chosen.path}
    if any(recipe.toolchains[name].path != path for name, path in found.items()):
        recipe = resolve_again(found)
    toolchains = {name: replace(t, searched=searches.get(name)) for name, t in recipe.toolchains.items()}
    return replace(recipe, toolchains=toolchains)


def toolchain_verdict(toolchain: Toolchain) -> Search:
    """The search made when the context was opened, else (a recipe resolved without one) its folder judged now."""
    if isinstance(toolchain.searched, Search):
        return toolchain.searched
    place = judge(toolchain.path or "", toolchain, origin="path")
    return Search((place,), place)
