"""Whether the last build is current, and why `build` would run (read-only)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import PlanItem

if TYPE_CHECKING:
    from ..stages import RunOptions, StageContext

STAMP = "build-editable.json"  # an editable recipe's stamp (stamp_path: the one a recipe keeps)


def plan_build(ctx: StageContext, options: RunOptions, earlier: list[PlanItem]) -> list[PlanItem]:
    """``earlier``: the plans of the stages before (when one is not current, the build is judged as it will
    be once they have run)."""
    from ..build import build_freshness
    from ..build_stamp import stamp_path
    from ..state import read_state

    if ctx.recipe.build is None:
        return []
    asked = _wheelhouse_note(ctx, options)
    if options.skip_build:
        return [PlanItem("build", "build", "skipped", "--skip-build", will="skipped")]
    stamp = read_state(stamp_path(ctx.recipe, ctx.workspace), needs=("digest", "components"))
    if stamp is None:
        return [PlanItem("build", "build", "missing", "no build stamp in this workspace", "build",
                         "no previous build" + asked, will="created")]
    data = {"stamp": stamp["digest"]}
    came = _came_from(stamp)
    if came:
        data["origin"] = stamp["origin"]
    inputs_ready = all(i.current for i in earlier)
    if inputs_ready:
        reasons = build_freshness(ctx, options.python)
    else:  # judged as it will be once sync and fetch have brought in what the pins say
        assumed, unknown = _pinned_inputs(earlier)
        reasons = unknown or [_as_move(r) for r in build_freshness(ctx, options.python, assume=assumed)]
    if not reasons:
        why = "up to date" if inputs_ready else "the stages above restore what it was built from"
        return [PlanItem("build", "build", "ok", f"{why} (stamp {stamp['digest'][:12]}{came})", data=data)]
    return [PlanItem("build", "build", "stale", f"stamp {stamp['digest'][:12]} differs", "build",
                     "; ".join(reasons) + asked, {**data, "reasons": reasons}, "updated")]


def _wheelhouse_note(ctx: StageContext, options: RunOptions) -> str:
    """What the dry run adds when a wheelhouse is configured: it is asked before the build (not now)."""
    import os

    from ..wheelhouse import configured

    assert ctx.recipe.build is not None
    chosen = configured(options.wheelhouse, os.environ, ctx.recipe.build.wheelhouse)
    return f" (the wheelhouse {chosen[0]} is asked first)" if chosen else ""


def _came_from(stamp: dict) -> str:
    """Where a build that was not compiled here came from (prebuilt.py), as status shows it."""
    origin = stamp.get("origin")
    if not isinstance(origin, dict) or not origin.get("wheelhouse"):
        return ""
    built_on = origin.get("built_on") if isinstance(origin.get("built_on"), dict) else {}
    return (f"; installed from the wheelhouse {origin['wheelhouse']}, built on {built_on.get('host', '?')} at "
            f"{built_on.get('at', '?')}")


def _as_move(reason: str) -> str:
    """A changed input in the words of the stages that will bring it: "flagtree moves 3911e5b -> 54d33a5"."""
    moved = re.fullmatch(r"sources\.(\S+)\.commit changed: (\S*) -> (\S*)", reason)
    if moved:
        return f"{moved[1]} moves {moved[2][:7]} -> {moved[3][:7]}"
    changed = re.fullmatch(r"artifacts\.(\S+) changed: (\S*) -> (\S*)", reason)
    return f"{changed[1]} changed ({changed[2][:7]} -> {changed[3][:7]})" if changed else reason


def _pinned_inputs(earlier: list[PlanItem]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The commits and digests sync and fetch will bring in (as their plans say); and what cannot be
    known before they run."""
    sources, artifacts, unknown = {}, {}, []
    for item in earlier:
        if item.area == "sources":
            if item.data.get("pin"):
                sources[item.subject] = str(item.data["pin"])
            else:
                unknown.append(f"{item.subject} is resolved again ({item.action})")
        elif item.area == "artifacts":
            if item.data.get("sha256"):
                artifacts[item.subject] = str(item.data["sha256"])
            else:
                unknown.append(f"{item.subject} has no known sha256 yet")
    return {"sources": sources, "artifacts": artifacts}, unknown
