"""The build stage and a fleet's wheelhouse: take a build another machine made, or publish ours.

``build --wheelhouse LOCATION`` (``setup`` too; or ``$FLAGTREE_CPU_WHEELHOUSE``, or the recipe's
``build.wheelhouse``): when the build would run, the wheelhouse is asked first. A wheel whose build key and
target class fit this machine (``wheelhouse.py``) is downloaded through the verified download path
(``download.py``: the manifest's sha256 must match, or it is refused with exit 4 and nothing is
installed), then installed with ``pip install --no-deps`` (an editable recipe) or put where the build would
have put it (``build --wheel DIR`` and wheel-only recipes). No build command runs. The stamp written is the
one a build here would write, plus where it came from (``status`` shows it), so the next run is "up to date".
When nothing fits, the tool says which stamp input differs from the closest published build and builds. A
wheelhouse that cannot be read (gone, a server that does not answer, a damaged manifest) never fails the
build: one warning, and it builds.

``build --publish FOLDER`` builds the wheel (as ``--wheel``) and publishes it; publishing again when
nothing changed builds nothing and changes nothing in the wheelhouse. When the lock describes the checkout exactly
(every source at its locked commit without local changes, every artifact the locked download), the entry also
carries the lock's ``pins_key`` and ``pins`` (``pins.py``): install-only boards (``install_only.py``) find it by
them before syncing or downloading anything.

Downloads go to the workspace's ``.flagtree-cpu/wheelhouse-downloads/``, and nowhere else: every name used comes
from a manifest entry ``wheelhouse_manifest.py`` checked, the wheel's size is held while it arrives, and a partial
wheel stays only until the next run that asks the wheelhouse resumes it or a build here makes it useless.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import wheelhouse as wh
from ...build_stamp import differences, write_stamp
from ...errors import ArtifactError, BuildError, UsageError
from ...invocation import elsewhere
from ...workspace import home_dir, triton_home

if TYPE_CHECKING:
    from ...stagekit.stage import RunOptions, StageContext, StageResult
    from ...ui import UI
    from ...workspace import Workspace

_SHOWN_DIFFERENCES = 4
NOTHING_PUBLISHED = "nothing is published in the wheelhouse yet"


@dataclass(frozen=True)
class Identity:
    """What a wheel of this build is published and found by."""

    key: dict[str, Any]
    stamp: str  # digest of the key
    target: dict[str, Any]  # the target class
    class_id: str


def identity(ctx: StageContext, options: RunOptions, components: dict[str, Any]) -> Identity:
    """The build key and target class of the wheel this workspace's build makes (or would make)."""
    recipe, ws = ctx.recipe, ctx.workspace
    assert recipe.build is not None
    if components["mode"] != "wheel":  # the editable build's stamp, as the wheel command would have it
        components = {**components, "mode": "wheel",
                      "command": {"cwd": recipe.build.cwd, "argv": list(recipe.build.wheel_argv)}}
    paths = {str(triton_home(os.environ)): "{triton_home}", str(home_dir(os.environ)): "{home}",
             str(ws.root): "{workdir}", str(options.build.wheel_dir or ws.root / "dist"): "{wheel_dir}",
             str(options.python): "{python}"}
    key = {"recipe": recipe.name, **wh.build_key(components, paths)}
    target = recipe.platform.target
    klass = wh.target_class(recipe.target_arch(ctx.host.arch), target.cpu_features, target.sve_vector_bits,
                            ctx.host.glibc, components["python"]["version"])
    return Identity(key, wh.digest_of(key), klass, wh.digest_of(klass))


# --- taking a published build ----------------------------------------------------------------------------


