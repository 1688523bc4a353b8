"""``python.uninstall``: distributions removed from the target Python after the prerequisites are installed.

A vendor's torch (or any prerequisite) may pull in a package the recipe builds itself — a PyPI triton that would
shadow the one built here. The names are removed with ``pip uninstall -y`` after the prerequisites, and only
when installed from elsewhere than this workspace: the build's own install (editable from a source checkout, or a
wheel installed from the workspace) is never removed, so a second run removes nothing (idempotent). pip uninstall
reads no index, so it runs with --offline too."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ...errors import BuildError

if TYPE_CHECKING:
    from ...stagekit.plan import PlanItem
    from ...stagekit.stage import Action, StageContext


@dataclass(frozen=True)
class Found:
    """One name of python.uninstall as the interpreter has it."""

    name: str
    version: str | None  # None: not installed
    origin: str  # "from a package index", "from /opt/vendor/triton.whl", "editable from DIR"
    own: bool  # installed from this workspace (the build's own): kept

    @property
    def removable(self) -> bool:
        return self.version is not None and not self.own

    def describe(self) -> str:
        return f"{self.name} {self.version} ({self.origin})"


def survey(ctx: StageContext, python: Path) -> list[Found]:
    """What the interpreter has of the names python.uninstall lists."""
    from ...pythonenv import inspect

    names = list(ctx.recipe.python.uninstall)
    if not names:
        return []
    answer = inspect(python, names)
    found, urls = answer.get("found") or {}, answer.get("direct_urls") or {}
    roots = _own_roots(ctx)
    return [Found(name, found.get(name), *_origin(urls.get(name), roots)) for name in names]


def plan_uninstall(ctx: StageContext, python: Path) -> list[PlanItem]:
    """The plan's item for python.uninstall (none when the recipe lists nothing)."""
    from ...stagekit.plan import PlanItem

    names = ", ".join(ctx.recipe.python.uninstall)
    if not names:
        return []
    if not python.exists():
        return [PlanItem("python", "uninstall", "missing", "no interpreter yet", f"after the prerequisites: pip "
                         f"uninstall {names} if installed (python.uninstall)", will="ok")]
    found = survey(ctx, python)
    doomed = [f for f in found if f.removable]
    if not doomed:
        return [PlanItem("python", "uninstall", "ok", _absent(found))]
    return [PlanItem("python", "uninstall", "differs", "installed: " + "; ".join(f.describe() for f in doomed),
                     f"pip uninstall -y {' '.join(f.name for f in doomed)}",
                     "python.uninstall: the recipe's build must not be shadowed by them",
                     {"uninstall": [f.name for f in doomed]}, "updated")]


def run_uninstall(ctx: StageContext, python: Path, option: str | None = None) -> list[Action]:
    """Remove what python.uninstall names and the interpreter has from elsewhere, with the installer ``option``
    chooses (installer.py); the action records what went."""
    from ...installer import choose_for
    from ...proc import log_path, run_logged
    from ...stagekit.stage import Action

    if not ctx.recipe.python.uninstall:
        return []
    found = survey(ctx, python)
    doomed = [f for f in found if f.removable]
    if not doomed:
        return [Action("uninstall", "ok", _absent(found))]
    installer = choose_for(ctx.recipe, option, python)
    argv = installer.uninstall_argv(python, [f.name for f in doomed])
    ctx.ui.info("+ " + " ".join(argv))
    log = log_path(ctx.workspace.logs_dir, "uninstall")
    result = run_logged(argv, cwd=ctx.workspace.root, env=installer.env(_plain_env()), log=log)
    left = [f for f in survey(ctx, python) if f.removable]
    if not result.ok or left:
        raise BuildError(f"{installer.name} could not uninstall {', '.join(f.name for f in left or doomed)} from "
                         f"{python} (python.uninstall)", details=(f"log: {log}",),
                         fix=f"read the log; by hand: {python} -m pip uninstall -y "
                         f"{' '.join(f.name for f in left or doomed)}, then run the same command again")
    record: dict[str, Any] = {f.name: {"version": f.version, "origin": f.origin} for f in doomed}
    return [Action("uninstall", "updated", "removed " + "; ".join(f.describe() for f in doomed)
                   + " (python.uninstall)", {"uninstalled": record, "log": str(log)})]


def _absent(found: list[Found]) -> str:
    kept = [f for f in found if f.version is not None]
    words = "none installed: " + ", ".join(f.name for f in found if f.version is None) if len(kept) < len(found) \
        else ""
    if kept:  # only the build's own can be left: said, so nobody wonders why it stayed
        words += ("; " if words else "") + "kept, the build's own: " + "; ".join(f.describe() for f in kept)
    return words


def _own_roots(ctx: StageContext) -> list[Path]:
    """Where an install counts as this workspace's own: the workspace and each source's checkout (a
    `--source-path` checkout is a link to a folder elsewhere)."""
    ws = ctx.workspace.root
    roots = [ws.resolve()]
    for name in ctx.recipe.sources:
        roots.append((ws / ctx.recipe.source_path(name)).resolve())
    return roots


def _origin(text: Any, roots: list[Path]) -> tuple[str, bool]:
    """(how it was installed, whether from inside ``roots``) from its PEP 610 direct_url.json (the
    interpreter's answer: a damaged one means "from a package index", which is what has none)."""
    try:
        direct_url = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        direct_url = None
    url = direct_url.get("url") if isinstance(direct_url, dict) else None
    if not isinstance(url, str):
        return "from a package index", False
    parts = urlsplit(url)
    editable = isinstance(direct_url.get("dir_info"), dict) and direct_url["dir_info"].get("editable") is True
    if parts.scheme != "file":
        return f"from {url}", False
    path = Path(unquote(parts.path))
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        real = path
    own = any(real == root or real.is_relative_to(root) for root in roots)
    return f"{'editable ' if editable else ''}from {path}", own


def _plain_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env
