"""Install-only boards: a published build taken by the lock's pins, before anything is synced or downloaded.

When a wheelhouse is configured (``--wheelhouse``, ``$FLAGTREE_CPU_WHEELHOUSE``, the recipe's ``build.wheelhouse``),
the lock gives every pin (``pins.py``) and the manifest lists a build published under the same pins key whose target
class fits this machine, `setup` and `build` take it by themselves: no sync, no artifact download, no links, no build
prerequisites. The venv gets the recipe's run-time prerequisites (when the checks will run), the wheel is downloaded
through the verified path (``prebuilt``: the manifest's sha256 must match, or exit 4 and nothing installed) and
installed; `setup` then validates. A record (``install-only.json``) says where it came from and what was skipped;
`status`, `doctor` and a re-run read it, and a re-run whose pins are unchanged asks no wheelhouse (no network I/O).

Hostile wheelhouses: a pins key that fits with a class that does not is not taken (the usual path runs, and the
reason is said); a wheel that does not hash to its manifest's sha256 — also one changed between the ask and the
download — is refused with exit 4 and nothing installed, as ``prebuilt`` refuses it for a build-key match (a lying
wheelhouse is an attack or a broken publisher: the user must know, not get a silent hour-long build); a wheel the
wheelhouse cannot deliver (gone, a server that drops) is one warning, and the usual path runs.

Building here later: ``flagtree-cpu sync``, then ``flagtree-cpu build --force`` (``--force`` never asks the
wheelhouse); a finished build here removes the record.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import wheelhouse as wh
from ...build_stamp import build_mode
from ...build_stamp import install_only_record as record_path
from ...lockfile import write_lock
from ...state import read_state, write_state
from . import prebuilt
from .pins import PinsKey, pins_differences, pins_key
from .recipe_lock import lock_from_recipe

if TYPE_CHECKING:
    from ...lockfile import Lock
    from ...recipe import Recipe
    from ...stagekit.plan import PlanItem
    from ...stagekit.stage import RunOptions, StageContext, StageResult
    from ...workspace import Workspace

NOT_CONFIGURED = "no wheelhouse is configured"
SKIPPED = ("sync", "fetch", "link", "build prerequisites", "build")
_SHOWN = 4


@dataclass(frozen=True)
class Offer:
    """A published build this board may install instead of syncing, fetching and building."""

    location: wh.Location
    entry: dict[str, Any]
    pins: PinsKey
    lock: Lock | None = None  # the lock a fully pinned recipe gave (no lock file yet): written once installed

    @property
    def wheel(self) -> str:
        return str(self.entry["file"]).split("/")[-1]

    def says(self) -> str:
        return f"install {self.wheel} from {self.location.given} (no sync, no fetch)"


def workspace_lock(ws: Workspace) -> Lock | None:
    from ...lockfile import read_lock

    return read_lock(ws.lock_file) if ws.lock_file.is_file() else None


def installed(ctx: StageContext, options: RunOptions, lock: Lock | None) -> dict[str, Any] | None:
    """The install-only record, when it holds for this recipe, lock and interpreter (the re-run: no wheelhouse is
    asked, nothing is downloaded); None otherwise (said when what it installed is gone: it is installed again)."""
    record = board_record(ctx.recipe, ctx.workspace, options, lock)
    if record is None and (went := gone(ctx.workspace, options)):
        ctx.ui.info(f"{went}: the wheelhouse is asked again")
    return record


def board_record(recipe: Recipe, ws: Workspace, options: RunOptions, lock: Lock | None) -> dict[str, Any] | None:
    """``installed`` for what is not a stage context (doctor's)."""
    record = read_state(record_path(ws), needs=("pins_key", "python", "wheelhouse"))
    if record is None or options.force or not options.python.exists() or record["python"] != str(options.python):
        return None
    found, _ = pins_key(recipe, lock)
    if found is None or found.key != record["pins_key"]:
        return None
    return record if still_there(record) else None


def still_there(record: dict[str, Any]) -> bool:
    """Whether what the record says was installed is still there, by one stat and no pip run: the wheel's
    ``.dist-info`` folder in the interpreter (gone after ``pip uninstall``, or in a venv made again), or the wheel
    file a wheel-mode build put in its folder. A record that does not say where (its interpreter could not tell)
    is not trusted: the wheel is installed again."""
    wheel = record.get("wheel")
    if isinstance(wheel, dict):
        return isinstance(wheel.get("path"), str) and Path(wheel["path"]).is_file()
    dist_info = record.get("dist_info")
    return isinstance(dist_info, str) and bool(dist_info) and (Path(dist_info) / "METADATA").is_file()


def gone(ws: Workspace, options: RunOptions) -> str:
    """What a re-run says when the record's install went away (uninstalled, or the venv was made again): "" when
    there is no such record for this interpreter."""
    record = read_state(record_path(ws), needs=("python", "wheelhouse"))
    if record is None or record["python"] != str(options.python) or still_there(record):
        return ""
    what = str(record.get("file", "the build")).split("/")[-1]
    where = record.get("dist_info") or (record.get("wheel") or {}).get("path") or options.python
    return f"{what}, installed from the wheelhouse {record['wheelhouse']}, is gone ({where} is missing)"


# where the installed wheel's metadata is: the .dist-info folder holding its METADATA (one question, at install)
_DIST_INFO = ("import sys\n"
              "from importlib import metadata\n"
              "d = metadata.distribution(sys.argv[1])\n"
              "print(next((str(d.locate_file(f).parent) for f in d.files or () if f.name == 'METADATA'\n"
              "            and f.parent.name.endswith('.dist-info')), ''))\n")


def _dist_info(python: Path, wheel: str) -> str:
    """The installed wheel's ``.dist-info`` folder, asked of the interpreter once (a re-run only stats it); "" when
    it cannot say."""
    from ...proc import capture_bounded

    name = wheel.split("-")[0]  # a wheel's file name starts with its distribution's (normalized) name
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}  # the target's own
        done = capture_bounded([str(python), "-c", _DIST_INFO, name], limit=8192, timeout_s=60.0, env=env)
    except OSError:
        return ""
    if done.timed_out or done.overflowed or done.returncode != 0:
        return ""
    found = done.stdout.strip()
    return found if found and Path(found).is_dir() else ""


