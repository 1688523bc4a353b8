"""doctor checks of the workspace: sources, links, the LLVM tree, the last build, and the
environment a user's shell gives builds and kernels. Read-only: git runs without optional
locks, nothing is repaired here (each fix names the command that repairs it).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from ..extract import read_stamp
from ..plans import PlanItem, Scope
from ..plans.build import STAMP
from ..state import read_state
from .facts import existing_parent, python_facts
from .kit import DoctorContext, Outcome, check, fail, ok, skip, warn

# --- workspace --------------------------------------------------------------------------------------------------


def _set_up(c: DoctorContext) -> bool:
    """Has any command set this workspace up? Every one that changes it makes the state folder first.

    The workdir folder alone proves nothing (a user may have made it, or point --workdir at the
    current folder): before setup, missing sources and LLVM are the normal state, not a failure.
    """
    return c.workspace.state_dir.is_dir()


def _not_set_up(c: DoctorContext, what: str) -> Outcome:
    return skip(f"not set up yet: no workspace at {c.workspace.root} ({what}); `flagtree-cpu setup` creates it")


_PLANNING = threading.Lock()  # the checks run in a thread pool; the plans are made once for all four


def _plans(c: DoctorContext, area: str) -> list[PlanItem]:
    """The stages' own plans (read-only, offline): doctor says what `status` says and `setup` would do."""
    with _PLANNING:
        return [i for i in _all_plans(c) if i.area == area]


def _all_plans(c: DoctorContext) -> list[PlanItem]:
    if "plans" not in c.cache:
        from ..registry import plan_all
        from ..stages import StageContext
        from ..ui import UI

        ctx = StageContext(c.recipe, c.workspace, c.host, UI(quiet=True))
        c.cache["plans"] = plan_all(ctx, Scope(python=c.python))  # asks no server
    return c.cache["plans"]


def _behind(items: list[PlanItem]) -> list[PlanItem]:
    return [i for i in items if i.will not in ("ok", "skipped")]


@check("workspace.sources", "workspace", "Sources at their pins", live_only=True)
def workspace_sources(c: DoctorContext) -> Outcome:
    if not _set_up(c):
        return _not_set_up(c, "`flagtree-cpu sync` clones the sources")
    items = _plans(c, "sources")
    behind = _behind(items)
    if behind:
        return fail("; ".join(f"{i.subject}: {i.detail}" + (f" ({i.reason})" if i.reason else "") for i in behind),
                    "flagtree-cpu sync" + ("   # commit or stash the local changes first"
                                           if any(i.state == "dirty" for i in behind) else ""))
    dirty = [f"{i.subject} @{str(i.data.get('head'))[:12]}" for i in items if i.data.get("modified_files")]
    if dirty:
        return warn(f"local changes to tracked files in {', '.join(dirty)} (the build includes them)",
                    "git -C <checkout> status   # commit or stash them if they are not meant for the build")
    return ok(", ".join(f"{i.subject} @{str(i.data.get('head'))[:12]}" for i in items))


@check("workspace.links", "workspace", "The recipe's symlinks", live_only=True)
def workspace_links(c: DoctorContext) -> Outcome:
    if c.recipe.links is None:
        return skip("the recipe has no links")
    if not (c.workspace.root / c.recipe.source_path(c.recipe.links.root)).is_dir():
        return skip(f"{c.recipe.links.root} is not checked out yet")
    behind = _behind(_plans(c, "links"))
    if behind:
        bad = [link for link in behind[0].data.get("links", []) if link["state"] != "ok"]
        return fail(f"{len(bad)} of {len(c.recipe.links.entries)} not as the recipe says: "
                    + ", ".join(f"{b['path']} ({b['state']})" for b in bad[:4]) + (" ..." if len(bad) > 4 else ""),
                    "flagtree-cpu link   # No module named ...tle_ops at run time means exactly this")
    return ok(f"all {len(c.recipe.links.entries)} in place")


@check("workspace.llvm", "workspace", "The published LLVM tree", live_only=True)
def workspace_llvm(c: DoctorContext) -> Outcome:
    if not c.recipe.artifacts:
        return skip("the recipe has no artifacts")
    items = _plans(c, "artifacts")
    if not _set_up(c) and all(read_stamp(Path(i.data["path"])) is None for i in items):
        first = next(iter(c.recipe.artifacts.items()))
        return _not_set_up(c, f"`flagtree-cpu fetch` publishes {first[0]} at {first[1].path}")
    behind = _behind(items)
    if behind:
        fix = "flagtree-cpu fetch"
        stop = next((i for i in behind if i.will == "stop"), None)
        if stop is not None:
            fix = stop.action.removeprefix("stop:").strip()
        return fail("; ".join(f"{i.subject}: {i.detail}" for i in behind), fix)
    return ok(", ".join(i.detail.replace(" published", "") for i in items))


