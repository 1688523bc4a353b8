"""`bundle import`: a verified bundle seeded into this machine, so that every stage works ``--offline``.

Each step runs only once the one before it succeeded, so a damaged or wrong bundle changes nothing:

1. the whole file is verified (``read_bundle``: BundleDamaged, exit 4) and its origin judged by this
   machine's trust policy (``trust``: a signature against trusted keys, an expected digest; BundleUntrusted,
   exit 4) — the signature before any member is read;
2. it must be made for this workspace: recipe, stack, variant, architecture, Python (``fit``:
   BundleMismatch, exit 2);
3. what this machine lacks is found; an incremental bundle's left-out members must be here already
   (BundleIncomplete, exit 4);
4. what is lacking (and the locks) is extracted into a partial folder of ours, hashed again as written;
   a bundled lock that disagrees with the workspace's stops here (BundleMismatch, unless ``update_lock``);
   and the git members must carry every commit the bundle's locks pin (``pins``: BundleDamaged, exit 4);
5. then the seeding, git first: bare git mirrors (whole-history `git bundle`s of older bundles, or shallow ones
   of the pinned commits) in ``<workdir>/.flagtree-cpu/bundle/git`` (sync's git cache from then on), artifacts
   into the download cache (found by ``fetch --offline`` through the lock's sha256 and the URL note), wheels into
   ``<workdir>/.flagtree-cpu/wheelhouse`` (pip's only source with --offline), and each recipe's lock where that
   recipe keeps it. A for-wheelhouse bundle (``published``) carries published builds instead of git and artifacts:
   they are checked against its lock and this board (pins key, target class) in step 4, laid out as a wheelhouse in
   ``<workdir>/.flagtree-cpu/fleet-wheelhouse`` and recorded, so the workspace asks it (``wheelhouse.configured``).

Importing the same bundle again finds nothing lacking, extracts nothing and says so.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..artifact_cache import ArtifactCache, url_key
from ..digest import hash_file
from ..errors import FlagtreeCpuError
from ..gitcache import GitCache, bundle_git_cache
from ..gitcmd import has_commit
from ..gitops import clone_bundle_mirror, fetch_bundle
from ..invocation import elsewhere
from ..lockfile import read_lock, write_lock
from ..partials import PartialFolder, sweep
from ..pythonenv import wheelhouse_dir
from ..stagekit.stage import Action, StageContext, StageResult
from ..ui import UI
from ..wheelhouse import IMPORTED_RECORD, DamagedManifest, imported_folder, read_local_manifest
from ..workspace import user_cache_dir
from .archive import extract_members, read_bundle
from .errors import BundleDamaged, BundleIncomplete, BundleMismatch
from .fit import check_made_for, stack_of
from .manifest import Manifest, Member
from .pins import PINS_FORM, check_pins_carried, form_of, seed_pins
from .placing import conflicts, move_into, written
from .published import check_fits_board, check_published, is_for_wheelhouse, lay_out, record_import
from .trust import Authenticity, Trust, authenticate, check_digest


@dataclass(frozen=True)
class ImportOptions:
    python: Path  # the target interpreter: its Python must be the bundle's
    cache_dir: Path | None = None  # the per-user cache root (--cache-dir); downloads live in <root>/downloads
    update_lock: bool = False  # a bundled lock replaces a different one in the workspace
    trust: Trust = Trust()  # the trusted keys and the expected digest (none: integrity only)


@dataclass
class _Item:
    """One member this machine lacks, and how it is put in place once extracted."""

    member: Member
    seed: Callable[[Path], Action]


def verified(path: Path, ui: UI, trust: Trust = Trust()) -> tuple[Manifest, Authenticity]:
    """The bundle's manifest after reading the whole file once (BundleDamaged when anything differs), and what
    ``trust`` proved of its origin (BundleUntrusted when the policy refuses it)."""
    from ..errors import UsageError

    if not path.is_file():
        raise UsageError(f"the bundle {path} " + ("is a folder, not a file" if path.is_dir() else "does not exist"),
                         fix=f"give the file `{elsewhere('bundle', 'create', '-o', 'FILE')}` wrote")
    size = path.stat().st_size
    verdicts: list[Authenticity] = []
    with ui.progress(f"verifying {path.name}", total=size, unit="bytes") as task:
        done = read_bundle(path, progress=lambda done, total: task.update(done, total),
                           on_head=lambda head: verdicts.append(authenticate(path, head, trust)),
                           file_sha256=trust.expect_sha256 is not None)
    return done.head.manifest, check_digest(path, verdicts[0], done.sha256)


def import_bundle(ctx: StageContext, path: Path, options: ImportOptions,
                  checked: tuple[Manifest, Authenticity] | None = None) -> StageResult:
    """Verify ``path`` (unless ``checked`` holds what ``verified`` said of it this run), check it is made for
    ``ctx``, and seed what this machine lacks (see the module)."""
    start = time.monotonic()
    manifest, authenticity = checked or verified(path, ctx.ui, options.trust)
    check_made_for(manifest, ctx, options.python, path)
    seeder = _Seeder(ctx, path, manifest, options)
    seeder.require_carried()
    items, locks, actions = seeder.lacking()
    if items or locks:
        actions += seeder.extract_and_seed(items, locks)
    data = {"bundle": str(path), "manifest_digest": manifest.digest, "made_for": manifest.made_for(),
            "git_cache": str(seeder.git_root), "download_cache": str(seeder.cache.root),
            "wheelhouse": str(seeder.wheelhouse), "authenticity": authenticity.to_json(),
            **({"fleet_wheelhouse": str(imported_folder(ctx.workspace.recipe_state))}
               if is_for_wheelhouse(manifest) else {})}
    summary = Action("bundle", "ok" if all(a.status == "ok" for a in actions) else "created",
                     f"{path.name}: {manifest.made_for()}", data)
    return StageResult("bundle import", (summary, *actions), seconds=time.monotonic() - start)


class _Seeder:
    def __init__(self, ctx: StageContext, path: Path, manifest: Manifest, options: ImportOptions):
        self.ctx, self.ui, self.ws = ctx, ctx.ui, ctx.workspace
        self.path, self.manifest, self.options = path, manifest, options
        self.git_root = bundle_git_cache(self.ws)
        self.mirrors = GitCache(self.git_root, self.ui)
        self.cache = ArtifactCache((options.cache_dir or user_cache_dir(os.environ)) / "downloads", self.ui)
        self.wheelhouse = wheelhouse_dir(self.ws)

    # -- what is here already ------------------------------------------------------------------------

    def _has(self, member: Member) -> bool:
        kind = member.kind
        if kind == "git":
            mirror = self.mirrors.mirror_path(_meta(member, "url"))
            return (mirror / "HEAD").is_file() and all(has_commit(mirror, c) for c in _commits(member))
        if kind == "artifact":
            return self.cache.blob(member.sha256) is not None and \
                self.cache.sha_seen_at(_meta(member, "url")) == member.sha256
        if kind == "wheel":
            wheel = self.wheelhouse / _file_name(member)
            return wheel.is_file() and wheel.stat().st_size == member.size and hash_file(wheel) == member.sha256
        if kind == "build":
            return self._has_build(member)
        return True  # locks are compared once read; recipes are not imported (the tool has them)

    def require_carried(self) -> None:
        """An incremental bundle leaves out what the bundle it was made --since had: this machine must have it."""
        absent = [m.name for m in self.manifest.members if m.carried_by_since and m.kind != "recipe"
                  and not (self._has(m) if m.kind != "lock" else self._lock_path(m).is_file())]
        if absent:
            since = (self.manifest.since or "")[:12]
            raise BundleIncomplete(
                f"{self.path} was made --since another bundle (manifest {since}) and leaves out {len(absent)} "
                "member(s) this machine does not have; nothing was imported", details=tuple(absent[:20]),
                fix="import the bundle it was made --since first (flagtree-cpu bundle import OLD_BUNDLE), then "
                "this one; or make a full bundle (bundle create without --since)")

    def lacking(self) -> tuple[list[_Item], list[Member], list[Action]]:
        """The present members this machine lacks (to extract and seed), the locks to compare with the
        workspace's (read once extracted), and what is here already (ok actions)."""
        items, locks, here = [], [], []
        seeds = {"git": self._seed_git, "artifact": self._seed_artifact, "wheel": self._seed_wheel,
                 "build": self._seed_build}
        for member in self.manifest.present():
            if member.kind == "recipe":
                continue
            if member.kind == "lock":
                path = self._lock_path(member)
                if path.is_file() and hash_file(path) == member.sha256:  # the very bytes: nothing to compare
                    here.append(Action(_subject(member), "ok", f"{path} is the bundle's"))
                else:
                    locks.append(member)
            elif self._has(member):
                here.append(Action(_subject(member), "ok", "already here"))
            else:
                items.append(_Item(member, _bound(seeds[member.kind], member)))
        return items, locks, here

    # -- extraction, then seeding ----------------------------------------------------------------------

    def extract_and_seed(self, items: list[_Item], locks: list[Member]) -> list[Action]:
        state = self.ws.state_dir / "bundle"
        sweep(state, self.ui.info, self.ui.warn)  # what a killed import left half extracted
        made_state = not state.exists()
        staging = PartialFolder.create(state / "incoming")
        try:
            names = [i.member.name for i in items] + [m.name for m in locks]
            total = sum(self.manifest.member(n).size for n in names)
            with staging.writing(), self.ui.progress(f"extracting {len(names)} members of {self.path.name}",
                                                     total=total, unit="bytes") as task:
                extracted = extract_members(self.path, self.manifest, names, staging.tree,
                                            progress=lambda done, _all: task.update(done, total))
            lock_steps = [self._plan_lock(m, extracted[m.name]) for m in locks]
            self._check_pins(extracted)
            # nothing was refused: seed, the git members first (a pack found wanting then stops the import
            # before anything reaches the download cache outside the workspace)
            actions = [item.seed(extracted[item.member.name])
                       for item in sorted(items, key=lambda i: i.member.kind != "git")]
            actions += [step() for step in lock_steps]
            if is_for_wheelhouse(self.manifest):  # every build laid out: the workspace asks its wheelhouse now
                record_import(self.ws.recipe_state, self.path, self.manifest,
                              [m.name for m in self.manifest.of_kind("build")])
        except BaseException:
            if made_state:
                _discard_unseeded(self.git_root)
            raise
        finally:
            staging.remove()
            if made_state:
                with contextlib.suppress(OSError):
                    state.rmdir()  # a refused import leaves no trace (bundle/git is made only when seeded)
        return actions

    def _check_pins(self, extracted: dict[str, Path]) -> None:
        """Before anything is seeded: the git members carry every commit the bundle's locks pin; or, for a
        for-wheelhouse bundle, its builds were made from its lock, and are the ones this board would install."""
        locks = {}
        for member in self.manifest.of_kind("lock"):
            file = extracted.get(member.name) or self._lock_path(member)  # not extracted: the workspace's, same bytes
            lock = read_lock(file) if file.is_file() else None
            if lock is not None:
                locks[member.name] = lock
        if not is_for_wheelhouse(self.manifest):
            check_pins_carried(self.manifest, locks, self.path)
            return
        entries = check_published(self.manifest, locks, self.path)
        check_fits_board(self.ctx, self.options.python, entries, next(iter(locks.values())), self.path)

    def _seed_git(self, member: Member, bundle: Path) -> Action:
        url, commits = _meta(member, "url"), _commits(member)
        pins = form_of(member) == PINS_FORM
        with self.mirrors.locked(url) as mirror, self.ui.progress(f"seeding the git mirror of {url}"):
            if (mirror / "HEAD").is_file():
                if pins:
                    seed_pins(bundle, mirror, url, commits, member.name, new=False)
                else:
                    fetch_bundle(mirror, bundle)
                status = "updated"
            else:
                self.mirrors.create(url, (lambda tree: seed_pins(bundle, tree, url, commits, member.name, new=True))
                                    if pins else (lambda tree: _mirror_of_bundle(bundle, tree, url, member)))
                status = "created"
            missing = [c for c in commits if not has_commit(mirror, c)]
        if missing:
            raise BundleDamaged(f"{member.name} does not hold commit {missing[0]} of {url} that the bundle's "
                                "manifest lists", details=tuple(missing),
                                fix=f"make the bundle again ({elsewhere('bundle', 'create')}); what was imported "
                                "so far is kept")
        return Action(_subject(member), status, f"{_count(len(commits), 'pinned commit')} in {mirror.name}",
                      {"mirror": str(mirror), "url": url, "commits": commits})

    def _seed_artifact(self, member: Member, file: Path) -> Action:
        url, sha = _meta(member, "url"), member.sha256
        served_from = f"bundle {self.path}"
        with self.cache.locked(url_key(url)):
            if self.cache.blob(sha) is not None:  # the bytes are here (another URL, or a note was lost)
                self.cache.mend_notes(sha, url, served_from)
                return Action(_subject(member), "updated", f"{sha[:12]} was in the download cache; its URL noted")
            if file.stat().st_dev == self.cache.root.stat().st_dev:
                self.cache.add(file, sha, url, served_from)
            else:  # another file system: copied into a folder of the cache first, then renamed into place
                _digests, holder, copy = self.cache.import_file(file)
                try:
                    self.cache.add(copy, sha, url, served_from)
                finally:
                    holder.remove()
        return Action(_subject(member), "created", f"{sha[:12]} into the download cache",
                      {"sha256": sha, "url": url})

    def _has_build(self, member: Member) -> bool:
        folder = imported_folder(self.ws.recipe_state)
        try:
            listed = read_local_manifest(folder)
        except DamagedManifest:
            return False
        return (self.ws.recipe_state / IMPORTED_RECORD).is_file() and any(
            w["sha256"] == member.sha256 and (folder / w["file"]).is_file() and hash_file(folder / w["file"])
            == member.sha256 for w in listed)

    def _seed_build(self, member: Member, file: Path) -> Action:
        folder = imported_folder(self.ws.recipe_state)
        done = lay_out(folder, member.meta["entry"], file, self.ui.info)  # the entry: checked by _check_pins
        return Action(_subject(member), "created" if done.status != "already published" else "ok",
                      f"{done.status} in the workspace's wheelhouse {folder}", {"path": str(done.file)})

    def _seed_wheel(self, member: Member, file: Path) -> Action:
        dest = self.wheelhouse / _file_name(member)
        status = "updated" if dest.exists() else "created"
        move_into(file, dest)
        return Action(_subject(member), status, "into the wheelhouse", {"path": str(dest)})

    # -- locks ---------------------------------------------------------------------------------------------

    def _lock_path(self, member: Member) -> Path:
        recipe = str(member.meta.get("recipe") or Path(member.name).stem)
        paths = {c.recipe.name: c.workspace.lock_file for c in stack_of(self.ctx)}
        if recipe not in paths:
            raise BundleDamaged(f"{member.name} is the lock of recipe {recipe!r}, which is not in the bundle's stack "
                                f"({', '.join(paths)})")
        return paths[recipe]

    def _plan_lock(self, member: Member, file: Path) -> Callable[[], Action]:
        """Compare the bundled lock with the workspace's (before anything is seeded); the step that writes it."""
        path, subject = self._lock_path(member), _subject(member)
        try:
            bundled = read_lock(file)
        except FlagtreeCpuError as exc:
            raise BundleDamaged(f"{member.name} in {self.path} is not a lock flagtree-cpu can read: "
                                f"{exc.message}") from None
        assert bundled is not None
        existing = read_lock(path)  # a damaged lock in the workspace is named as always (UsageError)
        if existing is None:
            return lambda: written(path, file.read_text(), subject, "created", "written")
        differing = conflicts(existing, bundled)
        if differing and not self.options.update_lock:
            raise BundleMismatch(
                f"the lock in {self.path} disagrees with this workspace's {path}; nothing was imported",
                details=tuple(differing),
                fix="import with --update-lock to replace the workspace's lock with the bundle's (the checkouts move "
                "to the bundle's commits at the next sync), or make the bundle from this lock: copy it to the "
                "connected machine and run bundle create with --lock-file")
        if differing:
            return lambda: written(path, file.read_text(), subject, "updated", "replaced (--update-lock)")
        # entries both hold agree on their pins (a disagreement was refused above): the workspace's stay as they
        # are (where the bytes were served from is its own history), only what it lacks is added
        merged = replace(existing, sources={**bundled.sources, **existing.sources},
                         artifacts={**bundled.artifacts, **existing.artifacts})
        if merged == existing:
            return lambda: Action(subject, "ok", f"{path} agrees")

        def merge() -> Action:
            write_lock(path, merged)
            return Action(subject, "updated", f"{path}: the bundle's entries added", {"path": str(path)})

        return merge


