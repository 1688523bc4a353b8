"""Answers several doctor checks share: the target Python's facts (one query, cached), which of the recipe's
requirements apply here, the build's view of a variable, disk paths."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..recipe import BuildSpec, SelectorFacts
from .kit import DoctorContext

if TYPE_CHECKING:
    from ..stagekit.plan import PlanItem

T = TypeVar("T")


def python_facts(c: DoctorContext) -> dict | None:
    """One run of the target interpreter for every Python check (cached)."""
    if "python" not in c.cache:
        if not c.options.python.exists():
            c.cache["python"] = None
        else:
            from packaging.requirements import Requirement

            from ..pythonenv import inspect

            recipe = c.recipe
            names = [Requirement(r.requirement).name for r in (*recipe.python.build, *recipe.python.runtime)]
            # what the build installs (is it there from elsewhere?) and what run-time variables depend on
            distribution = [b.distribution for b in builds(c).values() if b.distribution]
            wanted = [*names, *distribution, *recipe.runtime.only_with.values(), *recipe.python.conflicts]
            c.cache["python"] = inspect(c.options.python, list(dict.fromkeys(wanted)))
    return c.cache["python"]


def selector_facts(c: DoctorContext) -> SelectorFacts:
    """What the recipe's `when:` selectors are judged against on this (possibly snapshot) host."""
    return c.recipe.facts_on(c.host)


def applicable(c: DoctorContext, items: Iterable[T]) -> list[T]:
    """The requirements whose `when:` holds on this host (no `when`: always)."""
    facts = selector_facts(c)
    return [item for item in items if item.when is None or item.when.matches(facts)]


def builds(c: DoctorContext) -> dict[str, BuildSpec]:
    """Every build of the recipe (`build:` and the named ones under `builds:`), in the order they run."""
    from ..recipe.builds import named_builds

    return named_builds(c.recipe)


def final_build_spec(c: DoctorContext) -> BuildSpec | None:
    """The build the recipe ends with (the one that installs the project; its wheel); None: it builds nothing."""
    return next(reversed(builds(c).values()), None)


def build_env_value(c: DoctorContext, name: str, default: str) -> str:
    """A variable as the (final) build sees it: the recipe's build environment sets it, else it is inherited."""
    final = final_build_spec(c)
    return (final.env.set if final else {}).get(name) or c.environ.get(name) or default


def existing_parent(path: Path) -> Path:
    """``path`` or its nearest existing ancestor: where free space can be asked about before it exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


_PLANNING = threading.Lock()  # the checks run in a thread pool; the plans are made once for all of them


def stage_plans(c: DoctorContext, *areas: str) -> list[PlanItem]:
    """The stages' own plans (read-only, offline), the items of ``areas``: doctor says what `status` says and
    `setup` would do."""
    with _PLANNING:
        if "plans" not in c.cache:
            from ..stagekit.stage import StageContext
            from ..stages.registry import plan_all
            from ..ui import UI

            ctx = StageContext(c.recipe, c.workspace, c.host, UI(quiet=True))
            c.cache["plans"] = plan_all(ctx, c.options)  # asks no server
        return [i for i in c.cache["plans"] if i.area in areas]
