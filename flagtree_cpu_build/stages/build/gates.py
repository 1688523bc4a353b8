"""Gate checks: recipe checks with `before: NAME` run in the build stage, before that build's command.

A gate says whether the build may start at all (the vendor SDK's version, a kernel module, a header another build
installed): it runs like a validation check (``stages.validate.run_check``: its kind, its `needs`, its `when`, its
timeout and log), but in the build's own environment and only when the build is about to run (an up-to-date build
runs no gate). A required gate that fails stops the build with the check's words; one that is not required is
a warning; one whose `needs` are absent here is skipped and said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import BuildError

if TYPE_CHECKING:
    from ...buildenv import BuildEnv
    from ...stagekit.stage import RunOptions, StageContext


def run_gates(ctx: StageContext, options: RunOptions, name: str, build_env: BuildEnv) -> None:
    """Run the checks whose `before` names the build ``name``, in recipe order; the first required one that fails
    stops the build (exit 5) and nothing of the build runs."""
    gates = [c for c in ctx.recipe.checks if c.before == name]
    if not gates:
        return
    from ..validate import run_check

    env = dict(build_env.env)
    env.pop("PYTHONHOME", None)
    env["PYTHONUNBUFFERED"] = "1"  # a gate that hangs or dies has still shown what it did
    for check in gates:
        ctx.ui.info(f"gate check {check.label} (before {name})")
        result = run_check(ctx, options, check, env, {})
        if result.status == "skip":
            ctx.ui.info(f"gate check {check.label} skipped: {result.message}")
        elif result.status == "fail" and not result.required:
            ctx.ui.warn(f"gate check {check.label} failed (not required): {result.message or result.figure}")
        elif result.status == "fail":
            details = tuple(x for x in (result.figure and f"result: {result.figure}",
                                        result.log and f"log: {result.log}") if x)
            where = f" ({ctx.recipe.file})" if ctx.recipe.file else ""
            called = "the build" if name == "build" else f"the build {name}"
            raise BuildError(f"gate check {check.label} failed; {called} did not run: "
                             f"{result.message or result.figure or 'it failed'}", details=details,
                             fix=result.fix or f"make the check pass (flagtree-cpu validate --check {check.label} "
                             f"runs it alone), or correct its entry in the recipe{where}", log=result.log)
