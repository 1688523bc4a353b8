"""doctor checks of the workspace: sources, links, the LLVM tree, the last build, and the
environment a user's shell gives builds and kernels. Read-only: git runs without optional
locks, nothing is repaired here (each fix names the command that repairs it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .doctor import DoctorContext, Outcome, check, fail, ok, skip, warn
from .doctor_local import existing_parent, python_facts
from .extract import read_stamp
from .state import read_state

# --- workspace --------------------------------------------------------------------------------------------------


def _set_up(c: DoctorContext) -> bool:
    """Has any command set this workspace up? Every one that changes it makes the state folder first.

    The workdir folder alone proves nothing (a user may have made it, or point --workdir at the
    current folder): before setup, missing sources and LLVM are the normal state, not a failure.
    """
    return c.workspace.state_dir.is_dir()


def _not_set_up(c: DoctorContext, what: str) -> Outcome:
    return skip(f"not set up yet: no workspace at {c.workspace.root} ({what}); `flagtree-cpu setup` creates it")


@check("workspace.sources", "workspace", "Sources at their pins", live_only=True)
def workspace_sources(c: DoctorContext) -> Outcome:
    from .gitcmd import git_result
    from .lockfile import read_lock

    if not _set_up(c):
        return _not_set_up(c, "`flagtree-cpu sync` clones the sources")
    lock = read_lock(c.workspace.lock_file)
    problems, dirty, good = [], [], []
    for name, source in c.recipe.sources.items():
        checkout = c.workspace.root / c.recipe.source_path(name)
        locked = lock.sources.get(name) if lock else None
        wanted = (source.commit or "").lower() or (locked.commit if locked else None)
        if not (checkout / ".git").exists():
            problems.append(f"{name} not checked out")
            continue
        head = git_result(["rev-parse", "HEAD"], cwd=checkout)[1].strip()
        if wanted and head != wanted:
            problems.append(f"{name} at {head[:12]}, pinned {wanted[:12]}")
            continue
        changes = git_result(["status", "--porcelain", "--untracked-files=no"], cwd=checkout)[1].strip()
        (dirty if changes else good).append(f"{name} @{head[:12]}")
    if problems:
        return fail("; ".join(problems), "flagtree-cpu sync")
    if dirty:
        return warn(f"local changes to tracked files in {', '.join(dirty)} (the build includes them)",
                    "git -C <checkout> status   # commit or stash them if they are not meant for the build")
    return ok(", ".join(good))


@check("workspace.links", "workspace", "The recipe's symlinks", live_only=True)
def workspace_links(c: DoctorContext) -> Outcome:
    from .links import plan_links

    if c.recipe.links is None:
        return skip("the recipe has no links")
    root = c.workspace.root / c.recipe.source_path(c.recipe.links.root)
    if not root.is_dir():
        return skip(f"{c.recipe.links.root} is not checked out yet")
    bad = [link for link in plan_links(c.recipe, c.workspace).links if link.state != "ok"]
    if bad:
        return fail(f"{len(bad)} of {len(c.recipe.links.entries)} not as the recipe says: "
                    + ", ".join(f"{b.path} ({b.state})" for b in bad[:4]) + (" ..." if len(bad) > 4 else ""),
                    "flagtree-cpu link   # No module named ...tle_ops at run time means exactly this")
    return ok(f"all {len(c.recipe.links.entries)} in place")


@check("workspace.llvm", "workspace", "The published LLVM tree", live_only=True)
def workspace_llvm(c: DoctorContext) -> Outcome:
    from .lockfile import expected_sha256, read_lock

    if not c.recipe.artifacts:
        return skip("the recipe has no artifacts")
    lock = read_lock(c.workspace.lock_file) if _set_up(c) else None
    problems, good = [], []
    for name, artifact in c.recipe.artifacts.items():
        stamp = read_stamp(Path(artifact.path))
        wanted = expected_sha256(lock, name, artifact)
        if stamp is None and not _set_up(c):
            return _not_set_up(c, f"`flagtree-cpu fetch` publishes {name} at {artifact.path}")
        if stamp is None:
            problems.append(f"{name}: nothing published at {artifact.path}")
        elif stamp.get("url") != artifact.url or (wanted and stamp.get("sha256") != wanted):
            problems.append(f"{name}: {artifact.path} holds another download")
        else:
            good.append(f"{name} {stamp['sha256'][:12]} at {artifact.path}")
    if problems:
        return fail("; ".join(problems), "flagtree-cpu fetch")
    return ok(", ".join(good))


@check("workspace.build", "workspace", "The last build is current", live_only=True)
def workspace_build(c: DoctorContext) -> Outcome:
    from .gitcmd import git_result

    stamp_file = c.workspace.state_dir / "build-editable.json"
    if not stamp_file.exists():
        return skip("no build yet") if _set_up(c) else _not_set_up(c, "`flagtree-cpu build` builds it")
    damaged: list[str] = []
    stamp = read_state(stamp_file, needs=("digest", "components"), notice=damaged.append)  # read-only: no repair
    stored = stamp["components"] if stamp and isinstance(stamp["components"], dict) else None
    if stored is None:
        return warn(damaged[0] if damaged else f"{stamp_file} does not hold a build stamp",
                    "flagtree-cpu build   # moves the damaged stamp aside and builds again")
    changed = []
    for name, recorded in stored.get("sources", {}).items():
        if name in c.recipe.sources:
            head = git_result(["rev-parse", "HEAD"], cwd=c.workspace.root / c.recipe.source_path(name))[1].strip()
            if head != recorded.get("commit"):
                changed.append(f"{name} moved to {head[:12]}")
    for name, sha in stored.get("artifacts", {}).items():
        artifact = c.recipe.artifacts.get(name)
        if artifact is not None and (read_stamp(Path(artifact.path)) or {}).get("sha256") != sha:
            changed.append(f"{name} changed")
    if changed:
        return warn(f"built before: {', '.join(changed)}", "flagtree-cpu build")
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
