"""What a build's ``cmake:`` block (``recipe.cmake``) hands to CMake: the arguments, and the FetchContent folders the
build refuses to run without.

The arguments are ``-DNAME=VALUE`` per definition, ``-DFETCHCONTENT_SOURCE_DIR_<NAME>=<folder>`` per FetchContent
dependency (CMake upper-cases the name) and then ``-DFETCHCONTENT_FULLY_DISCONNECTED=ON``: with every dependency
given a folder, CMake must not download anything at configure time, and one the recipe forgot fails the configure
instead of reaching the network. ``buildenv`` appends them to the variable ``args_env`` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .recipe import CMakeSpec, Recipe

DISCONNECTED = "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"


@dataclass(frozen=True)
class FetchContentFolder:
    """Where one FetchContent dependency's source tree is, and which recipe input provides it."""

    name: str  # as FetchContent_Declare names it
    folder: Path
    kind: str  # "source" or "artifact"
    input: str  # the recipe source's or artifact's name

    @property
    def variable(self) -> str:
        return f"FETCHCONTENT_SOURCE_DIR_{self.name.upper()}"


def fetchcontent_folders(cmake: CMakeSpec, recipe: Recipe, workdir: Path) -> list[FetchContentFolder]:
    """Each dependency's folder in a resolved recipe: a source's checkout in the workdir, an artifact's tree."""
    found = []
    for name, dep in cmake.fetchcontent.items():
        if dep.source is not None:
            found.append(FetchContentFolder(name, workdir / recipe.source_path(dep.source), "source", dep.source))
        elif dep.artifact is not None:
            found.append(FetchContentFolder(name, Path(recipe.artifacts[dep.artifact].path), "artifact", dep.artifact))
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
    build = recipe.build
    folders = fetchcontent_folders(build.cmake, recipe, workdir) if build and build.cmake else []
    out = list(listed)
    for f in folders:
        prefix = f"{f.kind} {f.input}:"
        hits = [i for i, line in enumerate(out) if line.startswith(prefix)]
        for i in hits:
            out[i] += f" (FetchContent {f.name} of build.cmake)"
        if hits or (f.folder / "CMakeLists.txt").is_file():
            continue
        what = "is missing" if not f.folder.exists() else "has no CMakeLists.txt"
        how = ("run `flagtree-cpu sync`" if f.kind == "source" else
               "run `flagtree-cpu fetch` (offline: `flagtree-cpu fetch --offline --from FILE`)")
        out.append(f"FetchContent {f.name} (build.cmake.fetchcontent.{f.name}): {f.kind} {f.input} at {f.folder} "
                   f"{what} — {how}, or name the input that holds the project's CMakeLists.txt")
    return out
