"""Reading a bundle file: verified front to back in one pass (``read_bundle``, ``verify_bundle``), and members
extracted from one that was (``extract_members``); nothing is written but what ``extract_members`` is asked for.

The archive is read as a stream, holding one chunk and the manifest in memory. Its first member is the manifest;
a signed bundle's second is its signature (``signature.SIGNATURE_NAME``, size-capped and parsed before use).
``read_bundle`` hands both to ``on_head`` before a single member is hashed — so a bundle an authenticity check
refuses costs one small read — and, asked for the file's sha256, hashes every byte of the file in the same pass
(padding and the end blocks included): the bytes verified are the bytes whose digest was compared.
"""

from __future__ import annotations

import contextlib
import os
import tarfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..atomic import open_atomic
from ..digest import CHUNK, Hasher
from ..diskspace import disk_full, is_disk_full
from ..errors import UsageError
from .errors import BundleDamaged, BundleIncomplete
from .manifest import MANIFEST_NAME, Manifest, Member, name_problem
from .signature import MAX_SIGNATURE_BYTES, SIGNATURE_NAME, Signature, parse_signature

MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # a manifest of 100,000 members is ~30 MB
# tarfile reads a pax or GNU long-name header whole into memory: no single read of ours may exceed this
MAX_READ = MAX_MANIFEST_BYTES + 1024 * 1024

Progress = Callable[[int, int | None], None]  # (bytes done, bytes in all): e.g. a ui.progress task's update


@dataclass(frozen=True)
class Head:
    """What a bundle says before its members: the manifest, its exact bytes (what a signature covers), the
    signature (None: an unsigned bundle)."""

    manifest: Manifest
    raw: bytes
    signature: Signature | None


@dataclass(frozen=True)
class Verified:
    head: Head
    sha256: str | None  # of the whole file, as sha256sum prints it (when asked for)


def verify_bundle(path: Path, *, progress: Progress | None = None) -> Manifest:
    """The manifest of the bundle ``path`` after ``read_bundle`` found every member as it says."""
    return read_bundle(path, progress=progress).head.manifest


def read_bundle(path: Path, *, progress: Progress | None = None, on_head: Callable[[Head], None] | None = None,
                file_sha256: bool = False) -> Verified:
    """Read the bundle ``path`` once and find every member exactly as the manifest says: the manifest first,
    whole and matching its own digest; then the signature, if any (at most MAX_SIGNATURE_BYTES, an SSH signature
    in the bundles' namespace); each member a plain file with a safe name, listed, present once, of the listed
    size and sha256; none missing. Anything else is BundleDamaged naming the member and the fix.

    ``on_head`` sees the manifest and signature before any member is read (it may refuse the bundle by raising);
    ``file_sha256`` hashes the whole file in the same pass. Nothing is written anywhere."""
    with _Entries(path, progress, file_sha256) as entries:
        if on_head is not None:
            on_head(entries.head)
        manifest = entries.head.manifest
        expected = {m.name: m for m in manifest.present()}
        seen: set[str] = set()
        for tar, info in entries:
            member = _expected_member(path, manifest, expected, seen, info)
            _check_bytes(path, manifest, tar, info, member, None)
        _no_missing(path, manifest, seen, entries.last)
        return Verified(entries.head, entries.file_sha256())


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


# --- the archive as a stream -----------------------------------------------------------------------------


