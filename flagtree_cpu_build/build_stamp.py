"""The build stamp: what a build's result depends on (sources, artifacts, command, environment, Python,
prerequisites, compilers, steps, variant), and why a stored stamp says the build must run again.

``build`` writes it after a successful build; ``build_freshness`` and the plans compare with it.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from . import pythonenv
from .buildenv import BuildEnv, stamp_env
from .digest import hash_text
from .extract import read_stamp
from .proc import capture
from .recipe import Recipe
from .stages import StageContext
from .state import write_state
from .steps import steps_stamp
from .workspace import Workspace


def build_mode(recipe: Recipe, wheel_dir: Path | None) -> str:
    """"wheel" (build --wheel DIR, or a wheel-only recipe) or "editable": which command and stamp."""
    assert recipe.build is not None
    return "wheel" if wheel_dir is not None or recipe.build.mode == "wheel-only" else "editable"


def stamp_name(mode: str) -> str:
    return f"build-{mode}.json"


def stamp_path(recipe: Recipe, ws: Workspace, mode: str | None = None) -> Path:
    """Where ``recipe`` keeps the stamp of a build in ``mode`` (default: the build `setup` and `build` without
    --wheel run: the editable install's, or a wheel-only recipe's wheel's), in its own state folder."""
    return ws.recipe_state / stamp_name(mode or build_mode(recipe, None))


def stamp_components(recipe: Recipe, ctx: StageContext, python: Path, build_env: BuildEnv,
                     report: pythonenv.PythonReport, mode: str) -> dict[str, Any]:
    """Everything the build's result depends on, as the stamp records it."""
    from .gitcmd import head, local_diff

    assert recipe.build is not None
    sources = {}
    for name in recipe.sources_in_order():
        checkout = ctx.workspace.root / recipe.source_path(name)
        diff = local_diff(checkout)
        sources[name] = {"commit": head(checkout) or "",
                         "local_changes": hash_text(diff)[:16] if diff.strip() else None}
    artifacts = {name: (read_stamp(Path(a.path)) or {}).get("sha256") for name, a in recipe.artifacts.items()}
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
    if report.preinstalled:  # a vendor package the build (or a post-install step) patches or links against
        components["preinstalled"] = {p.name: p.installed for p in report.preinstalled}
    return components


def reasons_to_build(stored: dict[str, Any] | None, components: dict[str, Any], report: pythonenv.PythonReport,
                     python: Path, creates_missing: list[str], *, force: bool = False) -> list[str]:
    """Why the build must run, compared with the stamp stored; empty: it is up to date."""
    if force:
        return ["--force"]
    if stored is None:
        return ["no previous build"]
    reasons = [f"{key} changed: {old} -> {new}" for key, old, new in differences(stored["components"], components)]
    products = stored.get("products") if isinstance(stored.get("products"), list) else []
    missing = [str(p.get("path") if isinstance(p, dict) else p) for p in products if not _same_file(p)]
    if missing:
        reasons.append(f"build products are missing: {', '.join(missing)}")
    if creates_missing:
        reasons.append(f"what the steps create is missing: {', '.join(creates_missing)}")
    for name, version in report.extra_found.items():
        if components["mode"] == "editable" and version is None:
            reasons.append(f"{name} is not installed in {python}")
    wheel = stored.get("wheel")
    if wheel and not _same_file(wheel):
        reasons.append(f"the wheel {wheel.get('path') if isinstance(wheel, dict) else wheel} is gone")
    return reasons


def differences(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, old, new) for every leaf that differs; long hex digests shortened."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            found += differences(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else key)
        return found
    return [] if old == new else [(prefix, _short(old), _short(new))]


def _short(value: Any) -> Any:
    return value[:12] if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40,64}", value) else value


def _same_file(record: Any) -> bool:
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
