"""What the workspace holds compared with the recipe, and what `setup` would do about it.

One read-only reading of every stage's plan (``registry.plan_all``) serves two commands:
``status`` shows each item's state, and ``setup --dry-run`` shows each item's action and reason
("clone flagtree @3911e5b: missing", "download llvm 812 MB: not cached", "build: llvm changed").
Nothing here writes, downloads or builds; the dry run may ask servers (a ref's tip, a download's
size) when it is online.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .stagekit.plan import PlanItem

if TYPE_CHECKING:
    from .stagekit.stage import RunOptions, StageContext

STATUS_SCHEMA = "flagtree-cpu/status/v1"
Item = PlanItem  # the name status and its JSON readers have always used
__all__ = ["STATUS_SCHEMA", "Item", "WorkspaceStatus", "inspect_workspace"]


@dataclass(frozen=True)
class WorkspaceStatus:
    recipe: str
    workspace: Path
    python: Path
    items: tuple[PlanItem, ...]
    seconds: float
    variant: str | None = None  # the recipe's variant (--variant, else its default)

    @property
    def current(self) -> bool:
        return all(i.current for i in self.items)

    @property
    def download_bytes(self) -> int | None:
        """What setup would download; None when a size is unknown."""
        sizes = [i.data["download_bytes"] for i in self.items if "download_bytes" in i.data]  # fresh or resumed
        return None if any(s is None for s in sizes) else sum(sizes)

    def to_json(self) -> dict[str, Any]:
        return {"schema": STATUS_SCHEMA, "recipe": self.recipe, "variant": self.variant,
                "workspace": str(self.workspace),
                "python": str(self.python), "current": self.current, "seconds": round(self.seconds, 3),
                "download_bytes": self.download_bytes, "items": [i.to_json() for i in self.items]}


def inspect_workspace(ctx: StageContext, options: RunOptions) -> WorkspaceStatus:
    from .stages.registry import plan_all

    start = time.monotonic()
    items = [*_base_item(ctx, options), *plan_all(ctx, options)]
    board = _install_only(ctx, options)
    if board is not None:  # nothing was synced, fetched or built here: the install, and the checks
        items = [board, *(i for i in items if i.area == "validation")]
    return WorkspaceStatus(ctx.recipe.name, ctx.workspace.root, options.python, tuple(items), time.monotonic() - start,
                           ctx.recipe.variant)


def _install_only(ctx: StageContext, options: RunOptions) -> PlanItem | None:
    """An install-only board's one build item (``stages/build/install_only``), when its record holds."""
    from .stages.build import install_only

    if options.skip_build or ctx.base is not None:
        return None
    record = install_only.installed(ctx, options, install_only.workspace_lock(ctx.workspace))
    return install_only.status_item(record) if record is not None else None


def _base_item(ctx: StageContext, options: RunOptions) -> list[PlanItem]:
    """A stacked recipe's base, as one row: `setup` sets it up first (without validating it)."""
    from dataclasses import replace

    from .stages.registry import plan_all

    if ctx.base is None:
        return []
    name = ctx.base.recipe.name
    behind = [i for i in (_base_item(ctx.base, options) + plan_all(ctx.base, replace(options, skip_validate=True)))
              if not i.current]
    if not behind:
        return [PlanItem("base", name, "ok", f"{name}: all current")]
    shown = ", ".join(f"{i.area} {i.subject}: {i.state}" for i in behind[:3]) + (" ..." if len(behind) > 3 else "")
    return [PlanItem("base", name, "stale", f"{name}: {shown}", f"set up {name} first", "the base is not current",
                     {"behind": [i.to_json() for i in behind]}, "updated")]