def _mirror_of_bundle(bundle: Path, tree: Path, url: str, member: Member) -> None:
    """A git-cache mirror of ``url`` made from the git bundle ``bundle`` (in the half-made folder ``tree``), holding
    every commit the manifest lists for it."""
    clone_bundle_mirror(bundle, tree, url)
    missing = [c for c in _commits(member) if not has_commit(tree, c)]
    if missing:
        raise BundleDamaged(f"{member.name} does not hold commit {missing[0]} of {url} that the bundle's manifest "
                            "lists", details=tuple(missing),
                            fix=f"make the bundle again ({elsewhere('bundle', 'create')})")


def _discard_unseeded(git_root: Path) -> None:
    """The git cache folder a refused first import made, when it holds no mirror: only the mirrors' lock files."""
    if not git_root.is_dir() or any(p.suffix != ".lock" for p in git_root.iterdir()):
        return
    for lock in git_root.iterdir():
        lock.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        git_root.rmdir()


def _bound(seed: Callable[[Member, Path], Action], member: Member) -> Callable[[Path], Action]:
    return lambda file: seed(member, file)


def _meta(member: Member, key: str) -> str:
    value = member.meta.get(key)
    if not isinstance(value, str) or not value:
        raise BundleDamaged(f"the bundle's manifest lists {member.name} without its {key!r}")
    return value


def _commits(member: Member) -> list[str]:
    commits = member.meta.get("commits", [])
    if not isinstance(commits, list) or not all(isinstance(c, str) for c in commits):
        raise BundleDamaged(f"the bundle's manifest lists {member.name} with commits that are not a list of ids")
    return commits


def _file_name(member: Member) -> str:
    return member.name.partition("/")[2]  # the manifest allows one plain file name after the kind's folder


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _subject(member: Member) -> str:
    if member.kind == "artifact":
        return f"artifact {member.meta.get('name') or member.name.partition('/')[2][:12]}"
    return f"{member.kind} {Path(_file_name(member)).name}"
