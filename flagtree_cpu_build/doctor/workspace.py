"""doctor checks of the workspace: sources, links, the published downloads, the last build, and the
environment a user's shell gives builds and kernels (judged by the recipe's build hazards and run-time
environment). Read-only: git runs without optional locks, nothing is repaired here (each fix names
the command that repairs it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..extract import read_stamp
from ..stagekit.plan import PlanItem
from ..state import read_state
from .facts import builds, existing_parent, python_facts, stage_plans
from .kit import DoctorContext, Outcome, check, fail, ok, skip, warn

# --- workspace --------------------------------------------------------------------------------------------------


def _set_up(c: DoctorContext) -> bool:
    """Has any command set this workspace up? Every one that changes it makes the state folder first.

    The workdir folder alone proves nothing (a user may have made it, or point --workdir at the
    current folder): before setup, missing sources and downloads are the normal state, not a failure.
    """
    return c.workspace.state_dir.is_dir()


def _not_set_up(c: DoctorContext, what: str) -> Outcome:
    return skip(f"not set up yet: no workspace at {c.workspace.root} ({what}); `flagtree-cpu setup` creates it")


def _install_only(c: DoctorContext) -> dict | None:
    """The record of an install-only board (the build came from a wheelhouse; nothing was synced or fetched)."""
    from ..stages.build import install_only

    if c.recipe.build is None:
        return None
    return install_only.board_record(c.recipe, c.workspace, c.options, install_only.workspace_lock(c.workspace))


def _skipped_here(c: DoctorContext) -> Outcome | None:
    record = _install_only(c)
    return skip(f"install-only board: the build came from the wheelhouse {record['wheelhouse']}; nothing is "
                "synced, fetched or linked here") if record is not None else None


def _plans(c: DoctorContext, area: str) -> list[PlanItem]:
    return stage_plans(c, area)


def _behind(items: list[PlanItem]) -> list[PlanItem]:
    return [i for i in items if i.will not in ("ok", "skipped")]


@check("workspace.sources", "workspace", "Sources at their pins", live_only=True)
def workspace_sources(c: DoctorContext) -> Outcome:
    if not _set_up(c):
        return _not_set_up(c, "`flagtree-cpu sync` clones the sources")
    if (here := _skipped_here(c)) is not None:
        return here
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
    if (here := _skipped_here(c)) is not None:
        return here
    if not (c.workspace.root / c.recipe.source_path(c.recipe.links.root)).is_dir():
        return skip(f"{c.recipe.links.root} is not checked out yet")
    behind = _behind(_plans(c, "links"))
    if behind:
        bad = [link for link in behind[0].data.get("links", []) if link["state"] != "ok"]
        return fail(f"{len(bad)} of {len(c.recipe.links.entries)} not as the recipe says: "
                    + ", ".join(f"{b['path']} ({b['state']})" for b in bad[:4]) + (" ..." if len(bad) > 4 else ""),
                    "flagtree-cpu link")
    return ok(f"all {len(c.recipe.links.entries)} in place")


@check("workspace.artifacts", "workspace", "The published downloads (artifacts)", live_only=True)
def workspace_artifacts(c: DoctorContext) -> Outcome:
    if not c.recipe.artifacts:
        return skip("the recipe has no artifacts")
    if (here := _skipped_here(c)) is not None:
        return here
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
    from ..build_stamp import stamp_path
    from ..recipe.builds import final_build

    if final_build(c.recipe) is None:
        return skip("the recipe has no build")

    record = _install_only(c)
    if record is not None:
        from ..stages.build.install_only import said

        return ok(said(record))
    stamp_file = stamp_path(c.recipe, c.workspace)
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
                    "flagtree-cpu build, once the sources and downloads are current")
    return ok("built from the sources and downloads now in place")


@check("workspace.build-env", "workspace", "Inherited variables that would mislead a manual build", live_only=True)
def workspace_build_env(c: DoctorContext) -> Outcome:
    from ..recipe.builds import MAIN

    # every build's hazards (a framework built before the compiler has its own misleading variables)
    named = [(name, h) for name, build in builds(c).items() for h in build.hazards]
    if not named:
        return skip("the recipe names no misleading build variables")
    hazards = list(dict.fromkeys(h for _, h in named))
    found = [h for h in hazards if h.applies(c.environ.get(h.name))]
    if not found:
        return ok("nothing that conflicts")
    whose = {h: [n for n, other in named if other == h and n != MAIN] for h in found}
    notes = [f"{h.name}={c.environ[h.name]} {h.why}" + (f" (build {', '.join(whose[h])})" if whose[h] else "")
             for h in found]
    unset = sorted({h.name for h in found if not h.fix})
    fixes = [f"unset {' '.join(unset)}"] if unset else []
    fixes += list(dict.fromkeys(h.fix for h in found if h.fix))
    return warn("; ".join(notes) + " (flagtree-cpu build overrides them; a hand-run build would not)",
                "; ".join(fixes))


def _missing_runtime(c: DoctorContext) -> list[tuple[str, str]]:
    """(variable, what this shell lacks) for the recipe's run-time environment: values to set, entries of
    PATH-like variables. Scripts it sources and command-dependent values cannot be judged from here."""
    env = c.recipe.runtime.env
    missing = [(k, f"{k}={v}") for k, v in env.set.items() if c.environ.get(k) != v]
    for name, entries in (*env.prepend.items(), *env.append.items()):
        have = c.environ.get(name, "").split(os.pathsep)
        missing += [(name, f"{entry} in {name}") for entry in entries if entry not in have]
    return missing


@check("workspace.runtime-env", "workspace", "The recipe's run-time variables in this shell", live_only=True)
def workspace_runtime_env(c: DoctorContext) -> Outcome:
    runtime = c.recipe.runtime
    if runtime.env.is_empty():
        return skip("the recipe sets no run-time environment")
    missing = _missing_runtime(c)
    only_with = runtime.only_with
    installed: set[str] = set()
    if any(name in only_with for name, _ in missing):
        facts = python_facts(c) if c.options.python.exists() else None
        installed = {d for d in only_with.values() if facts and facts["found"].get(d)}
    # a variable that matters only with a distribution is no news while that distribution is absent
    important = [(name, text) for name, text in missing if name not in only_with or only_with[name] in installed]
    if important:
        names = list(dict.fromkeys(name for name, _ in important))
        notes = [(name, runtime.notes[name]) for name in names if name in runtime.notes]
        why = ""
        if len(notes) == 1:
            why = f" ({notes[0][1]})"
        elif notes:
            why = " (" + "; ".join(f"{name}: {note}" for name, note in notes) + ")"
        return warn(f"not exported in this shell: {', '.join(t for _, t in important)}{why}",
                    'eval "$(flagtree-cpu env)"')
    if not missing:
        return ok("the recipe's run-time variables are exported")
    waiting = sorted({name for name, _ in missing})
    exported = [k for k in runtime.env.set if k not in waiting]
    return ok((f"{', '.join(exported)} {'is' if len(exported) == 1 else 'are'} set; " if exported else "")
              + "; ".join(f"{name} matters only once {only_with[name]} is installed" for name in waiting))


@check("workspace.install-prefix", "workspace", "The install prefix the build passes to CMake is writable",
       live_only=True)
def workspace_install_prefix(c: DoctorContext) -> Outcome:
    # any variable of the build environment may carry CMake arguments (a project's own *_CMAKE_ARGS, CMAKE_ARGS):
    # an install prefix in one of them is where an install step will write
    every = builds(c).values()
    values = [v for b in every for v in b.env.set.values()]
    found = [m.group(1) for v in values for m in re.finditer(r"-DCMAKE_INSTALL_PREFIX(?::\w+)?=(\S+)", v)]
    found += [v for b in every if b.cmake for k, v in b.cmake.define.items()  # build.cmake.define hands it over too
              if k.split(":")[0] == "CMAKE_INSTALL_PREFIX"]
    prefixes = list(dict.fromkeys(found))
    if not prefixes:
        return skip("the recipe's build sets no CMake install prefix")
    problems, fine = [], []
    for text in prefixes:
        prefix = Path(text)
        where = existing_parent(prefix)
        if os.access(where, os.W_OK):
            fine.append(f"{prefix} {'is' if where == prefix else 'can be created'} writable")
        else:
            problems.append((prefix, where))
    if problems:
        return fail("; ".join(f"{p} is not writable" for p, _ in problems) + " (the build's install step would "
                    "fail with Permission denied)", " && ".join(c.as_root(f"chown -R $USER {w}") for _, w in problems)
                    + "   # or set a prefix you own in the recipe")
    return ok("; ".join(fine))
