"""For-wheelhouse bundles: a published build instead of the sources and artifacts, for boards that only install.

`bundle create --for-wheelhouse` asks the wheelhouse (``--wheelhouse``, ``$FLAGTREE_CPU_WHEELHOUSE``, the recipe's
``build.wheelhouse``) for the build of this workspace's lock pins (``stages/build/pins.py``: the pins key) whose
target class fits the TARGET (``--sysroot`` snapshot, ``--platform``, or this machine), as an install-only board
would ask it; the wheel is downloaded through the verified path (its sha256 and size must be the entry's) and
becomes a ``build`` member whose meta carries the whole manifest entry. No source is synced and nothing of LLVM is
read. Nothing fits: a located refusal naming the closest entry's differing pin, as `setup --dry-run` says it.

What a board trusts is checked (``check_published``, at `bundle verify` and `bundle import`): each entry is read
as ``wheelhouse_manifest`` reads an entry (types, names: a ``file`` that leaves ``wheels/`` is refused), it names
its own member, its sha256 and size are the member's (which the archive reader hashes), its ``pins`` hash to its
``pins_key``, and the bundle's lock pins exactly what the entry's pins say. The import lays the builds out as
``wheelhouse.publish`` would (``layout``), and the workspace uses that folder from then on
(``wheelhouse.imported_wheelhouse``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import wheelhouse as wh
from ..errors import ArtifactError, UsageError
from ..invocation import elsewhere
from .errors import BundleDamaged, BundleMismatch
from .manifest import Manifest, Member

if TYPE_CHECKING:
    from ..lockfile import Lock
    from ..stagekit.stage import StageContext

_SHOWN = 4


def is_for_wheelhouse(manifest: Manifest) -> bool:
    return bool(manifest.of_kind("build"))


# --- bundle create ---------------------------------------------------------------------------------------------


def fetch_published(ctx: StageContext, option: str | None, target: dict[str, Any],
                    dest: Path) -> tuple[Path, dict[str, Any]]:
    """The wheel of the published build of this workspace's lock pins that fits ``target`` (the manifest's
    target), verified, in ``dest``; and the bundle member's meta."""
    from ..stages.build import install_only, prebuilt
    from ..stages.build.pins import pins_key

    recipe, ws, ui = ctx.recipe, ctx.workspace, ctx.ui
    if ctx.base is not None:
        raise UsageError(f"--for-wheelhouse: recipe {recipe.name} is stacked on {ctx.base.recipe.name}, whose build "
                         "a board makes itself; install-only boards take recipes without a base",
                         fix="make a full bundle (bundle create without --for-wheelhouse)")
    if recipe.build is None:
        raise UsageError(f"--for-wheelhouse: recipe {recipe.name} has no build, so no wheelhouse holds one",
                         fix="make a full bundle (bundle create without --for-wheelhouse)")
    chosen = wh.configured(option, os.environ, recipe.build.wheelhouse, wh.imported_wheelhouse(ws.recipe_state))
    if chosen is None:
        raise UsageError("--for-wheelhouse: no wheelhouse is configured to take the published build from",
                         fix=elsewhere("bundle", "create", "--for-wheelhouse", "--wheelhouse", "LOCATION", "-o",
                                       "FILE") + f" (or set ${wh.ENV_VAR}, or the recipe's build.wheelhouse)")
    location = wh.parse_location(*chosen)
    mine, why = pins_key(recipe, install_only.workspace_lock(ws))
    if mine is None:
        raise UsageError(f"--for-wheelhouse: the build is found by the lock's pins, and {why}",
                         fix=f"copy the publishing board's lock to {ws.lock_file}, or run flagtree-cpu lock")
    dest.mkdir(parents=True, exist_ok=True)
    wheels, unread = prebuilt.read_wheels(location, ui, dest)
    if wheels is None:
        raise ArtifactError(f"--for-wheelhouse: the wheelhouse {location.given} (from {chosen[1]}) cannot be used: "
                            f"{unread}", fix=f"check {location.given} is reachable from here and holds builds")
    here = _class_of(ctx, target)
    entry, why = install_only._choose(wheels, recipe.name, recipe.variant, mine, here)
    if entry is None:
        raise ArtifactError(f"--for-wheelhouse: the wheelhouse {location.given} has no build for this lock and the "
                            f"target ({here['arch']}, {here['python']}, glibc {here['glibc']}): {why}",
                            fix="publish one from a board with this lock (flagtree-cpu build --publish FOLDER), or "
                            "make a full bundle (bundle create without --for-wheelhouse)")
    return _download(ctx, location, entry, dest), {"entry": entry, "wheelhouse": location.given}