def ask(ctx: StageContext, options: RunOptions, lock: Lock | None) -> tuple[Offer | None, str]:
    """The wheelhouse's build for this board's pins and class; None and why not (said as the dry run says it)."""
    recipe = ctx.recipe
    if recipe.build is None:
        return None, "the recipe has no build"
    chosen = wh.configured(options.wheelhouse, os.environ, recipe.build.wheelhouse,
                           wh.imported_wheelhouse(ctx.workspace.recipe_state))
    if chosen is None:
        return None, NOT_CONFIGURED
    if options.force:
        return None, "--force builds here"
    location = wh.parse_location(*chosen)
    if options.offline and location.folder is None:
        return None, f"--offline: the wheelhouse {location.given} is not asked"
    derived = None
    if lock is None:  # a fully pinned recipe is its own lock
        derived, why = lock_from_recipe(recipe)
        if derived is None:
            return None, why
    mine, why = pins_key(recipe, lock or derived)
    if mine is None:
        return None, why
    wheels, unread = prebuilt.read_wheels(location, ctx.ui, prebuilt.downloads_dir(ctx.workspace))
    if wheels is None:
        return None, unread
    entry, why = _choose(wheels, recipe.name, recipe.variant, mine, _target(ctx, options))
    if entry is None:
        return None, f"wheelhouse {location.given}: {why}"
    return Offer(location, entry, mine, derived), ""


def _target(ctx: StageContext, options: RunOptions) -> dict[str, Any]:
    """This board's target class; the interpreter's version is the one the venv will have (made with this one)."""
    from ...pythonenv import query

    version = query(options.python, [])[0] if options.python.exists() else platform.python_version()
    target = ctx.recipe.platform.target
    return wh.target_class(ctx.recipe.target_arch(ctx.host.arch), target.cpu_features, target.sve_vector_bits,
                           ctx.host.glibc, version)


