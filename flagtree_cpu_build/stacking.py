"""Stacked recipes: one recipe (FlagGems) built on top of another (FlagTree) in the same workspace and
interpreter, without disturbing it.

A recipe that ``extends`` a base gets:

- its own state folder (``.flagtree-cpu/recipes/<name>/``: lock, build stamps, reports), so the base's lock
  entries and build stamp stay exactly as they were;
- the base's platform when it gives none (the loader copies it), and the base's run-time environment
  before its own (``buildenv.runtime_env`` walks ``Recipe.stack()``);
- constraints for every pip run: its own, the base's, the base's run-time requirements, and the versions
  the base's build was made with (read from the base's stamp) — so installing the stacked recipe's
  prerequisites can never silently replace what the base's build depends on (a conflict is refused,
  naming both requirements); the stack's constraints bind the base too when it is set up under it;
- ``keep_installed``: distributions (the base's triton) whose version and install origin must be the same
  after the stacked build as before it; and `setup` sets the base up first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .build_stamp import stamp_path
from .errors import BuildError
from .pip_constraints import constraints_path, pip_limits
from .recipe import Constraint
from .recipe.builds import final_build
from .state import read_state

if TYPE_CHECKING:
    from .recipe import Recipe
    from .stagekit.stage import StageContext
    from .workspace import Workspace


def restack(ctx: StageContext) -> StageContext:
    """``ctx`` with the constraints that protect its base's build as the base's stamp says now (`setup` calls
    it again once it has set the base up: a fresh or rebuilt base has other versions)."""
    if ctx.base is None:
        return ctx
    mark = _protect_mark(ctx.base.recipe)
    recipe = ctx.recipe
    kept = tuple(c for c in recipe.python.constraints if not c.why.startswith(mark))
    recipe = replace(recipe, python=replace(recipe.python, constraints=kept))
    return replace(ctx, recipe=with_pip_constraint(constrained(recipe, protecting(ctx.base)), ctx.workspace))


def _protect_mark(base: Recipe) -> str:
    return f"kept for {base.name}: "


def protecting(base: StageContext) -> list[Constraint]:
    """Constraints that keep the base's build current: the exact versions of the prerequisites its build stamp
    records (its run-time requirements' ranges come with ``own_constraints``)."""
    recipe = base.recipe
    found: list[Constraint] = []
    if final_build(recipe) is not None:
        stamp = read_state(stamp_path(base.recipe, base.workspace), needs=("components",))
        prerequisites = (stamp or {}).get("components", {}).get("prerequisites")
        for name, version in (prerequisites or {}).items() if isinstance(prerequisites, dict) else ():
            if isinstance(version, str) and version:
                found.append(Constraint(requirement=f"{name}=={version}",
                                        why=f"{_protect_mark(recipe)}its build was made with {name} {version} and "
                                        "another version makes it stale (to move both, add the pin to the stacked "
                                        "recipe's python.constraints and run its `setup`)"))
    return found


def own_constraints(recipe: Recipe, relation: str) -> list[Constraint]:
    """``recipe``'s own constraints and run-time requirements, saying whose they are."""
    stated = [replace(c, why=c.why or f"python.constraints of {recipe.name}") for c in recipe.python.constraints]
    runtime = [Constraint(requirement=r.requirement, why=f"{relation} {recipe.name} (its python.runtime)")
               for r in recipe.python.runtime]
    return stated + runtime


def constrained(recipe: Recipe, extra: list[Constraint]) -> Recipe:
    """``recipe`` with the constraints of ``extra`` it does not state already (the first ``why`` of each stays)."""
    known = {c.requirement for c in recipe.python.constraints}
    added = []
    for constraint in extra:
        if constraint.requirement not in known:
            known.add(constraint.requirement)
            added.append(constraint)
    if not added:
        return recipe
    return replace(recipe, python=replace(recipe.python, constraints=(*recipe.python.constraints, *added)))


def with_pip_constraint(recipe: Recipe, ws: Workspace) -> Recipe:
    """pip reads PIP_CONSTRAINT, so the build command's own pip runs (its dependencies) keep to the
    constraints too. The file's path is no input of the result: the stamp ignores it."""
    if recipe.build is None or not pip_limits(recipe):
        return recipe
    build = recipe.build
    if "PIP_CONSTRAINT" in build.env.set:
        return recipe
    env = replace(build.env, set={**build.env.set, "PIP_CONSTRAINT": str(constraints_path(ws))})
    return replace(recipe, build=replace(build, env=env, stamp_ignores=(*build.stamp_ignores, "PIP_CONSTRAINT")))


# --- keep_installed ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Installed:
    version: str | None
    origin: str  # "editable from DIR", "from URL", or "from a package index"

    def describe(self) -> str:
        return f"{self.version} ({self.origin})" if self.version else "not installed"


def installed(python: Path, names: tuple[str, ...]) -> dict[str, Installed]:
    """What ``python`` has of ``names`` now: version and where it was installed from (PEP 610)."""
    from .pythonenv import inspect

    if not names:
        return {}
    answer = inspect(python, list(names))
    urls: dict[str, Any] = answer.get("direct_urls", {}) or {}
    return {name: Installed(answer["found"].get(name), _origin(urls.get(name))) for name in names}


def _origin(text: Any) -> str:
    try:
        direct_url = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        direct_url = None  # a damaged direct_url.json: the origin is unknown, like an index install's
    if not isinstance(direct_url, dict) or not isinstance(direct_url.get("url"), str):
        return "from a package index"
    url = direct_url["url"].removeprefix("file://")
    editable = isinstance(direct_url.get("dir_info"), dict) and direct_url["dir_info"].get("editable")
    return f"editable from {url}" if editable else f"from {url}"


def require_kept(ctx: StageContext, python: Path) -> dict[str, Installed]:
    """Before the build: what must stay installed is installed (the base was set up); returns it."""
    recipe = ctx.recipe
    before = installed(python, recipe.keep_installed)
    missing = [name for name, now in before.items() if now.version is None]
    if missing:
        base = recipe.base.name if recipe.base is not None else "its base"
        raise BuildError(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed in {python}; {recipe.name} "
            f"builds on {base}'s (keep_installed) — nothing was run",
            fix=f"run `flagtree-cpu --recipe {recipe.name} setup` (it sets up {base} first), or build {base} with "
            "the same --python")
    return before


def check_kept(ctx: StageContext, python: Path, before: dict[str, Installed]) -> None:
    """After the build: the distributions ``keep_installed`` names are as they were, or the build is refused
    (its stamp is not written, so it is not taken for a good one)."""
    recipe = ctx.recipe
    after = installed(python, tuple(before))
    changed = [(name, before[name], after[name]) for name in before if after[name] != before[name]]
    if not changed:
        return
    base = recipe.base.name if recipe.base is not None else "the base recipe"
    names = ", ".join(name for name, _, _ in changed)
    raise BuildError(
        f"the {recipe.name} build replaced {names} in {python}; keep_installed says it must stay {base}'s, "
        "so programs in this interpreter would now run another one",
        details=tuple(f"{name}: before {old.describe()}, now {new.describe()}" for name, old, new in changed),
        fix=f"put {base}'s back with `flagtree-cpu --recipe {base} build --force`, then stop {recipe.name}'s "
        f"build from installing {names}: the build log's 'Collecting' lines show what asked for it; add "
        f"`{changed[0][0]}=={changed[0][1].version}` to {recipe.name}'s python.constraints (pip then refuses "
        "instead of replacing it)")


def base_problems(ctx: StageContext) -> list[str]:
    """What of the base a stacked build needs and does not find (for the missing-inputs list)."""
    base = ctx.base
    if base is None or final_build(base.recipe) is None:
        return []
    stamp = stamp_path(base.recipe, base.workspace)
    if stamp.is_file():
        return []
    return [f"base recipe {base.recipe.name}: not built in this workspace ({stamp} is missing) — run "
            f"`flagtree-cpu --recipe {ctx.recipe.name} setup`, which sets it up first"]
