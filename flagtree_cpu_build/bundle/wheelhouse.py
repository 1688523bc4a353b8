"""The wheelhouse of a bundle: the Python prerequisites of a recipe stack, downloaded for the TARGET machine.

``pip download --only-binary=:all: --platform ... --python-version ...`` resolves for another machine than this
one; pip allows that only for wheels. So the wheels come first, one pip run per package index (as
``pythonenv.install_commands`` groups them: torch from its own index), every run under the recipe's
constraints (``-c``). Where pip finds no wheel for one of the recipe's own requirements, its source
distribution is downloaded alone (``--no-deps --no-binary :all:``, no platform options: an sdist is the same
everywhere), the dependencies its metadata states are added to the wheel run, and the wheel run goes on
without it. A dependency of a dependency that has no wheel cannot be left out of pip's resolution, so it is an
error naming both and the way out.

``python.preinstalled`` is never downloaded (the vendor's installer provides it). Requirements that a
``system_command`` may satisfy are downloaded all the same: the target may lack the command.
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PipRequirement
from packaging.utils import canonicalize_name

from ..errors import ArtifactError, UsageError
from ..proc import log_path, run_logged
from ..recipe import Recipe
from ..ui import UI

_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
# pip: "No matching distribution found for fixture-src (from fixture-app)" (the "from" part: who needs it)
# pip names the requirement it found no wheel for, and the one that needs it, on two lines; which line carries
# "(from <parent>)" depends on pip's version (23.2, what `python3.11 -m venv` brings: only the first; 24 and
# later: both), so both are read
_NO_MATCH = re.compile(r"(?:No matching distribution found for|Could not find a version that satisfies the "
                       r"requirement) (.+?)(?: \(from (?!versions:)([^)]+)\))?(?: \(from versions: [^)]*\))?\s*$",
                       re.MULTILINE)
_SDIST_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz")
_MAX_ROUNDS = 50
PIP_OPTIONS = ("--disable-pip-version-check", "--no-input", "--progress-bar", "off")


@dataclass(frozen=True)
class WheelTarget:
    platforms: tuple[str, ...]  # the wheel platform tags pip may take, best first
    python: str  # "3.12"


@dataclass(frozen=True)
class Wheelhouse:
    files: tuple[Path, ...]  # every wheel and sdist downloaded, sorted by name
    sdists: tuple[str, ...]  # the requirements that came as source distributions
    warnings: tuple[str, ...] = ()


# --- the target's tags -----------------------------------------------------------------------------------


def parse_platform(tag: str) -> tuple[str, str | None]:
    """(arch, glibc) a wheel platform tag names: manylinux_2_28_aarch64 -> ("aarch64", "2.28"); a legacy
    manylinux2014_x86_64 -> ("x86_64", "2.17"); linux_riscv64 -> ("riscv64", None)."""
    if match := _MANYLINUX.fullmatch(tag):
        return match.group(3), f"{match.group(1)}.{match.group(2)}"
    prefix, _, arch = tag.partition("_")
    if prefix in _LEGACY and arch:
        major, minor = _LEGACY[prefix]
        return arch, f"{major}.{minor}"
    if prefix == "linux" and arch:
        return arch, None
    raise UsageError(f"--platform {tag}: not a Linux wheel platform tag",
                     fix="give a tag like manylinux_2_28_aarch64, manylinux2014_x86_64 or linux_riscv64 (what "
                     "`pip debug --verbose` lists under 'Compatible tags' on the target)")


def platform_tags(arch: str, glibc: str | None, given: Sequence[str] = ()) -> tuple[str, ...]:
    """The tags pip may take for a glibc ``glibc`` machine of ``arch``: the ones given, then every older
    manylinux tag of the arch (a glibc 2.28 machine runs manylinux2014 wheels too; pip itself adds none of
    them when --platform is given)."""
    tags = list(dict.fromkeys(given))
    version = _glibc_tuple(glibc)
    if version is None:  # unknown glibc: the oldest widely built one
        version = (2, 17)
    floor = 5 if arch in ("x86_64", "i686") else 17
    for minor in range(version[1], floor - 1, -1):
        tags.append(f"manylinux_{version[0]}_{minor}_{arch}")
        tags += [f"{legacy}_{arch}" for legacy, (_, legacy_minor) in _LEGACY.items() if legacy_minor == minor
                 and (legacy == "manylinux2014" or arch in ("x86_64", "i686"))]
    return tuple(dict.fromkeys(tags))


def _glibc_tuple(glibc: str | None) -> tuple[int, int] | None:
    parts = (glibc or "").split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return int(parts[0]), int(parts[1])
    return None


# --- what to download ------------------------------------------------------------------------------------


def requirement_groups(stack: Sequence[Recipe], *, runtime_only: bool = False) -> dict[str | None, list[str]]:
    """The build and run-time requirements (``runtime_only``: the run-time ones) of every recipe of the stack,
    bottom first, per package index (None: pip's default index); each requirement once."""
    groups: dict[str | None, list[str]] = {}
    for recipe in stack:
        for requirement in (*(() if runtime_only else recipe.python.build), *recipe.python.runtime):
            group = groups.setdefault(requirement.index_url, [])
            if requirement.requirement not in group:
                group.append(requirement.requirement)
    return groups


def download_wheelhouse(groups: dict[str | None, list[str]], target: WheelTarget, dest: Path, *,
                        constraints: Path | None, ui: UI, logs_dir: Path, cwd: Path) -> Wheelhouse:
    """Every requirement of ``groups`` (and what it needs) into ``dest``, for ``target``."""
    import importlib.util

    if importlib.util.find_spec("pip") is None:
        raise UsageError(f"the Python that runs flagtree-cpu ({sys.executable}) has no pip, which downloads the "
                         "wheelhouse", fix=f"{sys.executable} -m ensurepip (or install flagtree-cpu where pip is, "
                         "e.g. with pipx)")
    dest.mkdir(parents=True, exist_ok=True)
    sdists: list[str] = []
    warnings: list[str] = []
    for index, requirements in groups.items():
        _download_index(index, list(requirements), target, dest, constraints, ui, logs_dir, cwd, sdists, warnings)
    files = tuple(sorted((p for p in dest.iterdir() if p.is_file()), key=lambda p: p.name))
    return Wheelhouse(files, tuple(sdists), tuple(warnings))


def is_sdist(name: str) -> bool:
    return name.endswith(_SDIST_SUFFIXES)


def _download_index(index: str | None, requirements: list[str], target: WheelTarget, dest: Path,
                    constraints: Path | None, ui: UI, logs_dir: Path, cwd: Path, sdists: list[str],
                    warnings: list[str]) -> None:
    """One index's requirements. Each round that fails on a missing wheel takes one requirement out of pip's
    resolution: the one without a wheel (its sdist is kept) or the one that needs it (its wheel is kept, and
    its own dependencies take its place), until pip resolves the rest."""
    where = f" from {index}" if index else ""
    for _ in range(_MAX_ROUNDS):
        if not requirements:
            return
        argv = [*_pip("download"), "--dest", str(dest), *_binary_for(target), *requirements,
                *_index_options(index, constraints)]
        ok, output, log = _run_pip(argv, f"downloading wheels{where}", ui, logs_dir, cwd)
        if ok:
            return
        missing, parent = _no_wheel_for(output)
        top = _matching(requirements, missing) if missing else None
        needing = _matching(requirements, parent) if parent and top is None else None
        if top is not None:
            ui.info(f"no wheel of {top} for {target.platforms[0]} Python {target.python}: its source distribution "
                    "goes into the wheelhouse instead")
            sdist = _download_one(top, index, dest, constraints, ui, logs_dir, cwd, None)
            sdists.append(top)
            needs, dynamic = sdist_dependencies(sdist)
            if dynamic:
                warnings.append(f"{sdist.name} does not state its dependencies (they are computed when it is "
                                "built): the wheelhouse may lack some of them")
            taken = top
        elif needing is not None:
            wheel = _download_one(needing, index, dest, constraints, ui, logs_dir, cwd, target)
            needs, taken = wheel_dependencies(wheel, PipRequirement(needing).extras), needing
        else:
            raise _pip_failed(argv, output, log, missing, parent)
        requirements.remove(taken)
        requirements += [n for n in needs if n not in requirements]
    raise ArtifactError(f"pip could not download the Python prerequisites{where}: {_MAX_ROUNDS} rounds each found "
                        "another requirement without a wheel", fix=f"read the pip logs in {logs_dir}")


def _binary_for(target: WheelTarget) -> list[str]:
    return ["--only-binary=:all:", "--implementation", "cp", "--python-version", target.python,
            *_each("--platform", target.platforms)]


def _download_one(requirement: str, index: str | None, dest: Path, constraints: Path | None, ui: UI,
                  logs_dir: Path, cwd: Path, target: WheelTarget | None) -> Path:
    """``requirement`` alone (no dependencies): its wheel for ``target``, or with None its source distribution
    (the same for every machine, so no platform options)."""
    before = {p.name for p in dest.iterdir()}
    what = "wheel" if target is not None else "source distribution"
    argv = [*_pip("download"), "--dest", str(dest), "--no-deps",
            *(_binary_for(target) if target is not None else ["--no-binary", ":all:"]), requirement,
            *_index_options(index, constraints)]
    ok, output, log = _run_pip(argv, f"downloading the {what} of {requirement}", ui, logs_dir, cwd)
    if not ok:
        raise ArtifactError(f"pip could not download the {what} of {requirement}"
                            + (" (it has no wheel for the target either)" if target is None else ""),
                            details=(f"log: {log}", *_tail(output)),
                            fix="check the requirement and its index_url in the recipe; or pass --platform with "
                            "a tag its wheels are built for")
    name = canonicalize_name(PipRequirement(requirement).name)
    candidates = [dest / n for n in sorted({p.name for p in dest.iterdir()} - before)] or list(dest.iterdir())
    found = [p for p in candidates if _project_of(p.name) == name and (target is None) == is_sdist(p.name)]
    if not found:
        raise ArtifactError(f"pip reported the {what} of {requirement} downloaded, but it is not in {dest}",
                            details=(f"log: {log}",), fix="run the same command again with --verbose and report it")
    return found[0]


def wheel_dependencies(wheel: Path, extras: set[str]) -> list[str]:
    """The Requires-Dist of a wheel's METADATA; those of an extra only when ``extras`` asks for it."""
    from packaging.markers import Marker

    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            text = archive.read(names[0]).decode("utf-8", "replace") if names else ""
    except (OSError, zipfile.BadZipFile, KeyError):
        text = ""
    needs = []
    for line in HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
        requirement = PipRequirement(line)
        marker = str(requirement.marker or "")
        if "extra" in marker:
            if not any(Marker(marker).evaluate({"extra": extra}) for extra in extras):
                continue
            requirement.marker = None
        needs.append(str(requirement))
    return needs


def sdist_dependencies(sdist: Path) -> tuple[list[str], bool]:
    """The Requires-Dist of an sdist's PKG-INFO (metadata 2.2 states them when they are not computed), and
    whether they are dynamic (unknown until built)."""
    text = _pkg_info(sdist)
    if text is None:
        return [], True
    headers = HeaderParser().parsestr(text)
    version = tuple(int(x) for x in re.findall(r"\d+", headers.get("Metadata-Version", "1.0"))[:2])
    dynamic = {d.strip().lower() for d in headers.get_all("Dynamic") or []}
    if version < (2, 2) or "requires-dist" in dynamic:
        return [], True
    return [r.strip() for r in headers.get_all("Requires-Dist") or []], False


def _pkg_info(sdist: Path) -> str | None:
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as archive:
                names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO")]
                return archive.read(names[0]).decode("utf-8", "replace") if names else None
        with tarfile.open(sdist) as archive:
            for member in archive:
                if member.isfile() and member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                    extracted = archive.extractfile(member)
                    return extracted.read().decode("utf-8", "replace") if extracted else None
    except (OSError, tarfile.TarError, zipfile.BadZipFile, KeyError):
        return None
    return None


def _project_of(file_name: str) -> str:
    """The project a wheel or sdist file is of (name-version[-tags].ext)."""
    if file_name.endswith(".whl"):
        return canonicalize_name(file_name.split("-", 1)[0])
    stem = next((file_name[: -len(s)] for s in _SDIST_SUFFIXES if file_name.endswith(s)), file_name)
    return canonicalize_name(stem.rsplit("-", 1)[0])


# --- pip ---------------------------------------------------------------------------------------------------


def _pip(command: str) -> list[str]:
    # the tool's own pip: the target interpreter is on another machine
    return [sys.executable, "-m", "pip", command, *PIP_OPTIONS]


def _each(option: str, values: Sequence[str]) -> list[str]:
    return [x for value in values for x in (option, value)]


def _index_options(index: str | None, constraints: Path | None) -> list[str]:
    return [*(["--index-url", index] if index else []), *(["-c", str(constraints)] if constraints else [])]


def _run_pip(argv: list[str], what: str, ui: UI, logs_dir: Path, cwd: Path) -> tuple[bool, str, Path]:
    lines: list[str] = []
    log = log_path(logs_dir, "bundle-pip")
    with ui.progress(what) as task:
        def seen(line: str, update: Callable[..., None] = task.update) -> None:
            lines.append(line)
            if line.startswith("Collecting"):
                update(0, None, detail=line.split(" (", 1)[0][:80])
            elif line.startswith(("Saved ", "File was already downloaded ")):
                update(0, None, detail="saved " + line.rstrip().rsplit("/", 1)[-1][:80])

        result = run_logged(argv, cwd=cwd, env=_pip_env(), log=log, on_line=seen)
    return result.ok, "\n".join(lines), log


def _pip_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    env.pop("PIP_REQUIRE_VIRTUALENV", None)  # pip download installs nothing
    return env


def _no_wheel_for(output: str) -> tuple[str | None, str | None]:
    """The requirement pip found no wheel for, and the one that needs it (None: a requirement of ours)."""
    found = _NO_MATCH.findall(output)
    if not found:
        return None, None
    missing = found[-1][0].strip()
    parents = [parent.strip() for name, parent in found if name.strip() == missing and parent.strip()]
    return missing, parents[-1] if parents else None


def _matching(requirements: list[str], missing: str) -> str | None:
    """The recipe's requirement ``missing`` names (pip prints the name, perhaps with the version range)."""
    try:
        name = canonicalize_name(PipRequirement(missing).name)
    except InvalidRequirement:
        return None
    return next((r for r in requirements if canonicalize_name(PipRequirement(r).name) == name), None)


def _tail(output: str, lines: int = 8) -> tuple[str, ...]:
    return tuple(line for line in output.splitlines()[-lines:] if line.strip())


def _pip_failed(argv: list[str], output: str, log: Path, missing: str | None, parent: str | None) -> ArtifactError:
    if missing:
        needed_by = f", which {parent} needs," if parent else ""
        return ArtifactError(
            f"no wheel of {missing}{needed_by} for the target platform and Python", details=(f"log: {log}",),
            fix=f"add {parent or missing} to the recipe's python.build (then it is taken out of pip's resolution "
            "and whatever has no wheel is bundled as a source distribution), or pin a version that has a wheel "
            "for the target (python.constraints); check the tags with --platform")
    return ArtifactError("pip could not download the Python prerequisites", details=(f"log: {log}", *_tail(output)),
                         fix="read the log; behind a proxy set https_proxy; the command was: " + " ".join(argv))
