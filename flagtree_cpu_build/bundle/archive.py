"""A bundle on disk: an uncompressed tar (its members already are compressed), the manifest first, then the
signature of a signed bundle, then every member the manifest lists. This module writes one; ``reading`` reads
one (its functions are re-exported here).

``write_bundle`` is atomic (a temporary beside the destination, renamed when whole), and hashes the file as it
writes it (the sha256 ``sha256sum`` prints, which a site can carry to the board: ``--expect-digest``). A signed
bundle's signature is made over the manifest's exact bytes before the first byte is written, so a key that
cannot sign leaves no file behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO

from ..atomic import open_atomic
from ..digest import Hasher, hash_file
from ..diskspace import disk_full, is_disk_full
from ..errors import ArtifactError, UsageError
from .manifest import MANIFEST_NAME, Manifest, Member
from .reading import (
    MAX_MANIFEST_BYTES,
    MAX_READ,
    Head,
    Progress,
    Verified,
    extract_members,
    read_bundle,
    verify_bundle,
)
from .signature import SIGNATURE_NAME, Signature

__all__ = ["MAX_MANIFEST_BYTES", "MAX_READ", "Head", "Progress", "Verified", "Written", "extract_members",
           "read_bundle", "seal", "verify_bundle", "write", "write_bundle"]

Signer = Callable[[bytes], Signature]  # the manifest's bytes -> their signature (``signature.sign`` with a key)


@dataclass(frozen=True)
class Written:
    manifest: Manifest
    sha256: str  # of the whole file, as sha256sum prints it
    signature: Signature | None


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
    """``write`` without a signature; the manifest written."""
    return write(dest, manifest, files, progress=progress).manifest


def write(dest: Path, manifest: Manifest, files: Mapping[str, Path], *, progress: Progress | None = None,
          signer: Signer | None = None) -> Written:
    """Write the bundle ``dest``: ``manifest`` first, then (with ``signer``) its signature, then each present
    member's file from ``files``.

    A draft (no digest) is ``seal``-ed first, ``progress`` counting both readings. Each file is hashed again as
    it is copied: one changed since it was sealed is refused (ArtifactError naming it). ``dest`` appears whole
    or not at all (no temporary left, Ctrl-C included); a full disk is ``diskspace.DiskFull`` naming ``dest``.
    Returns the manifest written, the file's sha256 and the signature."""
    sealing = not manifest.digest
    if sealing:
        manifest = seal(manifest, files, progress=progress and (lambda done, total: progress(done, 2 * (total or 0))))
    elif manifest.compute_digest() != manifest.digest:
        raise ValueError("the manifest was changed after it was sealed: seal it again")
    _check_files(manifest, files)
    head = manifest.to_bytes()
    if len(head) > MAX_MANIFEST_BYTES:  # a reader would refuse it: do not write what cannot be read
        raise ValueError(f"the manifest is {len(head)} bytes, more than a bundle's manifest may be")
    _check_dest(dest)
    signature = signer(head) if signer is not None else None  # before the first byte: a refusal leaves nothing
    total = sum(m.size for m in manifest.present())
    try:
        # durable: a bundle is carried away on a stick, so it must be on the disk, whole
        with open_atomic(dest, durable=True) as raw:
            out = _HashingWriter(raw)
            with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                mtime = _timestamp(manifest.created)
                tar.addfile(_info(MANIFEST_NAME, len(head), mtime), io.BytesIO(head))
                if signature is not None:
                    tar.addfile(_info(SIGNATURE_NAME, len(signature.armoured), mtime), io.BytesIO(signature.armoured))
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
    return Written(manifest, out.hasher.hexdigest(), signature)


def _check_dest(dest: Path) -> None:
    if dest.is_dir():
        raise UsageError(f"{dest} is a folder; the bundle is a file", fix="name a file: -o FOLDER/NAME.bundle")
    if not dest.parent.is_dir():
        raise UsageError(f"cannot write the bundle {dest}: the folder {dest.parent} does not exist",
                         fix=f"make it first (mkdir -p {dest.parent}) or name another file")


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


class _HashingWriter:
    """The bundle's temporary file as tarfile writes it, every byte through a sha256 (tarfile only appends)."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.hasher = raw, Hasher()

    def write(self, data: bytes) -> int:
        self.hasher.update(data)
        return self.raw.write(data)

    def __getattr__(self, name: str) -> object:  # tell, name, mode: the file's own
        return getattr(self.raw, name)
