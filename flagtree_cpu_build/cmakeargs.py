"""What a build's ``cmake:`` block (``recipe.cmake``) hands to CMake: the arguments, and the FetchContent folders the
build refuses to run without.

The arguments are ``-DNAME=VALUE`` per definition, ``-DFETCHCONTENT_SOURCE_DIR_<NAME>=<folder>`` per FetchContent
dependency (CMake upper-cases the name) and then ``-DFETCHCONTENT_FULLY_DISCONNECTED=ON``: with every dependency
given a folder, CMake must not download anything at configure time, and one the recipe forgot fails the configure
instead of reaching the network. ``buildenv`` appends them to the variable ``args_env`` names.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from .atomic import replace_symlink
from .errors import BuildError
from .recipe import CMakeSpec, Recipe

DISCONNECTED = "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"


@dataclass(frozen=True)
class FetchContentFolder:
    """Where one FetchContent dependency's source tree is, and which recipe input provides it."""

    name: str  # as FetchContent_Declare names it
    folder: Path
    kind: str  # "source" or "artifact"
    input: str  # the recipe source's or artifact's name
    at: Path | None = None  # where the build tree expects it (cwd/REL): made a symlink to ``folder``
    cwd: Path | None = None  # the build's working folder, which ``at`` stays inside

    @property
    def variable(self) -> str:
        return f"FETCHCONTENT_SOURCE_DIR_{self.name.upper()}"


def fetchcontent_folders(cmake: CMakeSpec, recipe: Recipe, workdir: Path,
                         cwd: Path | None = None) -> list[FetchContentFolder]:
    """Each dependency's folder in a resolved recipe: a source's checkout in the workdir, an artifact's tree;
    with ``cwd`` (the build's), where a dependency with ``at`` is linked."""
    found = []
    for name, dep in cmake.fetchcontent.items():
        at = cwd / dep.at if cwd is not None and dep.at else None
        if dep.source is not None:
            found.append(FetchContentFolder(name, workdir / recipe.source_path(dep.source), "source", dep.source, at,
                                            cwd))
        elif dep.artifact is not None:
            found.append(FetchContentFolder(name, Path(recipe.artifacts[dep.artifact].path), "artifact", dep.artifact,
                                            at, cwd))
    return found


def cmake_arguments(cmake: CMakeSpec, recipe: Recipe, workdir: Path) -> tuple[str, ...]:
    """The arguments, in order: definitions, FetchContent folders, then FULLY_DISCONNECTED when there is one."""
    args = [f"-D{name}={value}" for name, value in cmake.define.items()]
    folders = fetchcontent_folders(cmake, recipe, workdir)
    args += [f"-D{f.variable}={f.folder}" for f in folders]
    if folders:
        args.append(DISCONNECTED)
    return tuple(args)


def fetchcontent_problems(recipe: Recipe, workdir: Path, listed: list[str]) -> list[str]:
    """``listed`` (the build's missing sources and artifacts, "source NAME: ...") with each line of a FetchContent
    dependency's input saying so, then the FetchContent folders not listed that are not usable (no
    CMakeLists.txt: a wrong path, or an input unpacked elsewhere), each with what provides it."""
    folders = build_folders(recipe, workdir)
    out = list(listed)
    for f in folders:
        prefix = f"{f.kind} {f.input}:"
        hits = [i for i, line in enumerate(out) if line.startswith(prefix)]
        for i in hits:
            out[i] += f" (FetchContent {f.name} of build.cmake{', linked at ' + str(f.at) if f.at else ''})"
        if hits or (f.folder / "CMakeLists.txt").is_file():
            continue
        what = "is missing" if not f.folder.exists() else "has no CMakeLists.txt"
        how = ("run `flagtree-cpu sync`" if f.kind == "source" else
               "run `flagtree-cpu fetch` (offline: `flagtree-cpu fetch --offline --from FILE`)")
        out.append(f"FetchContent {f.name} (build.cmake.fetchcontent.{f.name}): {f.kind} {f.input} at {f.folder} "
                   f"{what} — {how}, or name the input that holds the project's CMakeLists.txt")
    return out + [line for f in folders if (line := _in_the_way(f, folders))]


def build_folders(recipe: Recipe, workdir: Path) -> list[FetchContentFolder]:
    """The FetchContent folders of the build ``recipe`` is the view of (``build_stamp.build_view``)."""
    build = recipe.build
    return fetchcontent_folders(build.cmake, recipe, workdir, Path(build.cwd)) if build and build.cmake else []


# --- the hand-over at the project's own folder (``at``) ------------------------------------------------------------


def _in_the_way(f: FetchContentFolder, every: list[FetchContentFolder]) -> str | None:
    """What stops ``f``'s link from being made (None: it is there, or it is ours to make or replace)."""
    if f.at is None or f.cwd is None:
        return None
    where = f"FetchContent {f.name} (build.cmake.fetchcontent.{f.name}.at): {f.at}"
    parent = f.at.parent
    while not os.path.lexists(parent) and parent != f.cwd and parent != parent.parent:
        parent = parent.parent
    inside, real_cwd = os.path.realpath(parent), os.path.realpath(f.cwd)
    if inside != real_cwd and not inside.startswith(real_cwd + os.sep):  # a link in the build tree leads out
        return f"{where} leads outside the build's folder {f.cwd} through {parent} — remove that link, then build " \
            "again"
    if not os.path.lexists(f.at) or _ours(f.at, every):
        return None
    what = (f"a link to {os.readlink(f.at)}" if f.at.is_symlink() else
            "a folder (CMake's own download?)" if f.at.is_dir() else "a file")
    return (f"{where} is {what}, not the tool's link to {f.folder} — remove it (rm -rf {shlex.quote(str(f.at))}), "
            "then build again")


def _ours(at: Path, every: list[FetchContentFolder]) -> bool:
    """A symlink to one of the recipe's FetchContent folders: the tool made it (for this input, or another pin)."""
    return at.is_symlink() and os.readlink(at) in {str(f.folder) for f in every}


def place_links(recipe: Recipe, workdir: Path) -> list[Path]:
    """Make each ``at`` a symlink to its pinned tree (idempotent: a right link is left as it is); refuse, naming
    each, what is in the way. Returns the links made or replaced."""
    folders = build_folders(recipe, workdir)
    blocked = [line for f in folders if (line := _in_the_way(f, folders))]
    if blocked:
        raise BuildError("something that is not the tool's link is where a FetchContent dependency goes",
                         details=tuple(blocked), fix="remove what is listed, then build again")
    made = []
    for f in folders:
        if f.at is None or (f.at.is_symlink() and os.readlink(f.at) == str(f.folder)):
            continue
        f.at.parent.mkdir(parents=True, exist_ok=True)
        replace_symlink(f.at, f.folder)
        made.append(f.at)
    return made