def _class_of(ctx: StageContext, target: dict[str, Any]) -> dict[str, Any]:
    """The target class of the board the bundle is for (its arch, glibc and Python: the bundle's target)."""
    spec = ctx.recipe.platform.target
    return wh.target_class(ctx.recipe.target_arch(str(target["arch"])), spec.cpu_features, spec.sve_vector_bits,
                           target.get("glibc"), str(target["python"]))


def _download(ctx: StageContext, location: wh.Location, entry: dict[str, Any], dest: Path) -> Path:
    from ..download import Downloader, discard_part

    name = str(entry["file"]).split("/")[-1]  # a bare wheel name: the manifest reader checked it
    part = dest / (name + ".part")
    try:
        got = Downloader(ctx.ui).fetch([location.url_of(entry["file"])], lambda url: part, label=name,
                                       expected={"sha256": entry["sha256"]}, max_bytes=entry["size"]).part
    except ArtifactError as err:
        discard_part(part)
        lying = any(" mismatch — expected " in d for d in err.details)
        raise ArtifactError(f"--for-wheelhouse: the wheelhouse's {name} " + (
            "is not the file its manifest lists: refused, nothing was bundled" if lying else
            f"could not be downloaded from {location.given}; nothing was bundled"), details=err.details,
            fix="publish it again from a build you trust (flagtree-cpu build --force --publish ...)" if lying
            else f"check {location.url_of(entry['file'])} is reachable, then run the same command again") from None
    final = dest / name
    os.replace(got, final)
    return final


# --- what a board trusts -----------------------------------------------------------------------------------


def check_published(manifest: Manifest, locks: dict[str, Lock], origin: Path) -> list[dict[str, Any]]:
    """The entries of the bundle's builds, each checked against its member and the bundle's one lock;
    BundleDamaged naming the member otherwise."""
    mixed = [m.name for m in manifest.members if m.kind in ("git", "artifact")]
    if mixed:  # what a for-wheelhouse bundle is checked for says nothing of sources or artifacts: not taken unchecked
        raise BundleDamaged(f"{origin} carries a published build and also {mixed[0]}"
                            + (f" and {len(mixed) - 1} more git or artifact members" if len(mixed) > 1 else "")
                            + "; `bundle create` makes one or the other, so nothing of it is used")
    if len(locks) != 1:
        raise BundleDamaged(f"{origin} carries a published build and {len(locks)} locks; a for-wheelhouse bundle "
                            "carries the one lock the build was made from")
    [(lock_name, lock)] = locks.items()
    entries = []
    for member in manifest.of_kind("build"):
        entry = _entry_of(member, origin)
        wrong = lock_differences(lock, entry["pins"])
        if wrong:
            raise BundleDamaged(f"{origin}: its lock ({lock_name}) pins other things than the build {member.name} "
                                "was made from; nothing of it is used", details=tuple(wrong[:20]))
        entries.append(entry)
    return entries


def _entry_of(member: Member, origin: Path) -> dict[str, Any]:
    from ..wheelhouse_manifest import entry_problems

    entry = member.meta.get("entry")
    problems = entry_problems(entry)
    if problems:
        raise BundleDamaged(f"{origin}: the wheelhouse entry of {member.name} is malformed: {problems[0]}",
                            details=tuple(problems[:20]))
    assert isinstance(entry, dict)
    own = member.name.partition("/")[2]
    if entry["file"] != f"wheels/{own}":
        raise BundleDamaged(f"{origin}: the wheelhouse entry of {member.name} names the file "
                            f"{wh.shown(entry['file'])}, not its own wheel {own}")
    if (entry["sha256"], entry["size"]) != (member.sha256, member.size):
        raise BundleDamaged(f"{origin}: {member.name} is not the wheel its wheelhouse entry lists (sha256 "
                            f"{member.sha256[:12]}, {member.size} bytes; the entry says {entry['sha256'][:12]}, "
                            f"{entry['size']} bytes); nothing of it is used")
    if "pins_key" not in entry or wh.digest_of(entry["pins"]) != entry["pins_key"]:
        raise BundleDamaged(f"{origin}: the wheelhouse entry of {member.name} has no pins key, or pins that do not "
                            "hash to it; an install-only board could not trust which lock it was built from")
    return entry


