"""Reading a compressed tarball as a stream of members, with flat memory and enforced limits.

``tarfile``'s own stream mode (``r|*``) decompresses each read of compressed input in one go
(a 1 MiB read of gzipped zeros is ~1 GB in memory) and re-joins its whole buffer on every
512-byte header read (quadratic in the number of small members). Here the decompression is
ours, with bounded output (``max_length``), and tarfile only parses plain tar bytes (``r|``)
from a small buffer. Every decompressed byte and every member is counted against the
limits as it goes, so an archive bomb stops early with a message instead of filling the disk.

gzip, xz, bzip2 and plain tar are read everywhere; zstd only where the standard library has a
reader (``compression.zstd``, Python 3.14): elsewhere a zstd tarball is refused, before any
download when its URL says .zst, with what to do (``UnsupportedArchive``; its bytes are fine).
"""

from __future__ import annotations

import bz2
import lzma
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .errors import ArtifactError
from .progress import human_bytes

RAW_CHUNK = 1 << 20  # compressed bytes read at a time
OUT_CHUNK = 256 * 1024  # decompressed bytes made at a time, whatever the compression ratio
ZLIB_IN_CHUNK = 64 * 1024
TAR_BUFSIZE = 16 * 1024  # tarfile copies its buffer on every header read: keep it small
DEFAULT_RATIO_CEILING = 20  # unpacked bytes per downloaded byte; LLVM prebuilts unpack to ~5x
RATIO_FLOOR_BYTES = 64 * 1024 * 1024  # small archives may always unpack this much
DEFAULT_MAX_ENTRIES = 200_000  # an LLVM prebuilt has ~10,000
MARGIN = 2  # limits are twice what the recipe expects