def take(ctx: StageContext, options: RunOptions, components: dict[str, Any], stamp_file: Path,
         post_install: Callable[[], list[dict[str, Any]]], start: float) -> StageResult | None:
    """Install (or deliver) the wheelhouse's build when one fits; None: build here (the reason was said)."""
    from ...stagekit.stage import Action, StageResult

    assert ctx.recipe.build is not None
    chosen = wh.configured(options.wheelhouse, os.environ, ctx.recipe.build.wheelhouse,
                           wh.imported_wheelhouse(ctx.workspace.recipe_state))
    if chosen is None or options.force:  # --force: build here, whatever is published
        return None
    text, origin = chosen
    ui, recipe = ctx.ui, ctx.recipe
    location = wh.parse_location(text, origin)
    if not recipe.build.wheel_argv:
        ui.warn(f"recipe {recipe.name} has no build.wheel_argv, so no wheelhouse can hold its build; building here")
        return None
    if options.offline and location.folder is None:
        ui.warn(f"--offline: not asking the wheelhouse {location.given}; building here")
        return None
    me = identity(ctx, options, components)
    wheels, unread = read_wheels(location, ui, downloads_dir(ctx.workspace))
    if wheels is None:
        (ui.info if unread == NOTHING_PUBLISHED else ui.warn)(f"{unread}; building here")
        return None
    entry, why = choose(wheels, recipe.name, recipe.variant, me)
    if entry is None:
        ui.info(f"wheelhouse {location.given}: {why}; building here")
        return None
    ui.info(f"wheelhouse {location.given}: {entry['file'].split('/')[-1]} fits (built on "
            f"{entry.get('built_on', {}).get('host', '?')} at {entry.get('built_on', {}).get('at', '?')})")
    got = fetch_wheel(ctx, location, entry)
    if got is None:
        return None
    delivered, log = deliver(ctx, options, location, entry, got, components["mode"])
    steps = post_install()  # as after a build here
    came_from = {"wheelhouse": location.given, "file": entry["file"], "sha256": entry["sha256"],
                 "built_on": entry.get("built_on", {}), "stamp": me.stamp}
    built_before = stamp_file.exists()
    write_stamp(stamp_file, components, [], delivered, log, origin=came_from)
    seconds = time.monotonic() - start
    data: dict[str, Any] = {"wheelhouse": came_from, "log": str(log)}
    if delivered:
        data["wheel"] = delivered
        if options.build.publish:  # --wheelhouse one place, --publish another: the wheel taken goes on
            data["published"] = publish(ctx, options, components, delivered)
    if steps:
        data["steps"] = steps
    status = "updated" if built_before else "created"
    detail = (f"installed from the wheelhouse in {seconds:.1f}s, no build (built on "
              f"{came_from['built_on'].get('host', '?')})")
    return StageResult("build", (Action("build", status, detail, data),), seconds=seconds)


def choose(wheels: list[dict[str, Any]], recipe: str, variant: str | None,
           me: Identity) -> tuple[dict[str, Any] | None, str]:
    """The newest wheel whose key and class fit; else None and what differs from the closest one."""
    mine = [w for w in wheels if w["recipe"] == recipe and w.get("variant") == variant]
    fits = [w for w in mine if w["stamp"] == me.stamp and not wh.class_differences(w["class"], me.target)]
    if fits:  # as pip orders the builds of one version: the build tag's number, then (for old tags) the time
        return wh.newest(fits), ""
    if not mine:
        return None, f"no build of {recipe}{f' (variant {variant})' if variant else ''} is published there"

    def distance(w: dict[str, Any]) -> tuple[int, int]:
        return len(wh.class_differences(w["class"], me.target)), len(differences(w["key"], me.key))

    closest = min(mine, key=distance)
    said = [f"{wh.shown(key)} {wh.shown(old)} -> {wh.shown(new)}"  # the manifest's text, escaped for a log line
            for key, old, new in differences(closest["key"], me.key)]
    said += wh.class_differences(closest["class"], me.target)
    more = f" and {len(said) - _SHOWN_DIFFERENCES} more" if len(said) > _SHOWN_DIFFERENCES else ""
    return None, (f"no published build fits; the closest ({closest['file'].split('/')[-1]}) differs: "
                  + "; ".join(said[:_SHOWN_DIFFERENCES]) + more)


def read_wheels(location: wh.Location, ui: UI, scratch: Path) -> tuple[list[dict[str, Any]] | None, str]:
    """The wheelhouse's wheels, or None and why it cannot be read (gone, not answering, a damaged manifest;
    "nothing is published there yet" for a server without a manifest). Never raises for those: a wheelhouse
    is an optimisation. An HTTP manifest is downloaded into ``scratch`` and removed."""
    from ...download import Downloader, discard_part
    from ...regular_file import read_capped

    if location.folder is not None:
        if not location.folder.is_dir():
            return None, f"the wheelhouse {location.folder} is not a folder here"
        try:
            return wh.read_local_manifest(location.folder), ""
        except wh.DamagedManifest as err:
            return None, err.message
    part = scratch / (wh.MANIFEST + ".part")
    try:
        discard_part(part)  # the manifest is small and changes: never resumed
        got = Downloader(ui, attempts=2, backoff_s=0.2).fetch(
            [location.manifest_url], lambda url: part, label="the wheelhouse manifest", max_bytes=wh.MAX_MANIFEST_BYTES)
        return wh.parse_manifest(read_capped(got.part, wh.MAX_MANIFEST_BYTES), location.manifest_url), ""
    except wh.DamagedManifest as err:
        return None, err.message
    except ArtifactError as err:
        said = " ".join(err.details)
        if "HTTP 404 (not found)" in said:
            return None, NOTHING_PUBLISHED
        if "size mismatch — expected at most" in said:
            return None, (f"the wheelhouse manifest {location.manifest_url} has more than {wh.MAX_MANIFEST_BYTES} "
                          "bytes, more than any wheelhouse manifest; the download was stopped there")
        return None, f"the wheelhouse {location.given} cannot be read ({'; '.join(err.details)[:300]})"
    finally:
        discard_part(part)
        _tidy(part.parent)