class _DigestingFile:
    """The bundle file under tarfile, every byte of it fed to a sha256 in file order — also the bytes tarfile
    skips with a forward seek (a member's padding), which are read and hashed instead; the rest of the file
    (the end blocks) is hashed by ``finish``. Reads behind what was hashed are not hashed again."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.hasher, self.hashed = raw, Hasher(), 0

    def read(self, size: int = -1) -> bytes:
        at = self.raw.tell()
        data = self.raw.read(size)
        if at + len(data) > self.hashed:
            self.hasher.update(data[self.hashed - at:])
            self.hashed = at + len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            offset += self.raw.tell()
        elif whence == os.SEEK_END:
            offset += os.fstat(self.raw.fileno()).st_size
        target = offset
        if target > self.hashed:
            self.raw.seek(self.hashed)
            while self.hashed < target and self.read(min(CHUNK, target - self.hashed)):
                pass
        return self.raw.seek(target)

    def finish(self) -> str:
        self.seek(0, os.SEEK_END)
        return self.hasher.hexdigest()

    def __getattr__(self, name: str) -> object:  # tell, name, mode: the file's own
        return getattr(self.raw, name)


class _GuardedFile:
    """The bundle file as tarfile reads it: counted for progress, and no single read larger than MAX_READ
    (tarfile reads a pax or long-name header whole: a hostile one of gigabytes must not fill memory)."""

    def __init__(self, raw: IO[bytes] | _DigestingFile, path: Path, size: int, progress: Progress | None):
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
    """The members of a bundle in archive order, after its head (the manifest and the signature, read, bounded
    and checked on entry). Every tar error becomes BundleDamaged naming the last member read whole."""

    def __init__(self, path: Path, progress: Progress | None, file_sha256: bool = False):
        self.path, self.progress, self.want_sha256 = path, progress, file_sha256
        self.last = MANIFEST_NAME  # the last member read whole, for "the bundle ends after ..."
        self._stack = contextlib.ExitStack()
        self._pending: tarfile.TarInfo | None = None  # read while looking for the signature, not yet yielded
        self._digesting: _DigestingFile | None = None

    def __enter__(self) -> _Entries:
        try:
            self.head = self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    @property
    def manifest(self) -> Manifest:
        return self.head.manifest

    def file_sha256(self) -> str | None:
        return self._digesting.finish() if self._digesting is not None else None

    def _open(self) -> Head:
        try:
            raw = self._stack.enter_context(open(self.path, "rb"))
        except FileNotFoundError:
            raise UsageError(f"there is no bundle at {self.path}", fix="check the path of the bundle file") from None
        except IsADirectoryError:
            raise UsageError(f"{self.path} is a folder, not a bundle file", fix="name the bundle file") from None
        self.size = os.fstat(raw.fileno()).st_size
        self.raw = raw
        under: IO[bytes] | _DigestingFile = raw
        if self.want_sha256:
            under = self._digesting = _DigestingFile(raw)
        try:
            self.tar = self._stack.enter_context(
                tarfile.open(fileobj=_GuardedFile(under, self.path, self.size, self.progress), mode="r:"))  # type: ignore
        except tarfile.TarError as exc:
            raise BundleDamaged(f"{self.path} cannot be read as a tar archive ({exc}): it is damaged, or not a "
                                "flagtree-cpu bundle (a bundle is a plain, uncompressed tar: one compressed for the "
                                "copy must be decompressed first)") from None
        manifest, raw_manifest = self._read_manifest()
        return Head(manifest, raw_manifest, self._read_signature())

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _next(self) -> tarfile.TarInfo | None:
        if self._pending is not None:
            info, self._pending = self._pending, None
            return info
        try:
            info = self.tar.next()
        except tarfile.TarError as exc:
            raise BundleDamaged(f"{self.path} is damaged after member {self.last!r}: {exc} (the file is "
                                "truncated or its bytes were changed)") from None
        self.tar.members.clear()  # tarfile remembers every member for random access we never use
        return info

    def _read(self, info: tarfile.TarInfo) -> bytes:
        source = self.tar.extractfile(info)
        assert source is not None
        try:
            return source.read()
        except tarfile.TarError as exc:
            raise BundleDamaged(f"{self.path} is truncated inside {info.name} ({exc})") from None

    def _read_manifest(self) -> tuple[Manifest, bytes]:
        info = self._next()
        if info is None or info.name != MANIFEST_NAME or not info.isreg():
            first = "nothing" if info is None else f"{info.name!r}"
            raise BundleDamaged(f"{self.path} is not a flagtree-cpu bundle: its first member is {first}, not "
                                f"the manifest {MANIFEST_NAME}")
        if info.size > MAX_MANIFEST_BYTES:
            raise BundleDamaged(f"{self.path}: the manifest {MANIFEST_NAME} is {info.size} bytes, more than a "
                                f"manifest can be ({MAX_MANIFEST_BYTES}); the bundle is damaged or hostile")
        raw = self._read(info)
        return Manifest.from_bytes(raw, f"{self.path}:{MANIFEST_NAME}"), raw

    def _read_signature(self) -> Signature | None:
        """The signature, when the member after the manifest is one (a bundle made without --sign has none)."""
        info = self._next()
        if info is None or info.name != SIGNATURE_NAME:
            self._pending = info
            return None
        if not info.isreg() or info.size > MAX_SIGNATURE_BYTES:
            what = f"{info.size} bytes, more than a signature can be ({MAX_SIGNATURE_BYTES})" if info.isreg() \
                else "not a plain file"
            raise BundleDamaged(f"{self.path}: its signature member {SIGNATURE_NAME} is {what}; the bundle is "
                                "damaged or hostile, and nothing of it is used")
        self.last = SIGNATURE_NAME
        return parse_signature(self._read(info), str(self.path))

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
    if name == SIGNATURE_NAME:
        raise BundleDamaged(f"{path} holds a signature member {name!r} where none belongs: a bundle's signature is "
                            "its second member, right after the manifest, and there is one")
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