def _choose(wheels: list[dict[str, Any]], recipe: str, variant: str | None, mine: PinsKey,
            here: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    keyed = [w for w in wheels if w["recipe"] == recipe and w.get("variant") == variant and "pins_key" in w]
    same = [w for w in keyed if w["pins_key"] == mine.key]
    fits = [w for w in same if not wh.class_differences(w["class"], here)]
    if fits:
        return wh.newest(fits), ""
    if same:
        return None, (f"the build of these pins ({same[0]['file'].split('/')[-1]}) is for another machine: "
                      + "; ".join(wh.class_differences(same[0]["class"], here)[:_SHOWN]))
    if not keyed:
        return None, "no build published with a pins key (published before install-only boards, or from a " \
                     "checkout the lock did not describe)"
    said = min((pins_differences(w["pins"], mine.document) for w in keyed), key=len)
    more = f" and {len(said) - _SHOWN} more" if len(said) > _SHOWN else ""
    return None, f"no build of these pins; the closest differs: {'; '.join(said[:_SHOWN])}{more}"


def install(ctx: StageContext, options: RunOptions, offer: Offer, *, runtime: bool) -> StageResult | None:
    """The venv, its run-time prerequisites (``runtime``: setup, when the checks will run; `build` installs none, as
    it never does), the verified wheel installed, the record written. None: the wheelhouse could not deliver the
    wheel (warned once); the caller takes the usual path."""
    from ...stagekit.stage import Action, StageResult

    start = time.monotonic()
    recipe, ws = ctx.recipe, ctx.workspace
    got = prebuilt.fetch_wheel(ctx, offer.location, offer.entry)
    if got is None:
        return None
    try:
        _runtime(ctx, options, runtime)
        delivered, log = prebuilt.deliver(ctx, options, offer.location, offer.entry, got,
                                          build_mode(recipe, options.build.wheel_dir))
    finally:
        prebuilt.forget_downloads(ws)  # the verified wheel, installed or not, is not kept
    came_from = {"wheelhouse": offer.location.given, "file": offer.entry["file"], "sha256": offer.entry["sha256"],
                 "built_on": offer.entry.get("built_on", {}), "pins_key": offer.pins.key,
                 "python": str(options.python), "skipped": list(SKIPPED), "log": str(log),
                 **({"wheel": delivered} if delivered else {"dist_info": _dist_info(options.python, offer.wheel)})}
    if offer.lock is not None and not ws.lock_file.exists():  # what `flagtree-cpu lock` would write here
        write_lock(ws.lock_file, offer.lock)
        ctx.ui.info(f"no lock file: the recipe pins every input, so its lock was written from it ({ws.lock_file}), "
                    "as `flagtree-cpu lock` would")
    write_state(record_path(ws), came_from)
    seconds = time.monotonic() - start
    detail = (f"installed from the wheelhouse in {seconds:.1f}s, no build (built on "
              f"{came_from['built_on'].get('host', '?')}); install-only: skipped {', '.join(SKIPPED)}")
    data = {"wheelhouse": came_from, "install_only": True, "log": str(log),
            **({"wheel": delivered} if delivered else {})}
    return StageResult("build", (Action("build", "created", detail, data),), seconds=seconds)


def _runtime(ctx: StageContext, options: RunOptions, wanted: bool) -> None:
    """The venv, and what the installed wheel needs at run time (the recipe's python.runtime) when ``wanted``; never
    the build prerequisites."""
    from ... import pythonenv
    from ...installer import choose_for

    recipe = ctx.recipe
    pythonenv.ensure_interpreter(options.python, ctx.workspace, recipe.python.requires, ctx.ui)
    runtime = list(recipe.python.runtime) if wanted else []
    if not runtime:
        return
    path = os.pathsep.join([str(options.python.parent), os.environ.get("PATH", "")])
    report = pythonenv.check(options.python, runtime, path, recipe=recipe)
    if report.missing:  # as the python stage installs them: the run's installer, and --offline's rule
        pythonenv.install_missing(report, ctx.workspace, ctx.ui,
                                  lambda: pythonenv.check(options.python, runtime, path, recipe=recipe),
                                  offline=options.offline, installer=choose_for(recipe, options.installer,
                                                                                options.python))


def forget(ws: Workspace) -> None:
    """A build here replaces what was installed from the wheelhouse: its record goes."""
    record_path(ws).unlink(missing_ok=True)


def up_to_date(record: dict[str, Any]) -> StageResult:
    """A re-run: the record holds for these pins; nothing is asked or downloaded."""
    from ...stagekit.stage import Action, StageResult

    data = {"wheelhouse": record, "install_only": True, **({"wheel": record["wheel"]} if record.get("wheel") else {})}
    return StageResult("build", (Action("build", "ok", "up to date", data),))


def said(record: dict[str, Any]) -> str:
    """What status and doctor say of an install-only board."""
    return (f"installed from the wheelhouse {record['wheelhouse']} ({str(record.get('file', '')).split('/')[-1]}, "
            f"built on {record.get('built_on', {}).get('host', '?')}); install-only: skipped "
            f"{', '.join(record.get('skipped') or SKIPPED)} (to build here: flagtree-cpu sync, then flagtree-cpu build "
            "--force)")


def status_item(record: dict[str, Any]) -> PlanItem:
    from ...stagekit.plan import PlanItem

    return PlanItem("build", str(record.get("file", "build")).split("/")[-1], "ok", said(record),
                    data={"install_only": record})


def skipped_result(stage: str, record: dict[str, Any]) -> StageResult:
    """A stage setup does not run on an install-only board, and why."""
    from ...stagekit.stage import Action, StageResult

    return StageResult(stage, (Action(stage, "skipped", f"install-only: the build came from the wheelhouse "
                                      f"{record['wheelhouse']}"),))