_MAGIC = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz", b"BZh": "bzip2", b"(\xb5/\xfd": "zstd"}


class TarballProblem(ArtifactError):
    """The bytes are not a usable tarball (damaged, truncated, hostile): they must not be kept."""

    def name_source(self, where: str) -> None:
        """Say whose bytes these are (the URL, the cached or imported file), once: the reader knew only a label."""
        if where not in self.message:
            self.message = f"{self.message}; the archive: {where}"


class UnsupportedArchive(ArtifactError):
    """The bytes may be fine, but this Python cannot read their format (zstd before 3.14)."""


ZSTD_SUFFIXES = (".zst", ".tzst", ".zstd")


def zstd_decompressor() -> Any:
    """The standard library's zstd decompressor, or None where Python has none (before 3.14)."""
    try:
        from compression import zstd  # type: ignore[import-not-found]
    except ImportError:
        return None
    return zstd.ZstdDecompressor()


def _decompress_errors() -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (zlib.error, lzma.LZMAError, OSError, EOFError)
    try:
        from compression import zstd  # type: ignore[import-not-found]
    except ImportError:
        return errors
    return (*errors, zstd.ZstdError)


def zstd_unsupported(label: str, url: str = "") -> UnsupportedArchive:
    import sys

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return UnsupportedArchive(
        f"{label} is a zstd-compressed tarball" + (f" ({url})" if url else "") + f", and this Python ({version}) "
        "cannot read zstd (its standard library has a zstd reader from Python 3.14 on)",
        fix=f"point artifacts.{label}.url at a .tar.gz, .tar.xz or .tar.bz2 build of the same files; or repack it "
        "(zstd -dc FILE.tar.zst | xz > FILE.tar.xz), set the url to that file (a path or file:// URL works) and its "
        "digest; or run flagtree-cpu with Python 3.14 or later")


class LimitExceeded(ArtifactError):
    """The tarball unpacks to more than its limits allow; the bytes may be fine (raise the limit)."""


@dataclass(frozen=True)
class UnpackLimits:
    """How much a tarball may unpack to. ``max_bytes`` None: ``ratio`` times the compressed size,
    once that is known (at least RATIO_FLOOR_BYTES)."""

    max_bytes: int | None
    max_entries: int
    ratio: int = DEFAULT_RATIO_CEILING
    bytes_key: str = "unpacked_size"  # the recipe keys that raise them, for the message
    entries_key: str = "unpacked_entries"
    artifact: str = "llvm"

    def byte_limit(self, compressed_total: int | None) -> int | None:
        if self.max_bytes is not None:
            return self.max_bytes
        return None if compressed_total is None else max(self.ratio * compressed_total, RATIO_FLOOR_BYTES)

    def too_big(self, unpacked: int, compressed_total: int | None, label: str) -> LimitExceeded:
        limit = self.byte_limit(compressed_total)
        key = f"artifacts.{self.artifact}.{self.bytes_key}"
        why = (f"{MARGIN}x the recipe's {self.bytes_key}" if self.max_bytes is not None else
               f"{self.ratio}x the {human_bytes(compressed_total or 0)} download")
        return LimitExceeded(
            f"refusing to unpack {label}: it expands to more than {human_bytes(limit or 0)} ({why}); stopped after "
            f"{human_bytes(unpacked)}, nothing was published", details=(f"limit: {limit} bytes",),
            fix=f"if the tarball is really this large, state its unpacked size (bytes): --set {key}=BYTES "
            f"(or `{self.bytes_key}:` in the recipe); the limit is then {MARGIN}x that")

    def too_many(self, entries: int, label: str) -> LimitExceeded:
        key = f"artifacts.{self.artifact}.{self.entries_key}"
        return LimitExceeded(
            f"refusing to unpack {label}: it has more than {self.max_entries:,} files, folders and links; "
            f"stopped at entry {entries:,}, nothing was published",
            fix=f"if the tarball really has that many entries, state the count: --set {key}=COUNT "
            f"(or `{self.entries_key}:` in the recipe); the limit is then {MARGIN}x that")


def limits_for(name: str, unpacked_size: int | None, unpacked_entries: int | None) -> UnpackLimits:
    """The recipe's expectations with a generous margin; without them, a compression-ratio ceiling."""
    return UnpackLimits(max_bytes=MARGIN * unpacked_size if unpacked_size else None,
                        max_entries=MARGIN * unpacked_entries if unpacked_entries else DEFAULT_MAX_ENTRIES,
                        artifact=name)


class TarStream:
    """Plain tar bytes out of a (possibly compressed) file object, decompressed in bounded steps.

    ``raw.read(n)`` gives compressed bytes (a file, or the download as it grows); ``total()`` its
    size when known; ``progress(done, total)`` is told how much of it was consumed. Memory holds
    one chunk of input and one of output, whatever the compression ratio.
    """

    def __init__(self, raw: Any, label: str, limits: UnpackLimits, total: Callable[[], int | None],
                 progress: Callable[[int, int | None], None]):
        self.raw, self.label, self.limits = raw, label, limits
        self._total, self._progress = total, progress
        self.consumed = self.produced = 0
        head = self._read_raw()
        while len(head) < 512 and (more := self._read_raw()):  # a growing download may give a few bytes
            head += more
        self._in, self._in_pos = head, 0
        self.kind = _kind_of(self._in, label)
        self._decompressor: Any = _new_decompressor(self.kind)
        self._out, self._out_pos = b"", 0
        self._finished = False

    def read(self, size: int = -1) -> bytes:
        size = size if size and size > 0 else TAR_BUFSIZE
        while self._out_pos >= len(self._out):
            if self._finished:
                return b""
            self._out, self._out_pos = self._refill(), 0
            self.produced += len(self._out)
            limit = self.limits.byte_limit(self._total())
            if limit is not None and self.produced > limit:
                raise self.limits.too_big(self.produced, self._total(), self.label)
        data = self._out[self._out_pos:self._out_pos + size]
        self._out_pos += len(data)
        return data

    def drain(self) -> None:
        """Read to the end (after the tar end marker): a truncated or corrupt compressed stream, or
        gigabytes hidden after the marker, are found here rather than ignored."""
        while self.read(OUT_CHUNK):
            pass

    def _read_raw(self) -> bytes:
        data = self.raw.read(RAW_CHUNK)
        self.consumed += len(data)
        self._progress(self.consumed, self._total())
        return data

    def _take(self, size: int) -> bytes:
        """Up to ``size`` bytes of compressed input; b"" at its end."""
        if self._in_pos >= len(self._in):
            self._in, self._in_pos = self._read_raw(), 0
        data = self._in[self._in_pos:self._in_pos + size]
        self._in_pos += len(data)
        return data

    def _refill(self) -> bytes:
        if self._decompressor is None:  # a plain tar
            data = self._take(OUT_CHUNK)
            self._finished = not data
            return data
        try:
            return self._decompress()
        except _decompress_errors() as exc:
            raise _damaged(self.label, f"its {self.kind} data is corrupt ({exc})") from None

    def _decompress(self) -> bytes:
        d = self._decompressor
        if d.eof:
            rest, self._in, self._in_pos = d.unused_data + self._in[self._in_pos:], b"", 0
            self._next_stream(rest)
            return b""
        if self.kind == "gzip":
            # zlib hands back unused input as a new bytes object each call: feed it small slices
            data = d.unconsumed_tail or self._take(ZLIB_IN_CHUNK)
            if not data:
                raise _damaged(self.label, "it ends early (the download is truncated)")
            return d.decompress(data, OUT_CHUNK)
        if d.needs_input:
            data = self._take(RAW_CHUNK)
            if not data:
                raise _damaged(self.label, "it ends early (the download is truncated)")
            return d.decompress(data, max_length=OUT_CHUNK)
        return d.decompress(b"", max_length=OUT_CHUNK)

    def _next_stream(self, rest: bytes) -> None:
        """After one compressed stream: another may follow (pigz -i, pbzip2 and bgzip write several);
        anything else after the end is ignored, as gzip and tar do."""
        while len(rest) < 6 and (more := self._take(RAW_CHUNK)):
            rest += more
        if rest and _kind_of(rest, self.label, strict=False) == self.kind:
            self._decompressor, self._in, self._in_pos = _new_decompressor(self.kind), rest, 0
        else:
            self._finished = True


def _kind_of(head: bytes, label: str, *, strict: bool = True) -> str:
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            if kind == "zstd" and strict and zstd_decompressor() is None:
                raise zstd_unsupported(label)
            return kind
    if not strict:
        return "other"
    if not head:
        raise _damaged(label, "it is empty")
    if len(head) < 512 or head[257:262] != b"ustar":
        shown = head[:40].decode("ascii", "replace").replace("\n", " ")
        raise _damaged(label, f"it is not a gzip, xz, bzip2 or plain tarball (it starts with {shown!r})")
    return "tar"


def _new_decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(wbits=47)  # 32 + 15: a gzip (or zlib) header, the full window
    if kind == "xz":
        return lzma.LZMADecompressor()
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    if kind == "zstd":
        return zstd_decompressor()
    return None


def _damaged(label: str, why: str) -> TarballProblem:
    return TarballProblem(f"{label} is not a readable tarball: {why}",
                          fix="nothing of it was kept; run the same command again to download it again")


class Archive:
    """The tar archive as ``members`` hands it out: ``extractfile`` as tarfile's, except that a member whose bytes
    end before its header's size (a tar cut short, then compressed whole) is a TarballProblem, not tarfile's
    ReadError — its bytes are read by the caller, outside ``members``, where no handler of ours would see it."""

    def __init__(self, tar: tarfile.TarFile, label: str):
        self.tar, self.label = tar, label

    def extractfile(self, member: tarfile.TarInfo) -> _MemberBytes | None:
        data = self.tar.extractfile(member)
        return None if data is None else _MemberBytes(data, self.label, member)


class _MemberBytes:
    def __init__(self, data: Any, label: str, member: tarfile.TarInfo):
        self.data, self.label, self.member = data, label, member

    def read(self, size: int = -1) -> bytes:
        try:
            return self.data.read(size)
        except tarfile.TarError:
            raise truncated_inside(self.label, self.member) from None


def truncated_inside(label: str, member: tarfile.TarInfo) -> TarballProblem:
    return _damaged(label, f"it is truncated inside member {member.name!r}, whose header declares "
                    f"{human_bytes(member.size)} that the archive does not hold")


def members(stream: TarStream) -> Iterator[tuple[Archive, tarfile.TarInfo]]:
    """Each member with its archive (for ``extractfile``), counted against the entry limit; the
    stream is read to its end afterwards. Members are not kept: memory stays flat."""
    count = 0
    member = None
    try:
        with tarfile.open(fileobj=stream, mode="r|", bufsize=TAR_BUFSIZE) as tar:
            archive = Archive(tar, stream.label)
            while (member := tar.next()) is not None:
                count += 1
                if count > stream.limits.max_entries:
                    raise stream.limits.too_many(count, stream.label)
                # tarfile remembers every member (for random access we never use): forget them
                tar.members.clear()
                yield archive, member
        stream.drain()
    except tarfile.TarError as exc:
        if member is not None and "unexpected end of data" in str(exc):  # skipping the data of the last one
            raise truncated_inside(stream.label, member) from None
        raise _damaged(stream.label, str(exc)) from None
