"""Whether the last validation passed for this very build, interpreter and expectations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...digest import hash_text
from ...stagekit.plan import PlanItem
from ...state import read_state, write_state

if TYPE_CHECKING:
    from ...stagekit.stage import RunOptions, StageContext

LAST_REPORT = "last-validation.json"


def plan_validate(ctx: StageContext, options: RunOptions, built_current: bool) -> list[PlanItem]:
    """``built_current``: every earlier item is current (a build to come makes any old result stale)."""
    if not ctx.recipe.checks:
        return []
    if options.skip_build or options.skip_validate:  # --skip-build skips validation too: name the flag given
        why = "--skip-build" if options.skip_build else "--skip-validate"
        return [PlanItem("validation", "checks", "skipped", why, will="skipped")]
    last = last_validation(ctx)
    checks = len(ctx.recipe.checks)
    run = f"run {checks} check{'s' if checks != 1 else ''}"
    if last is None:
        return [PlanItem("validation", "checks", "missing", "no validation report in this workspace", run,
                         "never validated", will="created")]
    summary = last.get("summary", {})
    figures = f"{summary.get('pass', 0)} passed, {summary.get('fail', 0)} failed, {summary.get('skip', 0)} skipped"
    when = f"{figures} at {last.get('started', '?')}"
    data = {"last": {"ok": last.get("ok"), "started": last.get("started"), "summary": summary}}
    if not last.get("ok"):
        return [PlanItem("validation", "checks", "failed", when, run, "failed last time", data, "created")]
    if built_current and current_validation(ctx, options.python, options.model):
        return [PlanItem("validation", "checks", "ok", f"passed for this build: {when}", data=data)]
    reason = "after the build" if not built_current else "the build, interpreter or expectations changed since"
    return [PlanItem("validation", "checks", "stale", f"passed before: {when}", run, reason, data, "created")]


# --- the last report and what it was for ----------------------------------------------------------------


def save_last(ctx: StageContext, report: dict[str, Any], key: str | None) -> None:
    """The last report, for `status`, `setup` and bug reports; only in a workspace that exists.

    ``key`` (set when every check ran) says what was validated: `setup` skips validating again
    while the key is unchanged."""
    if ctx.workspace.state_dir.is_dir():
        write_state(ctx.workspace.recipe_state / LAST_REPORT, {**report, "key": key})


def validation_key(ctx: StageContext, python: Path, model: Path | None) -> str:
    """What a full validation depends on: the build (its stamp digest), the interpreter, the recipe's
    checks, variant and run-time environment, and the model given."""
    from ...build_stamp import stamp_path

    build_stamp = None
    recipe = ctx.recipe
    from ...recipe.builds import final_build

    stamp = read_state(stamp_path(recipe, ctx.workspace), needs=("digest", "components")) if final_build(recipe) \
        else None  # the final build's stamp (its components hold what the builds it needs were made from)
    try:
        if stamp is not None and stamp["components"]["python"]["path"] == str(python):
            build_stamp = stamp["digest"]
    except (KeyError, TypeError):
        pass  # a stamp of another shape: not this build's
    from ...build_stamp import installed_digest
    from ...recipe.schema import to_data

    # an install-only board has no build stamp: the wheel it installed is what was validated
    facts = {"build": build_stamp or installed_digest(ctx.workspace), "python": str(python),
             "model": str(model) if model else None,
             "checks": [to_data(check) for check in recipe.checks], "variant": recipe.variant,
             "runtime_env": to_data(recipe.runtime.env),
             "runtime": [r.requirement for r in recipe.python.runtime]}
    return hash_text(json.dumps(facts, sort_keys=True, default=str))


def last_validation(ctx: StageContext) -> dict[str, Any] | None:
    return read_state(ctx.workspace.recipe_state / LAST_REPORT, needs=("ok", "summary"))


def current_validation(ctx: StageContext, python: Path, model: Path | None) -> dict[str, Any] | None:
    """The last report when it passed every check for exactly this build, interpreter and recipe."""
    last = last_validation(ctx)
    if last and last.get("ok") and last.get("key") and last["key"] == validation_key(ctx, python, model):
        return last
    return None
