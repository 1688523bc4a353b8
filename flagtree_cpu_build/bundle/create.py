"""`bundle create`: everything a machine without network needs for a recipe stack, in one verified file.

The recipe is resolved for the TARGET (``--sysroot``: a board's snapshot; else ``--platform``: a wheel tag's
arch and glibc; else this machine), so artifact variants and wheel platforms are the board's. Then, per part:

- git: the stack synced as `sync` does (pins, lock) through a git cache of its own; one pack of the pinned
  commits (no history) per repository (``bundle.sources``, ``bundle.pins``);
- artifacts: each by its digest, from the download cache, downloaded into it when missing (verified like
  fetch, never unpacked here); a digest learned now is recorded in the lock as fetch would;
- wheels: ``pip download`` for the target's platforms and Python (``bundle.wheelhouse``);
- the locks and the recipe files of every recipe of the stack.

``--for-wheelhouse`` (``published``): instead of git and artifacts, the wheelhouse's published build of the lock's
pins that fits the target; and only the run-time wheels (``python.runtime``): a board that installs needs no build
tools. Nothing is synced.

``--since OLD`` verifies OLD and leaves out the git, artifact and wheel members it already holds (same name,
same sha256); locks and recipes are always written (they say what to set up). ``--sign KEY`` signs the manifest
(which lists every member's sha256) with an SSH key (``signature``): the key is checked before any work, and the
signature made before the first byte of the bundle is written. The bundle is written atomically, and hashed as
it is (the sha256 to carry to the board: ``--expect-digest``); the staging folder (git bundles, wheels) is removed
whatever happens.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import halfmade
from ..errors import UsageError
from .archive import seal, verify_bundle, write
from .manifest import MANIFEST_NAME, MEMBER_KINDS, Manifest, Member, member_name
from .signature import Signature, SigningKey, sign, signing_key

if TYPE_CHECKING:
    from ..context import ContextRequest
    from ..host import HostFacts
    from ..mirrors import MirrorRule
    from ..stagekit.stage import StageContext
    from ..ui import UI

CARRIED_KINDS = ("git", "artifact", "wheel", "build")  # what --since may leave out (locks and recipes are always there)


@dataclass(frozen=True)
class CreateOptions:
    output: Path
    target_python: str | None = None  # "3.12"; None: the workspace interpreter's (this machine only)
    platforms: tuple[str, ...] = ()  # wheel platform tags of the target
    sysroot: Path | None = None  # the target's `doctor --snapshot` (tarball or folder)
    since: Path | None = None  # an older bundle: what it holds is left out
    cache_dir: Path | None = None  # the per-user cache root (downloads in <root>/downloads)
    mirrors: tuple[MirrorRule, ...] = ()
    sign: Path | None = None  # an SSH private key: the manifest is signed with it
    for_wheelhouse: bool = False  # a published build instead of sources and artifacts (``published``)
    wheelhouse: str | None = None  # where to take it from (--wheelhouse; else the env, the recipe)


@dataclass(frozen=True)
class PartSize:
    kind: str
    count: int
    size: int
    omitted: int = 0
    omitted_size: int = 0


@dataclass(frozen=True)
class BundleCreated:
    path: Path
    size: int  # bytes of the bundle file
    manifest: Manifest
    seconds: float
    warnings: tuple[str, ...] = ()
    since: Path | None = None  # the bundle it is incremental to
    sha256: str = ""  # of the bundle file, as sha256sum prints it
    signature: Signature | None = None

    def parts(self) -> list[PartSize]:
        found = []
        for kind in MEMBER_KINDS:
            members = self.manifest.of_kind(kind)  # type: ignore[arg-type]
            if not members:
                continue
            kept = [m for m in members if not m.carried_by_since]
            left = [m for m in members if m.carried_by_since]
            found.append(PartSize(kind, len(kept), sum(m.size for m in kept), len(left), sum(m.size for m in left)))
        return found

    @property
    def content_size(self) -> int:
        return sum(p.size for p in self.parts())

    @property
    def omitted(self) -> int:
        return sum(p.omitted for p in self.parts())

    @property
    def omitted_size(self) -> int:
        return sum(p.omitted_size for p in self.parts())

    def to_json(self) -> dict[str, Any]:
        parts = self.parts()
        return {"bundle": str(self.path), "size": self.size, "manifest_digest": self.manifest.digest,
                "members": {p.kind: p.count for p in parts}, "sizes": {p.kind: p.size for p in parts},
                "since": self.manifest.since, "omitted": {p.kind: p.omitted for p in parts if p.omitted},
                "recipe": self.manifest.recipe, "stack": list(self.manifest.stack), "variant": self.manifest.variant,
                "target": self.manifest.target, "seconds": round(self.seconds, 3), "warnings": list(self.warnings),
                "sha256": self.sha256, "signed_by": None if self.signature is None else {
                    "key": self.signature.key.fingerprint, "type": self.signature.key.keytype}}


@dataclass
class _Draft:
    """The members found so far and the file behind each."""

    members: list[Member] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, kind: Any, file_name: str, path: Path, meta: dict[str, Any]) -> None:
        name = member_name(kind, file_name)
        if name not in self.files:  # two recipes of a stack may share an artifact or a wheel
            self.members.append(Member(name=name, kind=kind, meta=meta))
            self.files[name] = path


def create_bundle(request: ContextRequest, ui: UI, options: CreateOptions,
                  hold: Callable[[StageContext], AbstractContextManager[Any]]) -> BundleCreated:
    """Make the bundle ``options.output`` for the recipe ``request`` names, resolved for the target; ``hold``
    keeps the workspace for the whole run (the CLI's exclusive use)."""
    start = time.monotonic()
    output = options.output
    _check_output(output)
    key = signing_key(options.sign) if options.sign is not None else None  # a key that cannot sign: before any work
    with _target_context(request, ui, options) as (ctx, target):
        with hold(ctx):
            old = _read_since(options.since, ctx, target, ui)
            staging = ctx.workspace.state_dir / "bundle-create"
            staging.mkdir(parents=True, exist_ok=True)
            for left in staging.glob("staging-*"):  # a killed run's (the workspace is ours): git bundles, wheels
                halfmade.discard(left)
            scratch = Path(tempfile.mkdtemp(prefix="staging-", dir=staging))
            try:
                manifest, files, warnings = _collect(ctx, target, options, scratch, old)
                signer = None if key is None else _signer(key, manifest)
                with ui.progress("writing the bundle", unit="bytes") as task:
                    written = write(output, manifest, files, progress=task.update, signer=signer)
            finally:
                halfmade.discard(scratch)
    return BundleCreated(output, output.stat().st_size, written.manifest, time.monotonic() - start, tuple(warnings),
                         options.since, written.sha256, written.signature)


def _signer(key: SigningKey, manifest: Manifest) -> Callable[[bytes], Signature]:
    """The signature of the sealed manifest, made now — before the progress display starts, since ssh-keygen may
    ask for the key's passphrase on the terminal — for ``write`` to put in the bundle."""
    head = manifest.to_bytes()
    made = sign(key, head)
    return lambda written: made if written == head else sign(key, written)


def _collect(ctx: StageContext, target: dict[str, Any], options: CreateOptions, scratch: Path,
             old: Manifest | None) -> tuple[Manifest, dict[str, Path], list[str]]:
    """Every part of the bundle, sealed (hashed); with ``old``, its members marked as carried."""
    ui, draft = ctx.ui, _Draft()
    if options.for_wheelhouse:  # the published build, the lock and recipe, the run-time wheels: no git, no LLVM
        stack = _add_published(ctx, target, options, scratch, draft)
    else:
        stack = _add_sources_and_artifacts(ctx, options, scratch, draft)
    with ui.group("bundle: wheels"):
        _add_wheels(draft, stack, target, scratch / "wheels", runtime_only=options.for_wheelhouse)
    for layer in stack:  # after the artifacts: their digests are in the locks now
        recipe = layer.recipe
        draft.add("lock", f"{recipe.name}.yaml", layer.workspace.lock_file, {"recipe": recipe.name})
        draft.add("recipe", f"{recipe.name}.yaml", Path(recipe.file), {"recipe": recipe.name, "file": recipe.file,
                                                                         "digest": recipe.digest})
    top = ctx.recipe
    manifest = Manifest.draft(recipe=top.name, stack=[c.recipe.name for c in stack], variant=top.variant,
                              target=target, members=draft.members)
    with ui.progress("hashing the members", unit="bytes") as task:
        manifest = seal(manifest, draft.files, progress=task.update)
    if old is not None:
        manifest, files = _leave_out(manifest, draft.files, old)
        return manifest, files, draft.warnings
    return manifest, draft.files, draft.warnings


def _add_sources_and_artifacts(ctx: StageContext, options: CreateOptions, scratch: Path,
                               draft: _Draft) -> list[StageContext]:
    """The git members (the stack synced, one pack of pinned commits per repository) and the artifacts; the stack
    as the artifacts saw it."""
    from .artifacts import collect_artifacts
    from .pins import pins_meta
    from .sources import bundle_cache, bundle_mirrors, sync_stack

    ui, stack = ctx.ui, _stack(ctx)
    with ui.group("bundle: sources"):
        ui.info(f"sources: syncing {' + '.join(c.recipe.name for c in stack)} through {bundle_cache(stack)}")
        for result in sync_stack(stack, bundle_cache(stack)):
            draft.warnings += result.warnings
            ui.info("sources: " + ", ".join(f"{a.subject} {a.detail}" for a in result.actions
                                            if not a.data.get("check")))
        for git in bundle_mirrors(stack, bundle_cache(stack), scratch / "git"):
            draft.add("git", f"{git.mirror}.pack", git.path, pins_meta(git.url, git.mirror, git.commits))
    if ctx.reopen is not None and any(a.read_names for layer in stack for a in layer.recipe.artifacts.values()):
        stack = _stack(ctx.reopen())  # the values artifacts read from the sources' files, now checked out
    with ui.group("bundle: artifacts"):
        for artifact in collect_artifacts(stack, options.cache_dir, options.mirrors):
            draft.add("artifact", artifact.sha256, artifact.path, artifact.meta)
            draft.warnings += artifact.warnings
    return stack


def _add_published(ctx: StageContext, target: dict[str, Any], options: CreateOptions, scratch: Path,
                   draft: _Draft) -> list[StageContext]:
    """--for-wheelhouse: the published build of the lock's pins for the target (``published``)."""
    from .published import fetch_published

    with ctx.ui.group("bundle: published build"):
        wheel, meta = fetch_published(ctx, options.wheelhouse, target, scratch / "builds")
        draft.add("build", wheel.name, wheel, meta)
        ctx.ui.info(f"published build: {wheel.name} from {meta['wheelhouse']}")
    return [ctx]


def _add_wheels(draft: _Draft, stack: list[StageContext], target: dict[str, Any], dest: Path, *,
                runtime_only: bool = False) -> None:
    from ..pip_constraints import constraints_file
    from ..pythonenv import refuse_conflicts
    from .wheelhouse import WheelTarget, download_wheelhouse, is_sdist, requirement_groups

    recipes = [c.recipe for c in stack]
    for recipe in recipes:  # a requirement no version can meet with a constraint: refused before pip (exit 2)
        refuse_conflicts(recipe, [*recipe.python.build, *recipe.python.runtime])
    groups = requirement_groups(recipes, runtime_only=runtime_only)  # an installed build needs no build tools
    if not groups:
        return
    top = stack[-1]
    # the top recipe's constraints hold its bases' too (context: own_constraints of each layer)
    constraints = constraints_file(top.recipe, top.workspace)
    house = download_wheelhouse(groups, WheelTarget(tuple(target["platforms"]), target["python"]), dest,
                                constraints=constraints, ui=top.ui, logs_dir=top.workspace.logs_dir,
                                cwd=top.workspace.root)
    for path in house.files:
        draft.add("wheel", path.name, path, {"file": path.name, "sdist": is_sdist(path.name)})
    draft.warnings += house.warnings


def _leave_out(manifest: Manifest, files: dict[str, Path], old: Manifest) -> tuple[Manifest, dict[str, Path]]:
    """``manifest`` incremental to ``old``: its git, artifact and wheel members that ``old`` holds with the same
    bytes are carried (listed, not written)."""
    held = {(m.name, m.sha256) for m in old.members}
    members = tuple(replace(m, carried_by_since=True) if m.kind in CARRIED_KINDS and (m.name, m.sha256) in held
                    else m for m in manifest.members)
    carried = replace(manifest, members=members, since=old.digest).with_digest()
    return carried, {m.name: files[m.name] for m in carried.present()}


# --- the target ------------------------------------------------------------------------------------------------


@contextmanager
def _target_context(request: ContextRequest, ui: UI,
                    options: CreateOptions) -> Iterator[tuple[StageContext, dict[str, Any]]]:
    """The context resolved for the target machine, and the manifest's ``target``."""
    from ..context import open_context
    from ..snapshot import open_sysroot
    from .wheelhouse import parse_platform, platform_tags

    given = [parse_platform(tag) for tag in options.platforms]
    arches = sorted({arch for arch, _ in given})
    if len(arches) > 1:
        raise UsageError(f"--platform tags of {len(arches)} architectures ({', '.join(arches)}): a bundle is for "
                         "one machine", fix="give the tags of one architecture (e.g. manylinux_2_28_aarch64)")
    if options.sysroot is not None:
        with open_sysroot(options.sysroot) as board:
            ctx = open_context(replace(request, sysroot=board.root), ui)
            _same_arch(ctx.host, arches, f"--sysroot {options.sysroot}")
            yield ctx, _target(ctx, request, options, platform_tags(ctx.host.arch, ctx.host.glibc, options.platforms),
                               this_machine=False)
        return
    if given:
        glibc = max((g for _, g in given if g), key=lambda g: tuple(map(int, g.split("."))), default=None)
        ctx = _open_on(request, ui, arches[0], glibc)
        yield ctx, _target(ctx, request, options, platform_tags(arches[0], glibc, options.platforms),
                           this_machine=False)
        return
    ctx = open_context(request, ui)
    yield ctx, _target(ctx, request, options, platform_tags(ctx.host.arch, ctx.host.glibc), this_machine=True)


def _same_arch(host: HostFacts, arches: list[str], what: str) -> None:
    if arches and arches != [host.arch]:
        raise UsageError(f"{what} is an {host.arch} machine, but --platform names {arches[0]}",
                         fix="drop --platform (the snapshot says the platform), or give tags of its architecture")


def _open_on(request: ContextRequest, ui: UI, arch: str, glibc: str | None) -> StageContext:
    """The context for a machine known only by a wheel tag: this machine's facts with that arch and glibc, and
    no OS (artifact variants that select on an OS take their default; --sysroot says the OS too)."""
    from ..context import open_context
    from ..host import read_host

    host = replace(read_host(request.sysroot), arch=arch, glibc=glibc, os_id="", os_version_id="", os_pretty_name="")
    return open_context(replace(request, host=host), ui)


def _target(ctx: StageContext, request: ContextRequest, options: CreateOptions, platforms: tuple[str, ...], *,
            this_machine: bool) -> dict[str, Any]:
    python = options.target_python or (_local_python(ctx, request) if this_machine else None)
    if python is None:
        raise UsageError("which Python does the target run? --platform and --sysroot describe another machine, "
                         "and its wheels depend on the Python version",
                         fix="add --target-python 3.X (what `python3 --version` says on the target)")
    if not re.fullmatch(r"3\.\d{1,2}", python):
        raise UsageError(f"--target-python {python}: give the major and minor version, e.g. 3.12")
    from packaging.specifiers import SpecifierSet

    for layer in _stack(ctx):
        requires = layer.recipe.python.requires
        if requires and not SpecifierSet(requires).contains(python, prereleases=True):
            raise UsageError(f"recipe {layer.recipe.name} needs Python {requires}; the target's is {python}",
                             fix="give the target's Python with --target-python, or a recipe for it")
    host = ctx.host
    if host.glibc is None and not options.platforms:
        ctx.ui.warn(f"the target's glibc is unknown: its wheels are taken for {platforms[0]} and older; pass "
                    "--platform with its manylinux tag (what `pip debug --verbose` lists there) to take newer ones")
    return {"arch": host.arch, "platforms": list(platforms), "python": python, "os_id": host.os_id,
            "glibc": host.glibc}


def _local_python(ctx: StageContext, request: ContextRequest) -> str:
    """major.minor of the interpreter setup would use here (the workspace venv when it exists), else this one."""
    from ..context import chosen_python
    from ..pythonenv import query

    python = chosen_python(request, ctx.workspace)
    if python.exists():
        return ".".join(query(python, [])[0].split(".")[:2])
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _stack(ctx: StageContext) -> list[StageContext]:
    """The contexts of the stack, the bottom recipe first."""
    return [*(_stack(ctx.base) if ctx.base is not None else ()), ctx]


# --- the files ---------------------------------------------------------------------------------------------------


def _check_output(output: Path) -> None:
    """Before any work: the bundle can be written there, and replaces nothing but an older bundle."""
    if output.is_dir():
        raise UsageError(f"-o {output} is a folder; the bundle is a file", fix=f"name a file: -o {output}/NAME.bundle")
    if not output.parent.is_dir():
        raise UsageError(f"cannot write the bundle {output}: the folder {output.parent} does not exist",
                         fix=f"make it first (mkdir -p {output.parent}) or name another file")
    if output.exists() and not _is_bundle(output):
        raise UsageError(f"{output} exists and is not a flagtree-cpu bundle; it is left alone",
                         fix="name another file with -o, or move that one away")


def _is_bundle(path: Path) -> bool:
    """Whether ``path`` starts like a bundle (a tar whose first member is the manifest)."""
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError:
        return False
    return head.split(b"\0", 1)[0] == MANIFEST_NAME.encode()


def _read_since(since: Path | None, ctx: StageContext, target: dict[str, Any], ui: UI) -> Manifest | None:
    """The manifest of the --since bundle, verified, and made for the same recipe stack and machine."""
    if since is None:
        return None
    with ui.progress(f"verifying {since.name}", unit="bytes") as task:
        old = verify_bundle(since, progress=task.update)
    stack = tuple(c.recipe.name for c in _stack(ctx))
    now = (stack, ctx.recipe.variant, target["arch"], target["python"])
    then = (old.stack, old.variant, old.target.get("arch"), old.target.get("python"))
    if now != then:
        raise UsageError(f"--since {since} was made for {old.made_for()} (stack {' + '.join(old.stack)}); this "
                         f"bundle is for {' + '.join(stack)}, {target['arch']}, Python {target['python']}",
                         fix="give --since a bundle made for the same recipe, machine and Python, or leave it out")
    return old
