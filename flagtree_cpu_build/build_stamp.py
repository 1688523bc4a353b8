"""The build stamp: what a build's result depends on (sources, artifacts, command, environment, Python,
prerequisites, compilers, steps, variant), and why a stored one says the build must run again.

``build`` writes it after a successful build; the build's plan (``stages/build/plan.py``) compares with it through
``stale_reasons``. A reason is a value (``Changed(("sources", "flagtree", "commit"), old, new)``,
``ProductsMissing``, ...) and ``say`` makes its words, once, for `build`, ``status``, doctor and the dry run.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import pythonenv
from .buildenv import BuildEnv, stamp_env
from .digest import hash_text
from .extract import read_stamp
from .proc import capture
from .recipe import Recipe
from .recipe.builds import MAIN, final_build, named_builds
from .stagekit.stage import StageContext
from .state import write_state
from .steps import missing_creates, steps_stamp, unverified
from .workspace import Workspace

STAMP_KEYS = ("digest", "components")  # what a build stamp must hold to be compared at all


def build_mode(recipe: Recipe, wheel_dir: Path | None) -> str:
    """"wheel" (build --wheel DIR, or a wheel-only recipe) or "editable": which command and stamp."""
    assert recipe.build is not None
    return "wheel" if wheel_dir is not None or recipe.build.mode == "wheel-only" else "editable"


def stamp_name(mode: str, name: str = MAIN) -> str:
    """``build-editable.json`` for the build named `build` (as before there were several), ``build-NAME-editable.json``
    for another (a recipe name: lower-case letters, digits, '-' and '_')."""
    return f"build-{mode}.json" if name == MAIN else f"build-{name}-{mode}.json"


def install_only_record(ws: Workspace) -> Path:
    """Where an install-only board (``stages/build/install_only``) records the wheelhouse build it installed instead
    of building: its build stamp, as it were."""
    return ws.recipe_state / "install-only.json"


def installed_digest(ws: Workspace) -> str | None:
    """The sha256 of the wheel an install-only board installed (what its validation was for); None: not one."""
    from .state import read_state

    record = read_state(install_only_record(ws), needs=("sha256",))
    return str(record["sha256"]) if record is not None else None


def stamp_path(recipe: Recipe, ws: Workspace, mode: str | None = None, name: str | None = None) -> Path:
    """Where ``recipe`` keeps the stamp of its build ``name`` (default: the final one) in ``mode`` (default: the
    build `setup` and `build` without --wheel run: the editable install's, or a wheel-only recipe's wheel's), in
    its own state folder. ``recipe`` may be one build's view (``build_view``): then ``name`` says which."""
    name = name or final_build(recipe) or MAIN
    if mode is None:
        spec = named_builds(recipe).get(name) or recipe.build
        mode = "wheel" if spec is not None and spec.mode == "wheel-only" else "editable"
    return ws.recipe_state / stamp_name(mode, name)


def build_view(recipe: Recipe, name: str) -> Recipe:
    """The recipe as the build ``name`` sees it: that build as its `build`; the recipe's steps only when it is the
    final build (they run around it)."""
    from dataclasses import replace

    final = final_build(recipe)
    return replace(recipe, build=named_builds(recipe)[name], builds={}, steps=recipe.steps if name == final else ())


def need_record(components: dict[str, Any]) -> dict[str, Any]:
    """What a build's stamp records of a build it needs: what that one was made from, without the builder's own
    business (the same interpreter and compilers are in this build's stamp), so a wheelhouse key stays portable."""
    return {k: v for k, v in components.items() if k not in ("mode", "compilers", "python")}


def stamp_components(recipe: Recipe, ctx: StageContext, python: Path, build_env: BuildEnv,
                     report: pythonenv.PythonReport, mode: str,
                     needs: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything the build's result depends on, as the stamp records it; ``needs``: the components of the builds it
    needs (by name), as their stamps hold them."""
    from .gitcmd import head, local_diff

    assert recipe.build is not None
    chosen = recipe.build.inputs  # None: every source and artifact (a single build, as before)
    sources = {}
    for name in recipe.sources_in_order():
        if chosen is not None and name not in chosen.sources:
            continue
        checkout = ctx.workspace.root / recipe.source_path(name)
        diff = local_diff(checkout)
        sources[name] = {"commit": head(checkout) or "",
                         "local_changes": hash_text(diff)[:16] if diff.strip() else None}
    artifacts = {name: (read_stamp(Path(a.path)) or {}).get("sha256") for name, a in recipe.artifacts.items()
                 if chosen is None or name in chosen.artifacts}
    compilers = {}
    for variable, default in (("CC", "cc"), ("CXX", "c++")):
        compiler = build_env.env.get(variable, default)
        found = shutil.which(compiler, path=build_env.env.get("PATH"))  # a toolchain's PATH may bring it
        answer = capture([compiler, "--version"], env=build_env.env) if found else None
        compilers[variable] = answer.stdout.splitlines()[0] if answer and answer.stdout else None
    components: dict[str, Any] = {
        "mode": mode,
        "sources": sources,
        "artifacts": artifacts,
        "command": {"cwd": recipe.build.cwd,
                    "argv": list(recipe.build.wheel_argv if mode == "wheel" else recipe.build.argv)},
        "env": stamp_env(build_env, recipe.build.stamp_ignores),
        "python": {"path": str(python), "version": report.version},
        "prerequisites": {p.name: p.installed or p.system for p in report.prerequisites},
        "compilers": compilers,
    }
    # only when there is something to say: a recipe without steps or variants keeps the stamp it had
    # before they existed, so upgrading the tool does not rebuild an unchanged workspace
    steps = steps_stamp(recipe, ctx.host)
    if steps:
        components["steps"] = steps
    if recipe.variant is not None:
        components["variant"] = recipe.variant
    if needs:  # a rebuilt need with other inputs reruns this build; one rebuilt from the same inputs does not
        components["needs"] = {name: need_record(c) for name, c in needs.items()}
    if recipe.build.install_wheels:
        components["install_wheels"] = list(recipe.build.install_wheels)
    placed = {n: d.at for n, d in (recipe.build.cmake.fetchcontent if recipe.build.cmake else {}).items() if d.at}
    if placed:  # where a FetchContent dependency is linked in the build tree (`at`): moved, the build reruns
        components["fetchcontent_at"] = placed
    if report.preinstalled:  # a vendor package the build (or a post-install step) patches or links against
        components["preinstalled"] = {p.name: p.installed for p in report.preinstalled}
    return components


def changes(old: Any, new: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any, Any]]:
    """(key path, old, new) for every leaf that differs, values as they are."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            found += changes(old.get(key), new.get(key), (*path, str(key)))
        return found
    return [] if old == new else [(path, old, new)]


def differences(old: Any, new: Any) -> list[tuple[str, Any, Any]]:
    """(dotted key, old, new) for every leaf that differs; long hex digests shortened."""
    return [(".".join(path), shortened(a), shortened(b)) for path, a, b in changes(old, new)]


def shortened(value: Any) -> Any:
    """A long hex digest (a commit, a sha256) as its first 12 digits; anything else as it is."""
    return value[:12] if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40,64}", value) else value


def same_file(record: Any) -> bool:
    """Whether the file a stamp records (``{"path", "size"}``) is still there, at that size."""
    if not isinstance(record, dict) or not isinstance(record.get("path"), str):
        return False  # a stamp written by hand or damaged: its products count as gone
    path = Path(record["path"])
    return path.is_file() and path.stat().st_size == record.get("size")


def products_of(recipe: Recipe) -> list[dict[str, Any]]:
    assert recipe.build is not None
    cwd = Path(recipe.build.cwd)
    found = sorted({p for pattern in recipe.build.products for p in cwd.glob(pattern) if p.is_file()})
    return [{"path": str(p), "size": p.stat().st_size} for p in found]


def write_stamp(path: Path, components: dict[str, Any], products: list[dict[str, Any]],
                wheel: dict[str, Any] | None, log: Path, origin: dict[str, Any] | None = None) -> None:
    """``origin``: where a build that was not compiled here came from (prebuilt.py: a wheelhouse)."""
    canonical = json.dumps(components, sort_keys=True)
    stamp = {"digest": hash_text(canonical), "components": components,
             "products": products, "wheel": wheel, "log": str(log), "finished": time.time()}
    if origin is not None:
        stamp["origin"] = origin
    write_state(path, stamp)


# --- why the build must run: values, and their words ---------------------------------------------------------


@dataclass(frozen=True)
class Forced:
    def words(self) -> str:
        return "--force"


@dataclass(frozen=True)
class NoPreviousBuild:
    """No stamp for this build's mode in the workspace (or a damaged one)."""

    def words(self) -> str:
        return "no previous build"


@dataclass(frozen=True)
class Changed:
    """A stamp component differs: ``key`` is its path in the components (("sources", "flagtree", "commit"),
    ("env", "TRITON_BUILD_PROTON")), ``old`` the stored value, ``new`` the value now (whole, not shortened)."""

    key: tuple[str, ...]
    old: Any
    new: Any

    def words(self) -> str:
        return f"{'.'.join(self.key)} changed: {shortened(self.old)} -> {shortened(self.new)}"

    def move_words(self) -> str | None:
        """In the words of the stage that will bring the change (the dry run): "flagtree moves 3911e5b -> 54d33a5";
        None for a change no stage before the build makes."""
        old, new = str(self.old)[:7], str(self.new)[:7]
        if len(self.key) == 3 and self.key[0] == "sources" and self.key[2] == "commit":
            return f"{self.key[1]} moves {old} -> {new}"
        if len(self.key) == 2 and self.key[0] == "artifacts":
            return f"{self.key[1]} changed ({old} -> {new})"
        return None


@dataclass(frozen=True)
class ProductsMissing:
    paths: tuple[str, ...]

    def words(self) -> str:
        return f"build products are missing: {', '.join(self.paths)}"


@dataclass(frozen=True)
class CreatesMissing:
    """What the recipe's steps create, or the marks they leave, is not there."""

    paths: tuple[str, ...]

    def words(self) -> str:
        return f"what the steps create is missing: {', '.join(self.paths)}"


@dataclass(frozen=True)
class NotInstalled:
    """A distribution the build must find installed (an editable build's own, a stacked recipe's kept one)."""

    distribution: str
    python: Path

    def words(self) -> str:
        return f"{self.distribution} is not installed in {self.python}"


@dataclass(frozen=True)
class WheelGone:
    path: str

    def words(self) -> str:
        return f"the wheel {self.path} is gone"


@dataclass(frozen=True)
class InputsNotReady:
    problems: tuple[str, ...]  # each with what provides it; the run lists them all and refuses

    def words(self) -> str:
        return "its inputs are not ready: " + self.problems[0].split(" — ")[0]


@dataclass(frozen=True)
class NoInterpreter:
    python: Path

    def words(self) -> str:
        return f"there is no interpreter at {self.python} yet"


@dataclass(frozen=True)
class PrerequisitesMissing:
    names: tuple[str, ...]

    def words(self) -> str:
        return f"build prerequisites are missing or of the wrong version: {', '.join(self.names)}"


@dataclass(frozen=True)
class EnvUnreadable:
    """A file the build environment reads (a ``from_file``, a ``source`` script) is not there or fails."""

    error: str

    def words(self) -> str:
        return f"its environment cannot be made yet: {self.error}"


@dataclass(frozen=True)
class NeedsFirst:
    """A build it needs runs first (or its stamp cannot be read yet): it is compared once that one has run."""

    name: str

    def words(self) -> str:
        return f"the build {self.name} it needs runs first"


@dataclass(frozen=True)
class Unresolved:
    """An input whose value is known only once its stage has run (the dry run)."""

    area: str  # sources or artifacts
    subject: str
    action: str  # what its stage will do

    def words(self) -> str:
        if self.area == "sources":
            return f"{self.subject} is resolved again ({self.action})"
        return f"{self.subject} has no known sha256 yet"


Reason = (Forced | NoPreviousBuild | Changed | ProductsMissing | CreatesMissing | NotInstalled | WheelGone
          | InputsNotReady | NoInterpreter | PrerequisitesMissing | EnvUnreadable | Unresolved | NeedsFirst)
UNDECIDED = (NoInterpreter, PrerequisitesMissing, EnvUnreadable, NeedsFirst)  # the stamp could not be compared yet


def say(reason: Reason, *, ahead: bool = False) -> str:
    """A reason in words. ``ahead``: said before the stages above the build have run (the dry run), where a
    changed pin is said as the move its stage will make."""
    moved = reason.move_words() if ahead and isinstance(reason, Changed) else None
    return moved or reason.words()


def stale_reasons(ctx: StageContext, python: Path, stored: dict[str, Any] | None, components: dict[str, Any],
                  report: pythonenv.PythonReport, *, force: bool = False) -> tuple[Reason, ...]:
    """Why the build must run, compared with the stamp stored; empty: it is up to date."""
    if force:
        return (Forced(),)
    if stored is None:
        return (NoPreviousBuild(),)
    reasons: list[Reason] = [Changed(key, old, new) for key, old, new in changes(stored["components"], components)]
    products = stored.get("products") if isinstance(stored.get("products"), list) else []
    missing = tuple(str(p.get("path") if isinstance(p, dict) else p) for p in products if not same_file(p))
    if missing:
        reasons.append(ProductsMissing(missing))
    gone = missing_creates(ctx.recipe, ctx.host) + unverified(ctx.recipe, ctx.host, python)
    if gone:
        reasons.append(CreatesMissing(tuple(gone)))
    reasons += [NotInstalled(name, python) for name, version in report.extra_found.items() if version is None]
    wheel = stored.get("wheel")
    if wheel and not same_file(wheel):
        reasons.append(WheelGone(str(wheel.get("path") if isinstance(wheel, dict) else wheel)))
    return tuple(reasons)
