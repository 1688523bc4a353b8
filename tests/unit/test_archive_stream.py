"""archive.TarStream: a compressed tarball read as plain tar bytes in bounded steps, with its limits, and
every way a download can be wrong named (truncated, not a tarball, corrupt)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile

import pytest

from flagtree_cpu_build.archive import (
    OUT_CHUNK,
    LimitExceeded,
    TarballProblem,
    TarStream,
    UnpackLimits,
    UnsupportedArchive,
    limits_for,
    members,
    zstd_decompressor,
)

LIMITS = UnpackLimits(max_bytes=None, max_entries=1000)


def plain_tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


FILES = {"top/a.txt": b"alpha\n" * 1000, "top/b/c.bin": bytes(range(256)) * 300, "top/empty": b""}
COMPRESS = {"gzip": gzip.compress, "xz": lzma.compress, "bzip2": bz2.compress, "plain": lambda data: data}


def stream(data: bytes, limits: UnpackLimits = LIMITS) -> TarStream:
    return TarStream(io.BytesIO(data), "llvm", limits, lambda: len(data), lambda done, total: None)


def read_all(data: bytes, limits: UnpackLimits = LIMITS) -> dict[str, bytes]:
    found = {}
    for tar, member in members(stream(data, limits)):
        source = tar.extractfile(member)
        found[member.name] = source.read() if source else b""
    return found


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_each_compression_reads_the_same_members(kind: str) -> None:
    assert read_all(COMPRESS[kind](plain_tar(FILES))) == FILES


def test_concatenated_gzip_streams_are_read_as_one_tarball() -> None:
    tar = plain_tar(FILES)
    data = gzip.compress(tar[:5000]) + gzip.compress(tar[5000:])  # pigz -i, bgzip and friends write this
    assert read_all(data) == FILES


class Trickle:
    """A download arriving in pieces: here, the first stream alone, then the rest in small reads."""

    def __init__(self, data: bytes, first: int):
        self.data, self.pos, self.first = data, 0, first

    def read(self, size: int) -> bytes:
        step = self.first - self.pos if self.pos < self.first else 7000
        piece = self.data[self.pos:self.pos + min(size, step)]
        self.pos += len(piece)
        return piece


def test_a_second_gzip_stream_that_starts_exactly_at_a_read_is_read_whole() -> None:
    files = {f"top/f{i}": bytes([i]) * 300_000 for i in range(3)}
    tar = plain_tar(files)
    first = gzip.compress(tar[:400_000])
    tar_stream = TarStream(Trickle(first + gzip.compress(tar[400_000:]), len(first)), "llvm", LIMITS,
                           lambda: None, lambda done, total: None)
    found = {member.name: archive.extractfile(member).read() for archive, member in members(tar_stream)}
    assert found == files


def test_a_gzip_cut_after_a_whole_member_is_still_truncated() -> None:
    data = gzip.compress(plain_tar(FILES))
    with pytest.raises(TarballProblem, match="ends early"):
        read_all(data[: len(data) - 6])  # only the gzip trailer is missing: tarfile alone would not notice


def cut_member(declared: int = 7 << 30, present: int = 1 << 20) -> bytes:
    """A whole gzip stream around a tar whose only member declares ``declared`` bytes and holds ``present``."""
    info = tarfile.TarInfo("top/big")
    info.size = declared
    return gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT) + bytes(present))


def test_a_member_cut_short_inside_a_whole_gzip_stream_is_truncated_not_a_read_error() -> None:
    with pytest.raises(TarballProblem, match=r"truncated inside member 'top/big', whose header declares 7.5 GB"):
        read_all(cut_member())  # the member's bytes are read by the caller, outside members()


def test_skipping_over_a_member_cut_short_is_truncated_too() -> None:
    with pytest.raises(TarballProblem, match=r"truncated inside member 'top/big'"):
        for _archive, _member in members(stream(cut_member())):
            pass  # a listing (adopting a tree, checking a bundle's archive) reads no member's bytes


def test_a_corrupt_gzip_is_named_as_such() -> None:
    data = bytearray(gzip.compress(plain_tar(FILES)))
    data[200:260] = bytes(60)
    with pytest.raises(TarballProblem, match="gzip data is corrupt"):
        read_all(bytes(data))


def test_an_html_page_is_not_a_tarball_and_the_message_shows_its_start() -> None:
    with pytest.raises(TarballProblem, match=r"it starts with '<!DOCTYPE html>"):
        read_all(b"<!DOCTYPE html><html>Access denied</html>\n" * 30)


def test_output_comes_in_bounded_steps_whatever_the_ratio() -> None:
    data = gzip.compress(plain_tar({"top/zeros": bytes(64 << 20)}), compresslevel=9)  # 64 MB in ~65 KB
    tar_stream = stream(data, UnpackLimits(max_bytes=1 << 30, max_entries=10))
    biggest = 0
    while chunk := tar_stream.read(1 << 30):  # even a huge request gets at most one output chunk
        biggest = max(biggest, len(chunk))
    assert biggest <= OUT_CHUNK and tar_stream.produced >= 64 << 20


def test_the_byte_limit_stops_within_one_chunk_of_it() -> None:
    data = gzip.compress(plain_tar({"top/zeros": bytes(16 << 20)}))
    tar_stream = stream(data, UnpackLimits(max_bytes=4 << 20, max_entries=10))
    with pytest.raises(LimitExceeded, match="expands to more than 4.2 MB"):
        while tar_stream.read(OUT_CHUNK):
            pass
    assert tar_stream.produced <= (4 << 20) + OUT_CHUNK


def test_without_a_stated_size_the_limit_is_a_ratio_of_the_download_with_a_floor() -> None:
    limits = limits_for("llvm", None, None)
    assert limits.byte_limit(100 << 20) == 20 * (100 << 20)
    assert limits.byte_limit(1000) == 64 << 20  # tiny archives may always unpack a little
    assert limits.byte_limit(None) is None  # unknown yet (a download without Content-Length)
    assert limits_for("llvm", 5_000_000_000, 9000) == UnpackLimits(max_bytes=10_000_000_000, max_entries=18000)


def test_the_entry_limit_counts_members() -> None:
    data = gzip.compress(plain_tar({f"top/f{i}": b"" for i in range(50)}))
    with pytest.raises(LimitExceeded, match="more than 20 files, folders and links; stopped at entry 21"):
        read_all(data, UnpackLimits(max_bytes=None, max_entries=20))


@pytest.mark.skipif(zstd_decompressor() is not None, reason="this Python reads zstd (3.14+)")
def test_zstd_without_a_reader_is_unsupported_not_damaged() -> None:
    data = b"(\xb5/\xfd" + bytes(600)
    with pytest.raises(UnsupportedArchive, match=r"cannot read zstd") as caught:
        read_all(data)
    assert not isinstance(caught.value, TarballProblem)  # the bytes may be fine: they are not dropped as damaged