def lock_differences(lock: Lock, pins: dict[str, Any]) -> list[str]:
    """Where ``lock`` pins otherwise than a published build's pins document (each source, artifact, read and
    requirements file the document names), one line each; empty when it agrees."""
    found = []
    sources = pins.get("sources")
    for name, pin in (sources.items() if isinstance(sources, dict) else ()):
        entry = lock.sources.get(name)
        pin = pin if isinstance(pin, dict) else {}
        have = None if entry is None else {
            "commit": entry.commit, "submodules": {s.path: s.commit for s in entry.submodules},
            "patches": {p.file: p.sha256 for p in entry.patches}}
        for key in ("commit", "submodules", "patches"):
            if have is None or have[key] != pin.get(key):
                found.append(f"source {wh.shown(name)} {key}: the build's {_short(pin.get(key))}, the lock's "
                             f"{_short(None if have is None else have[key])}")
    artifacts = pins.get("artifacts")
    for name, sha256 in (artifacts.items() if isinstance(artifacts, dict) else ()):
        entry = lock.artifacts.get(name)
        have = entry.sha256.lower() if entry is not None and entry.sha256 else None
        if have != sha256:
            found.append(f"artifact {wh.shown(name)}: the build's {_short(sha256)}, the lock's {_short(have)}")
    reads = {k: r.value for k, r in sorted(lock.reads.items())}
    if pins.get("reads") != reads:
        found.append(f"reads: the build's {_short(pins.get('reads'))}, the lock's {_short(reads)}")
    files = {k: {"files": dict(sorted(r.files.items())), "requirements": list(r.requirements)}
             for k, r in sorted(lock.requirements_files.items())}
    if pins.get("requirements_files") != files:
        found.append("requirements_files: the build's and the lock's differ")
    return found


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) in (40, 64):
        return value[:12]
    return wh.shown(value, 60)


def check_fits_board(ctx: StageContext, python: Path, entries: list[dict[str, Any]], lock: Lock,
                     origin: Path) -> None:
    """At import: the bundle's build is the one this board's `setup` would take (its pins key under this
    workspace's recipe, its class this machine's); BundleMismatch naming what differs otherwise."""
    from ..stages.build.pins import pins_differences, pins_key
    from .fit import python_version

    mine, why = pins_key(ctx.recipe, lock)
    spec = ctx.recipe.platform.target
    here = wh.target_class(ctx.recipe.target_arch(ctx.host.arch), spec.cpu_features, spec.sve_vector_bits,
                           ctx.host.glibc, python_version(python)[0])
    found: list[str] = []
    for entry in entries:
        wrong = [why] if mine is None else [] if entry["pins_key"] == mine.key else \
            pins_differences(entry["pins"], mine.document)[:_SHOWN]
        wrong += wh.class_differences(entry["class"], here)
        if not wrong:
            return
        found += wrong
    raise BundleMismatch(f"{origin} carries a build this board would not install; nothing was imported",
                         details=tuple(found[:20]),
                         fix="make the bundle for this board (flagtree-cpu doctor --snapshot board.tar.gz here; "
                         "there: " + elsewhere("bundle", "create", "--for-wheelhouse", "--sysroot", "board.tar.gz",
                                               "-o", "FILE") + "), with this workspace's recipe settings")


# --- bundle import -----------------------------------------------------------------------------------------------


def lay_out(folder: Path, entry: dict[str, Any], wheel: Path, note: Callable[[str], None]) -> wh.Published:
    """The extracted (verified) ``wheel`` published into the workspace's wheelhouse ``folder`` under ``entry``, as
    `build --publish` lays a wheelhouse out (manifest, wheels/, simple/); the same build again changes nothing."""
    named = wheel.with_name(str(entry.get("original") or wheel.name))  # a bare name of the same wheel: checked
    os.replace(wheel, named)
    listed = {k: v for k, v in entry.items() if k not in ("file", "sha256", "size", "original")}
    return wh.publish(folder, named, {**listed, "wheel_sha256": entry["sha256"]}, wait_note=note)


def record_import(recipe_state: Path, origin: Path, manifest: Manifest, files: list[str]) -> None:
    """Turn the imported wheelhouse on for this workspace (``wheelhouse.imported_wheelhouse``), saying from where."""
    from datetime import datetime, timezone

    from ..state import write_state

    write_state(recipe_state / wh.IMPORTED_RECORD, {
        "bundle": str(origin), "manifest_digest": manifest.digest, "made_for": manifest.made_for(),
        "imported": datetime.now(timezone.utc).isoformat(timespec="seconds"), "wheels": files})