def _tidy(folder: Path) -> None:
    """The workspace's download folder for wheelhouse files goes once it is empty (no debris)."""
    with contextlib.suppress(OSError):
        folder.rmdir()


def downloads_dir(ws: Workspace) -> Path:
    """Where the wheelhouse's manifest and wheels are downloaded to: a folder of their own (not the bundle import's
    ``wheelhouse/``, which pip reads with --offline: a partial wheel there made it look like an imported bundle)."""
    return ws.recipe_state / "wheelhouse-downloads"


def partial_downloads(ws: Workspace) -> list[Path]:
    """The wheelhouse's unfinished downloads in the workspace (for ``clean``), also in the folder earlier versions
    downloaded into (shared with the bundle import's wheels: only ``.whl.part`` files there are ours)."""
    return sorted([*downloads_dir(ws).glob("*.part"), *(ws.recipe_state / "wheelhouse").glob("*.whl.part")])


def forget_downloads(ws: Workspace, keep: Path | None = None) -> None:
    """Sweep the wheelhouse's downloads but ``keep``: a build here made them useless (so does the wheelhouse listing
    another wheel now); a stalled download would otherwise stay forever, as later runs are "up to date"."""
    from ...download import discard_part

    for part in partial_downloads(ws):
        if part != keep:
            with contextlib.suppress(ArtifactError, OSError):  # a folder someone made there is theirs: left alone
                discard_part(part)
    for leftover in downloads_dir(ws).glob("*.whl"):  # a verified wheel whose install was killed half-way
        with contextlib.suppress(OSError):
            leftover.unlink(missing_ok=True)
    _tidy(downloads_dir(ws))


def fetch_wheel(ctx: StageContext, location: wh.Location, entry: dict[str, Any]) -> Path | None:
    """The wheel, verified against the manifest's sha256, in the workspace; None (after one warning) when the
    wheelhouse cannot deliver it (the partial download stays for the next run to resume)."""
    from ...download import Downloader

    name = entry["file"].split("/")[-1]
    part = downloads_dir(ctx.workspace) / (name + ".part")
    forget_downloads(ctx.workspace, keep=part)  # parts of wheels the wheelhouse no longer offers here
    try:
        return Downloader(ctx.ui).fetch([location.url_of(entry["file"])], lambda url: part, label=name,
                                        expected={"sha256": entry["sha256"]}, max_bytes=entry["size"]).part
    except ArtifactError as err:
        _tidy(part.parent)
        if any(" mismatch — expected " in d for d in err.details):
            why = (f"more than the {entry['size']} bytes it lists" if any("size mismatch" in d for d in err.details)
                   else "sha256 differs")
            raise ArtifactError(f"the wheelhouse's {name} is not the file its manifest lists ({why}): "
                                "refused, nothing was installed", details=err.details,
                                fix="publish it again from a build you trust (on the machine that publishes: "
                                f"{elsewhere('build', '--force', '--publish', '...')}), or build here: flagtree-cpu "
                                "build (without --wheelhouse)") from None
        ctx.ui.warn(f"could not download {name} from the wheelhouse {location.given} "
                    f"({'; '.join(err.details)[:300]}); building here")
        return None


