"""Several builds in one recipe: `builds:` (named, ordered by `needs:`) next to `build:` (the one named `build`).

A recipe may build a dependency that takes hours (a framework from source) before the compiler: each named build
has its own command, inputs, products and stamp, so the first does not rerun on every rebuild of the second. The
order is the `needs` order (a build's needs first), ties in recipe order (`builds:` entries, then `build:`); the
last one is the *final* build: the recipe's steps, `build --wheel`, the wheelhouse and `--publish` are its.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .build_spec import BuildSpec
from .schema import Context, Path_, suggest


class Recipe(Protocol):
    """What these rules read of a recipe (``model.Recipe`` is one; importing it here would be a circle: the
    model calls ``check_builds``)."""

    @property
    def build(self) -> BuildSpec | None: ...
    @property
    def builds(self) -> Mapping[str, BuildSpec]: ...
    @property
    def checks(self) -> tuple[Any, ...]: ...

MAIN = "build"  # the name `build:` has among the builds
MAX_BUILDS = 32

def named_builds(recipe: Recipe) -> dict[str, BuildSpec]:
    """Every build of the recipe by name, in the order they run (a build's needs first)."""
    given: dict[str, BuildSpec] = dict(recipe.builds)
    if recipe.build is not None:
        given[MAIN] = recipe.build
    ordered: dict[str, BuildSpec] = {}

    def visit(name: str, seen: tuple[str, ...]) -> None:
        if name in ordered or name in seen or name not in given:  # a cycle or unknown name: the loader said so
            return
        for need in given[name].needs:
            visit(need, (*seen, name))
        ordered[name] = given[name]

    for name in given:
        visit(name, ())
    return ordered


def final_build(recipe: Recipe) -> str | None:
    """The build that runs last (its steps, its wheel, its wheelhouse); None: the recipe builds nothing."""
    names = list(named_builds(recipe))
    return names[-1] if names else None


def needed_by(recipe: Recipe, name: str) -> list[str]:
    """``name`` and every build it needs (directly or not), in run order."""
    builds = named_builds(recipe)
    wanted = {name}
    for current in reversed(list(builds)):
        if current in wanted:
            wanted.update(builds[current].needs)
    return [n for n in builds if n in wanted]


def check_builds(recipe: Recipe, ctx: Context, path: Path_) -> None:
    """`builds` next to `build`: names, `needs` that name builds (no cycle), and checks' `before`."""
    names = list(recipe.builds) + ([MAIN] if recipe.build is not None else [])
    if recipe.build is not None and MAIN in recipe.builds:
        ctx.report(path + ("builds", MAIN), "`build:` is already the build named 'build'",
                   "rename this entry, or move it to `build:`")
    if len(names) > MAX_BUILDS:
        ctx.report(path + ("builds",), f"{len(names)} builds; a recipe has at most {MAX_BUILDS}")
        return
    specs = {**recipe.builds, **({MAIN: recipe.build} if recipe.build is not None else {})}
    for name, build in specs.items():
        where = path + (("build",) if name == MAIN and recipe.build is build else ("builds", name))
        for i, need in enumerate(build.needs):
            if need == name:
                ctx.report(where + ("needs", i), f"build {name!r} needs itself", "remove it from `needs`")
            elif need not in specs:
                ctx.report(where + ("needs", i), f"there is no build named {need!r}{suggest(need, names)}",
                           f"the recipe's builds: {', '.join(names) or 'none'}")
    cycle = _cycle(specs)
    if cycle:
        ctx.report(path + ("builds",), f"the builds need each other in a circle: {' -> '.join(cycle)}",
                   "remove one of these from the other's `needs`")
    for i, check in enumerate(recipe.checks):
        if check.before is not None and check.before not in specs:
            ctx.report(path + ("checks", i, "before"), f"there is no build named {check.before!r}"
                       f"{suggest(check.before, names)}", f"the recipe's builds: {', '.join(names) or 'none'}")


def _cycle(specs: dict[str, BuildSpec]) -> list[str]:
    """One circle of `needs` (its names, the first repeated at the end); empty: none."""
    done: set[str] = set()

    def walk(name: str, trail: list[str]) -> list[str]:
        if name in trail:
            return [*trail[trail.index(name):], name]
        if name in done or name not in specs:
            return []
        for need in specs[name].needs:
            if need == name:  # said on its own ("needs itself")
                continue
            found = walk(need, [*trail, name])
            if found:
                return found
        done.add(name)
        return []

    for name in specs:
        found = walk(name, [])
        if found:
            return found
    return []