@check("workspace.build", "workspace", "The last build is current", live_only=True)
def workspace_build(c: DoctorContext) -> Outcome:
    stamp_file = c.workspace.state_dir / STAMP
    if not stamp_file.exists():
        return skip("no build yet") if _set_up(c) else _not_set_up(c, "`flagtree-cpu build` builds it")
    damaged: list[str] = []
    stamp = read_state(stamp_file, needs=("digest", "components"), notice=damaged.append)  # read-only: no repair
    if stamp is None or not isinstance(stamp["components"], dict):
        return warn(damaged[0] if damaged else f"{stamp_file} does not hold a build stamp",
                    "flagtree-cpu build   # moves the damaged stamp aside and builds again")
    behind = _behind(_plans(c, "build"))
    if behind:
        return warn(f"built before; would build again: {behind[0].reason}", "flagtree-cpu setup   # or: "
                    "flagtree-cpu build, once the sources and LLVM are current")
    return ok("built from the sources and LLVM now in place")


@check("workspace.build-env", "workspace", "Inherited variables that would mislead a manual build", live_only=True)
def workspace_build_env(c: DoctorContext) -> Outcome:
    llvm_paths = {a.path for a in c.recipe.artifacts.values()}
    notes = []
    if c.environ.get("LLVM_SYSPATH") and c.environ["LLVM_SYSPATH"] not in llvm_paths:
        notes.append(f"LLVM_SYSPATH={c.environ['LLVM_SYSPATH']} is not the recipe's LLVM")
    if c.environ.get("TRITON_OFFLINE_BUILD", "").upper() == "ON":
        notes.append("TRITON_OFFLINE_BUILD=ON turns on FlagTree's own offline mode (needs FLAGTREE_OFFLINE_BUILD_DIR)")
    backend = c.environ.get("FLAGTREE_BACKEND")
    if backend and backend != "cpu":
        notes.append(f"FLAGTREE_BACKEND={backend}")
    if notes:
        names = " ".join(sorted({n.split("=")[0] for n in notes}))
        return warn("; ".join(notes) + " (flagtree-cpu build overrides them; a hand-run pip install would not)",
                    f"unset {names}")
    return ok("nothing that conflicts")


@check("workspace.runtime-env", "workspace", "Run-time variables for JIT-compiled kernels", live_only=True)
def workspace_runtime_env(c: DoctorContext) -> Outcome:
    missing = [f"{k}={v}" for k, v in c.recipe.runtime.env.items() if c.environ.get(k) != v]
    facts = python_facts(c) if c.python.exists() else None
    gems = bool(facts and facts["found"].get("flag_gems"))
    important = [m for m in missing if not m.startswith("FLAGGEMS_VENDOR=") or gems]
    if important:
        why = " (kernels fail: kernel.s: Error: junk at end of line)" if any(
            m.startswith("FLAGTREE_BACKEND=") for m in important) else ""
        return warn(f"not exported in this shell: {', '.join(important)}{why}", 'eval "$(flagtree-cpu env)"')
    return ok("the recipe's run-time variables are exported" if not missing else
              "FLAGTREE_BACKEND is set; FLAGGEMS_VENDOR matters only once FlagGems is installed")


@check("workspace.install-prefix", "workspace", "The per-user install prefix is writable", live_only=True)
def workspace_install_prefix(c: DoctorContext) -> Outcome:
    arguments = c.recipe.build.env.get("TRITON_APPEND_CMAKE_ARGS", "") if c.recipe.build else ""
    match = re.search(r"-DCMAKE_INSTALL_PREFIX=(\S+)", arguments)
    if not match:
        return skip("the recipe sets no install prefix")
    prefix = Path(match.group(1))
    where = existing_parent(prefix)
    if os.access(where, os.W_OK):
        return ok(f"{prefix} {'is' if where == prefix else 'can be created'} writable")
    return fail(f"{prefix} is not writable (sleef's install step would fail with Permission denied)",
                c.as_root(f"chown -R $USER {where}") + "   # or set a prefix you own in the recipe")