def deliver(ctx: StageContext, options: RunOptions, location: wh.Location, entry: dict[str, Any], got: Path,
             mode: str) -> tuple[dict[str, Any] | None, Path]:
    """Install the verified wheel (editable mode) or put it in the wheel folder (wheel mode). Returns the wheel
    record a wheel-mode stamp keeps, and the log."""
    from ...download import discard_part
    from ...proc import log_path, run_logged

    name = entry["file"].split("/")[-1]
    folder = got.parent
    if mode == "wheel":
        wheel_dir = options.build.wheel_dir or ctx.workspace.root / "dist"
        wheel_dir.mkdir(parents=True, exist_ok=True)
        final = wheel_dir / str(entry.get("original") or name)
        os.replace(got, final)
        discard_part(got)
        _tidy(folder)
        log = log_path(ctx.workspace.logs_dir, "wheelhouse")
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"# {location.url_of(entry['file'])} -> {final} (sha256 {entry['sha256']})\n")
        return {"path": str(final), "size": final.stat().st_size, "sha256": entry["sha256"]}, log
    wheel = folder / name
    os.replace(got, wheel)
    discard_part(got)
    from ...installer import InstallFlags, choose_for

    installer = choose_for(ctx.recipe, options.installer, options.python)
    argv = installer.install_argv(options.python, [str(wheel)], InstallFlags(no_deps=True, no_index=True,
                                                                             reinstall=True))
    log = log_path(ctx.workspace.logs_dir, "wheelhouse")
    try:
        with ctx.ui.progress(f"installing {name}") as task:
            result = run_logged(argv, cwd=ctx.workspace.root, env=installer.env(os.environ), log=log,
                                on_line=lambda line: task.update(0, None, detail="installing"))
    finally:
        wheel.unlink(missing_ok=True)
        _tidy(folder)
    if not result.ok:
        raise BuildError(f"{installer.name} could not install the wheelhouse's {name} into {options.python}",
                         details=(f"log: {log}",), fix="read the log; `flagtree-cpu build` without --wheelhouse "
                         "builds here instead")
    return None, log


# --- publishing ---------------------------------------------------------------------------------------------


def publish(ctx: StageContext, options: RunOptions, components: dict[str, Any],
            wheel: dict[str, Any] | None) -> dict[str, Any]:
    """Publish the wheel the build made (or made before, when it is up to date) into ``options.build.publish``."""
    assert options.build.publish is not None
    folder = publish_folder(options.build.publish)
    if not wheel or not Path(str(wheel.get("path"))).is_file():
        raise BuildError("there is no wheel to publish", fix="build it: flagtree-cpu build --force --publish ...")
    me = identity(ctx, options, components)
    recipe = ctx.recipe
    compilers = components.get("compilers", {})
    entry = {"recipe": recipe.name, "variant": recipe.variant, "stamp": me.stamp, "key": me.key,
             "class": me.target, "class_id": me.class_id, "wheel_sha256": wheel.get("sha256"),
             "built_on": wh.built_on(compilers, components["python"]["version"], ctx.host.glibc),
             "lock": {"sources": {n: s.get("commit") for n, s in components["sources"].items()},
                      "artifacts": components["artifacts"]},
             "tool": _tool_version(), **_pins_of(ctx, components)}
    done = wh.publish(folder, Path(wheel["path"]), entry, wait_note=ctx.ui.info)
    ctx.ui.info(f"{done.status}: {done.file}")
    return {"status": done.status, "file": str(done.file), "sha256": done.entry["sha256"],
            "wheelhouse": str(folder), "stamp": me.stamp, "class": me.target}


def _pins_of(ctx: StageContext, components: dict[str, Any]) -> dict[str, Any]:
    """``pins_key`` and ``pins`` for the manifest entry, when the lock describes the checkout the build was made
    from exactly (install-only boards find the build by them); else nothing, and the reason is said."""
    from ...lockfile import read_lock
    from .pins import checkout_differs, pins_key

    lock = read_lock(ctx.workspace.lock_file)
    found, why = pins_key(ctx.recipe, lock)
    why = why or checkout_differs(lock, components) or ""
    if found is None or why:
        ctx.ui.info(f"published without a pins key ({why}): install-only boards will not find this build")
        return {}
    return {"pins_key": found.key, "pins": found.document}


def publish_folder(text: str) -> Path:
    """The folder ``--publish`` names; a server URL is a usage error (uploading is not supported)."""
    location = wh.parse_location(text, "--publish")
    if location.folder is None:
        raise UsageError(f"--publish {text}: publishing needs a folder (or file://); uploading to a server is not "
                         "supported", fix="publish into the folder your HTTP server or object store serves; the "
                         "other machines then use --wheelhouse http://...")
    return location.folder


def _tool_version() -> str:
    from ... import __version__

    return __version__
