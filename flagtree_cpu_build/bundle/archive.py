"""A bundle on disk: an uncompressed tar (its members already are compressed), the manifest first, then
every member the manifest lists; read once, front to back, holding one chunk and the manifest in memory.

``write_bundle`` is atomic (a temporary beside the destination, renamed when whole). ``verify_bundle``
reads the file once, extracting nothing, and refuses with the member's name and the fix every way a copied
or hostile bundle can differ from what its maker wrote. ``extract_members`` hashes again while it writes,
so a file changed between the verification and the extraction is refused too.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import IO

from ..atomic import open_atomic
from ..digest import CHUNK, Hasher, hash_file
from ..diskspace import disk_full, is_disk_full
from ..errors import ArtifactError, UsageError
from .errors import BundleDamaged, BundleIncomplete
from .manifest import MANIFEST_NAME, Manifest, Member, name_problem

MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # a manifest of 100,000 members is ~30 MB
# tarfile reads a pax or GNU long-name header whole into memory: no single read of ours may exceed this
MAX_READ = MAX_MANIFEST_BYTES + 1024 * 1024

Progress = Callable[[int, int | None], None]  # (bytes done, bytes in all): e.g. a ui.progress task's update


def seal(draft: Manifest, files: Mapping[str, Path], *, progress: Progress | None = None) -> Manifest:
    """``draft`` with every present member's size and sha256 read from its file in ``files`` (name -> path),
    and the manifest's digest. Members ``carried_by_since`` are not in ``files`` and keep the size and sha256
    they have (the --since bundle's). A member without a file, or a file without a member: ValueError."""
    _check_files(draft, files)
    total = sum(files[m.name].stat().st_size for m in draft.present())
    done = 0
    members = []
    for m in draft.members:
        if not m.carried_by_since:
            m = replace(m, size=files[m.name].stat().st_size, sha256=hash_file(files[m.name]))
            done += m.size
            if progress:
                progress(done, total)
        members.append(m)
    return replace(draft, members=tuple(members)).with_digest()


def write_bundle(dest: Path, manifest: Manifest, files: Mapping[str, Path], *,
                 progress: Progress | None = None) -> Manifest:
    """Write the bundle ``dest``: ``manifest`` first, then each present member's file from ``files``.

    A draft (no digest) is ``seal``-ed first, ``progress`` counting both readings. Each file is hashed again as
    it is copied: one changed since it was sealed is refused (ArtifactError naming it). ``dest`` appears whole
    or not at all (no temporary left, Ctrl-C included); a full disk is ``diskspace.DiskFull`` naming ``dest``.
    Returns the manifest written."""
    sealing = not manifest.digest
    if sealing:
        manifest = seal(manifest, files, progress=progress and (lambda done, total: progress(done, 2 * (total or 0))))
    elif manifest.compute_digest() != manifest.digest:
        raise ValueError("the manifest was changed after it was sealed: seal it again")
    _check_files(manifest, files)
    head = manifest.to_bytes()
    if len(head) > MAX_MANIFEST_BYTES:  # a reader would refuse it: do not write what cannot be read
        raise ValueError(f"the manifest is {len(head)} bytes, more than a bundle's manifest may be")
    if dest.is_dir():
        raise UsageError(f"{dest} is a folder; the bundle is a file", fix="name a file: -o FOLDER/NAME.bundle")
    if not dest.parent.is_dir():
        raise UsageError(f"cannot write the bundle {dest}: the folder {dest.parent} does not exist",
                         fix=f"make it first (mkdir -p {dest.parent}) or name another file")
    total = sum(m.size for m in manifest.present())
    try:
        # durable: a bundle is carried away on a stick, so it must be on the disk, whole
        with open_atomic(dest, durable=True) as out:
            with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
                mtime = _timestamp(manifest.created)
                tar.addfile(_info(MANIFEST_NAME, len(head), mtime), io.BytesIO(head))
                done = total if sealing else 0
                for m in manifest.present():
                    _add_member(tar, m, files[m.name], mtime)
                    done += m.size
                    if progress:
                        progress(done, 2 * total if sealing else total)
    except OSError as exc:
        if is_disk_full(exc):
            raise disk_full(dest, total + len(head), f"the bundle {dest.name}", None) from None
        raise
    return manifest


def verify_bundle(path: Path, *, progress: Progress | None = None) -> Manifest:
    """The manifest of the bundle ``path``, after reading the whole file once and finding every member
    exactly as the manifest says: the manifest first, whole and matching its own digest; each member a
    plain file with a safe name, listed, present once, of the listed size and sha256; none missing.
    Anything else is BundleDamaged naming the member and the fix. Nothing is written anywhere."""
    with _Entries(path, progress) as entries:
        manifest = entries.manifest
        expected = {m.name: m for m in manifest.present()}
        seen: set[str] = set()
        for tar, info in entries:
            member = _expected_member(path, manifest, expected, seen, info)
            _check_bytes(path, manifest, tar, info, member, None)
        _no_missing(path, manifest, seen, entries.last)
    return manifest


def extract_members(path: Path, manifest: Manifest, names: Iterable[str], dest: Path, *,
                    progress: Progress | None = None) -> dict[str, Path]:
    """Extract the members ``names`` of the verified bundle ``path`` into ``dest`` (made if missing), each at
    its archive name under it (``dest/artifacts/<sha256>``); returns name -> path.

    Each file is hashed as it is written and kept only when it matches ``manifest``: a bundle changed since
    it was verified is BundleDamaged. Each file appears whole (temporary + rename); on any failure the files
    this call wrote are removed. A member the bundle leaves to its --since bundle is BundleIncomplete."""
    wanted = {}
    for name in names:
        member = manifest.member(name)
        if member.carried_by_since:
            raise BundleIncomplete(f"{path} does not hold {name}: it was made --since another bundle, which has it",
                                   fix="import the bundle it was made --since first")
        if problem := name_problem(member.name, member.kind):  # a manifest made in code, not read and checked
            raise ValueError(f"member name {member.name!r} {problem}")
        wanted[name] = member
    if not wanted:
        return {}
    written: dict[str, Path] = {}
    try:
        with _Entries(path, progress) as entries:
            if entries.manifest.digest != manifest.digest:
                raise BundleDamaged(f"{path} was changed after it was verified: its manifest is another one",
                                    details=(f"verified {manifest.digest}", f"now {entries.manifest.digest}"))
            for tar, info in entries:
                member = wanted.get(info.name)
                if member is None or info.name in written or not info.isreg():
                    continue
                target = dest / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                _extract_one(path, manifest, tar, info, member, target)
                written[member.name] = target
                if len(written) == len(wanted):
                    break
        missing = [n for n in wanted if n not in written]
        if missing:
            raise BundleDamaged(f"{path} was changed after it was verified: member {missing[0]!r} is gone")
    except BaseException as exc:
        for target in written.values():
            with contextlib.suppress(OSError):
                target.unlink()
        if is_disk_full(exc):
            raise disk_full(dest, sum(m.size for m in wanted.values()), f"extracting {path.name}", None) from None
        raise
    return written


# --- writing ---------------------------------------------------------------------------------------------


def _check_files(manifest: Manifest, files: Mapping[str, Path]) -> None:
    present, given = {m.name for m in manifest.present()}, set(files)
    if present != given:
        raise ValueError(f"files and the manifest's present members differ: no file for {sorted(present - given)[:5]}"
                         f", not in the manifest (or carried) {sorted(given - present)[:5]}")


def _info(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    # the same bytes for the same files: no owner, fixed mode, the manifest's time
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _timestamp(created: str) -> int:
    with contextlib.suppress(ValueError):
        return int(datetime.fromisoformat(created).timestamp())
    return 0


def _add_member(tar: tarfile.TarFile, member: Member, path: Path, mtime: int) -> None:
    with open(path, "rb") as source:
        reader = _HashingReader(source)
        try:
            tar.addfile(_info(member.name, member.size, mtime), reader)
        except OSError:
            if os.fstat(source.fileno()).st_size < member.size:  # tarfile's "unexpected end of data"
                raise _changed(member, path, f"it is shorter than the {member.size} bytes sealed") from None
            raise
        if source.read(1):
            raise _changed(member, path, f"it is longer than the {member.size} bytes sealed")
    if reader.hasher.hexdigest() != member.sha256:
        raise _changed(member, path, f"its sha256 is {reader.hasher.hexdigest()}, sealed {member.sha256}")


def _changed(member: Member, path: Path, why: str) -> ArtifactError:
    return ArtifactError(f"{path} (bundle member {member.name}) changed while the bundle was written: {why}",
                         fix="make sure nothing else writes the caches, then make the bundle again")


class _HashingReader:
    """A file read through a sha256, as tarfile copies it into the archive."""

    def __init__(self, source: IO[bytes]):
        self.source, self.hasher = source, Hasher()

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.hasher.update(data)
        return data


# --- reading ---------------------------------------------------------------------------------------------


class _GuardedFile:
    """The bundle file as tarfile reads it: counted for progress, and no single read larger than MAX_READ
    (tarfile reads a pax or long-name header whole: a hostile one of gigabytes must not fill memory)."""

    def __init__(self, raw: IO[bytes], path: Path, size: int, progress: Progress | None):
        self.raw, self.path, self.size, self.progress = raw, path, size, progress
        self._told = 0

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > MAX_READ:
            raise BundleDamaged(f"{self.path} is not a bundle flagtree-cpu made: a tar header at byte "
                                f"{self.raw.tell()} is {size} bytes long (a hostile or damaged archive)")
        data = self.raw.read(size)
        done = self.raw.tell()
        if self.progress and (done - self._told >= CHUNK or done >= self.size):  # not once per 512-byte header
            self._told = done
            self.progress(done, self.size)
        return data

    def __getattr__(self, name: str) -> object:  # seek and tell: the file's own
        return getattr(self.raw, name)


class _Entries:
    """The members of a bundle in archive order, after its manifest (read, bounded and checked, on entry).
    Every tar error becomes BundleDamaged naming the last member read whole."""

    def __init__(self, path: Path, progress: Progress | None):
        self.path, self.progress = path, progress
        self.last = MANIFEST_NAME  # the last member read whole, for "the bundle ends after ..."
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> _Entries:
        try:
            self.manifest = self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _open(self) -> Manifest:
        try:
            raw = self._stack.enter_context(open(self.path, "rb"))
        except FileNotFoundError:
            raise UsageError(f"there is no bundle at {self.path}", fix="check the path of the bundle file") from None
        except IsADirectoryError:
            raise UsageError(f"{self.path} is a folder, not a bundle file", fix="name the bundle file") from None
        self.size = os.fstat(raw.fileno()).st_size
        self.raw = raw
        try:
            self.tar = self._stack.enter_context(
                tarfile.open(fileobj=_GuardedFile(raw, self.path, self.size, self.progress), mode="r:"))  # type: ignore
        except tarfile.TarError as exc:
            raise BundleDamaged(f"{self.path} cannot be read as a tar archive ({exc}): it is damaged, or not a "
                                "flagtree-cpu bundle (a bundle is a plain, uncompressed tar: one compressed for the "
                                "copy must be decompressed first)") from None
        return self._read_manifest()

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _next(self) -> tarfile.TarInfo | None:
        try:
            info = self.tar.next()
        except tarfile.TarError as exc:
            raise BundleDamaged(f"{self.path} is damaged after member {self.last!r}: {exc} (the file is "
                                "truncated or its bytes were changed)") from None
        self.tar.members.clear()  # tarfile remembers every member for random access we never use
        return info

    def _read_manifest(self) -> Manifest:
        info = self._next()
        if info is None or info.name != MANIFEST_NAME or not info.isreg():
            first = "nothing" if info is None else f"{info.name!r}"
            raise BundleDamaged(f"{self.path} is not a flagtree-cpu bundle: its first member is {first}, not "
                                f"the manifest {MANIFEST_NAME}")
        if info.size > MAX_MANIFEST_BYTES:
            raise BundleDamaged(f"{self.path}: the manifest {MANIFEST_NAME} is {info.size} bytes, more than a "
                                f"manifest can be ({MAX_MANIFEST_BYTES}); the bundle is damaged or hostile")
        source = self.tar.extractfile(info)
        assert source is not None
        try:
            raw = source.read()
        except tarfile.TarError as exc:
            raise BundleDamaged(f"{self.path} is truncated inside the manifest {MANIFEST_NAME} ({exc})") from None
        return Manifest.from_bytes(raw, f"{self.path}:{MANIFEST_NAME}")

    def __iter__(self) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
        while (info := self._next()) is not None:
            yield self.tar, info
            self.last = info.name
            if self.progress:  # after every member too: where a cancelled run's progress task stops it
                self.progress(self.raw.tell(), self.size)
        if self.progress:  # the end marker and padding are not read: the whole file was, as far as it matters
            self.progress(self.size, self.size)


def _expected_member(path: Path, manifest: Manifest, expected: Mapping[str, Member], seen: set[str],
                     info: tarfile.TarInfo) -> Member:
    name = info.name
    if problem := name_problem(name):
        raise BundleDamaged(f"{path} holds a hostile member {name[:200]!r}: it {problem}; nothing was extracted")
    if not info.isreg() or info.issparse():
        what = ("a symlink" if info.issym() else "a hard link" if info.islnk() else "a folder" if info.isdir()
                else "a device file or FIFO" if (info.isdev()) else "a sparse or special file")
        raise BundleDamaged(f"{path} holds member {name!r} as {what}; a bundle holds plain files only")
    if name in seen:
        raise BundleDamaged(f"{path} holds member {name!r} twice; a bundle holds each member once")
    member = expected.get(name)
    if member is None:
        carried = any(m.name == name for m in manifest.members)
        raise BundleDamaged(f"{path} holds member {name!r}, which its manifest "
                            + ("says is left to the bundle it was made --since" if carried else "does not list"))
    seen.add(name)
    return member


def _check_bytes(path: Path, manifest: Manifest, tar: tarfile.TarFile, info: tarfile.TarInfo, member: Member,
                 out: IO[bytes] | None) -> None:
    """Read the member's bytes through a sha256 (into ``out`` when given) and compare with the manifest."""
    if info.size != member.size:
        raise BundleDamaged(f"{path}: member {member.name!r} is {info.size} bytes, its manifest says "
                            f"{member.size}", details=(f"expected {member.size} bytes", f"got {info.size} bytes"))
    source = tar.extractfile(info)
    assert source is not None
    hasher = Hasher()
    try:
        while data := source.read(CHUNK):
            hasher.update(data)
            if out is not None:
                out.write(data)
    except tarfile.TarError as exc:
        raise BundleDamaged(f"{path} is truncated inside member {member.name!r} ({exc})",
                            details=_sizes(path, manifest)) from None
    if hasher.hexdigest() != member.sha256:
        raise BundleDamaged(f"{path}: member {member.name!r} is damaged: its bytes are not the ones the bundle was "
                            "made with", details=(f"expected sha256 {member.sha256}",
                                                  f"got sha256      {hasher.hexdigest()}"))


def _no_missing(path: Path, manifest: Manifest, seen: set[str], last: str) -> None:
    missing = [m.name for m in manifest.present() if m.name not in seen]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise BundleDamaged(f"{path} lacks member {missing[0]!r}{more} that its manifest lists; the archive ends "
                            f"(or cannot be read) after {last!r}: it is truncated, damaged, or members were removed",
                            details=(*(f"missing: {n}" for n in missing[:20]), *_sizes(path, manifest)))


def _sizes(path: Path, manifest: Manifest) -> tuple[str, ...]:
    """Expected against got, for a bundle cut short: the least a whole one takes (each member a 512-byte header
    and its data in 512-byte blocks), and the file's size."""
    blocks = sum(1 + -(-size // 512) for size in (len(manifest.to_bytes()), *(m.size for m in manifest.present())))
    with contextlib.suppress(OSError):
        return (f"expected at least {blocks * 512} bytes, got {path.stat().st_size}",)
    return ()


def _extract_one(path: Path, manifest: Manifest, tar: tarfile.TarFile, info: tarfile.TarInfo, member: Member,
                 target: Path) -> None:
    with open_atomic(target, create_mode=0o644) as out:
        try:
            _check_bytes(path, manifest, tar, info, member, out)
        except BundleDamaged as exc:
            raise BundleDamaged(f"{exc.message} (it changed after the bundle was verified)",
                                details=exc.details) from None
