"""Tarballs for fetch tests: an LLVM-shaped prebuilt, and hostile ones.

Contents are deterministic (seeded), so digests are stable within a run; sizes are
small enough to keep tests fast but large enough to cut a download in the middle.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import random
import stat
import tarfile
import zipfile
from dataclasses import dataclass

TOP = "llvm-a66376b0-ubuntu-arm64"


@dataclass(frozen=True)
class Tarball:
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def md5(self) -> str:
        return hashlib.md5(self.data).hexdigest()

    @property
    def sha512(self) -> str:
        return hashlib.sha512(self.data).hexdigest()

    def member(self, rel: str) -> bytes:
        """The bytes of TOP/rel in the tarball, to compare a published tree with."""
        with tarfile.open(fileobj=io.BytesIO(self.data)) as tar:
            member = tar.extractfile(f"{TOP}/{rel}")
            assert member is not None, rel
            return member.read()


def _add(tar: tarfile.TarFile, name: str, *, data: bytes = b"", kind: bytes = tarfile.REGTYPE,
         mode: int = 0o644, linkname: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = 1_700_000_000
    info.linkname = linkname
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def llvm_tarball(seed: int = 1, size_kb: int = 768) -> Tarball:
    """top/bin/clang (executable), headers, a static library, an .so with an internal symlink and a hard link."""
    rng = random.Random(seed)
    buffer = io.BytesIO()
    # the same bytes on every call (gzip's header would carry the time): a published build's key names its sha256
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as packed, tarfile.open(fileobj=packed, mode="w") as tar:
        _add(tar, f"{TOP}/", kind=tarfile.DIRTYPE, mode=0o755)
        _add(tar, f"{TOP}/bin/", kind=tarfile.DIRTYPE, mode=0o755)
        _add(tar, f"{TOP}/bin/clang", data=rng.randbytes(size_kb * 1024 // 2), mode=0o755)
        _add(tar, f"{TOP}/include/llvm/Config/llvm-config.h", data=b"#define LLVM_VERSION_MAJOR 20\n")
        _add(tar, f"{TOP}/lib/libLLVMSupport.a", data=rng.randbytes(size_kb * 1024 // 2))
        _add(tar, f"{TOP}/lib/libfoo.so.1", data=b"\x7fELF fixture\n", mode=0o755)
        _add(tar, f"{TOP}/lib/libfoo.so", kind=tarfile.SYMTYPE, linkname="libfoo.so.1")
        _add(tar, f"{TOP}/lib/libfoo-copy.so", kind=tarfile.LNKTYPE, linkname=f"{TOP}/lib/libfoo.so.1")
    return Tarball(buffer.getvalue())


def hostile_tarball(kind: str) -> Tarball:
    """A small tarball whose last member attacks the extractor in the way ``kind`` names."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        _add(tar, f"{TOP}/", kind=tarfile.DIRTYPE, mode=0o755)
        _add(tar, f"{TOP}/bin/harmless", data=b"ok\n")
        if kind == "traversal":
            _add(tar, f"{TOP}/../../escaped.txt", data=b"pwned\n")
        elif kind == "absolute":
            _add(tar, "/tmp/flagtree-cpu-absolute-escape.txt", data=b"pwned\n")
        elif kind == "symlink-escape":
            _add(tar, f"{TOP}/out", kind=tarfile.SYMTYPE, linkname="../../outside")
            _add(tar, f"{TOP}/out/pwned.txt", data=b"pwned\n")
        elif kind == "symlink-chain":
            _add(tar, f"{TOP}/here", kind=tarfile.SYMTYPE, linkname=".")
            _add(tar, f"{TOP}/here/up", kind=tarfile.SYMTYPE, linkname="..")
            _add(tar, f"{TOP}/here/up/pwned.txt", data=b"pwned\n")
        elif kind == "hardlink-escape":
            _add(tar, f"{TOP}/passwd", kind=tarfile.LNKTYPE, linkname="/etc/passwd")
        elif kind == "device":
            _add(tar, f"{TOP}/dev-null", kind=tarfile.CHRTYPE)
        elif kind == "symlink-compose":
            _symlink_composition(tar)
        else:
            raise ValueError(kind)
    return Tarball(buffer.getvalue())


def _symlink_composition(tar: tarfile.TarFile) -> None:
    """Links that each resolve inside the tree when made, but whose composition leads out of it once every
    member is in place: ``a -> d1/.../d12/s/../../..`` (made first, while d1... do not exist, it reads as
    d1/.../d10), then the folders, then ``d1/.../d12/s -> ../..`` (twelve times: the tree's root)."""
    deep = "/".join(f"d{i}" for i in range(1, 13))
    _add(tar, f"{TOP}/a", kind=tarfile.SYMTYPE, linkname=f"{deep}/s/../../..")
    for i in range(1, 13):
        _add(tar, f"{TOP}/" + "/".join(f"d{j}" for j in range(1, i + 1)) + "/", kind=tarfile.DIRTYPE, mode=0o755)
    _add(tar, f"{TOP}/{deep}/s", kind=tarfile.SYMTYPE, linkname="/".join([".."] * 12))


def rich_tarball() -> Tarball:
    """Everything a real prebuilt holds that an unpacker can get wrong: exec bits, a symlinked folder and a
    file reached through it, relative links up and across, a hard link, an empty file, a name longer than
    the 100 bytes of a plain tar header, nested folders made implicitly."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        _add(tar, f"{TOP}/", kind=tarfile.DIRTYPE, mode=0o755)
        _add(tar, f"{TOP}/bin/clang-20", data=b"\x7fELF clang\n", mode=0o755)
        _add(tar, f"{TOP}/bin/clang", kind=tarfile.SYMTYPE, linkname="clang-20")
        _add(tar, f"{TOP}/bin/clang++", kind=tarfile.SYMTYPE, linkname="clang")
        _add(tar, f"{TOP}/bin/mlir-tblgen", data=b"\x7fELF tblgen\n", mode=0o750)
        _add(tar, f"{TOP}/lib/libLLVM.so.20", data=b"\x7fELF lib\n" * 100, mode=0o644)
        _add(tar, f"{TOP}/lib/libLLVM.so", kind=tarfile.SYMTYPE, linkname="libLLVM.so.20")
        _add(tar, f"{TOP}/lib64", kind=tarfile.SYMTYPE, linkname="lib")
        _add(tar, f"{TOP}/lib64/cmake/llvm/LLVMConfig.cmake", data=b"set(LLVM_VERSION 20)\n")
        _add(tar, f"{TOP}/lib/libLLVM-hard.so", kind=tarfile.LNKTYPE, linkname=f"{TOP}/lib/libLLVM.so.20")
        _add(tar, f"{TOP}/include/llvm/empty.h", data=b"")
        _add(tar, f"{TOP}/include/mlir/" + "Dialect/" * 14 + "Ops.h.inc", data=b"// long name\n")
        _add(tar, f"{TOP}/include/llvm-c/up", kind=tarfile.SYMTYPE, linkname="../llvm")
        _add(tar, f"{TOP}/share/readme", data=b"read me\n", mode=0o444)
    return Tarball(buffer.getvalue())


def zeros_tarball(unpacked_mb: int) -> Tarball:
    """One file of zeros: a few hundred bytes per MB once gzipped (an archive bomb)."""
    size = unpacked_mb << 20
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as gz:
        for name, kind, length in ((f"{TOP}/", tarfile.DIRTYPE, 0), (f"{TOP}/zeros.bin", tarfile.REGTYPE, size)):
            info = tarfile.TarInfo(name)
            info.type, info.size, info.mode, info.mtime = kind, length, 0o644, 1_700_000_000
            gz.write(info.tobuf(format=tarfile.GNU_FORMAT))
        block = bytes(1 << 20)
        for _ in range(unpacked_mb):
            gz.write(block)
        gz.write(bytes(1024))  # the end-of-archive marker
    return Tarball(buffer.getvalue())


def many_files_tarball(count: int) -> Tarball:
    """``count`` empty files in folders of 1,000: tiny once gzipped, a flood of entries once unpacked."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6, mtime=0) as gz:
        def add(name: str, kind: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, 0o755 if kind == tarfile.DIRTYPE else 0o644, 1_700_000_000
            gz.write(info.tobuf(format=tarfile.GNU_FORMAT))

        add(f"{TOP}/", tarfile.DIRTYPE)
        for i in range(count):
            if i % 1000 == 0:
                add(f"{TOP}/d{i // 1000:04d}/", tarfile.DIRTYPE)
            add(f"{TOP}/d{i // 1000:04d}/f{i:07d}", tarfile.REGTYPE)
        gz.write(bytes(1024))
    return Tarball(buffer.getvalue())


def tarball_with(files: dict[str, bytes], *, links: dict[str, str] | None = None, mode: str = "w:gz",
                 executable: tuple[str, ...] = ()) -> Tarball:
    """A tarball of exactly these members (folders made implicitly); ``mode`` picks the compression."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, data in files.items():
            _add(tar, name, data=data, mode=0o755 if name in executable else 0o644)
        for name, target in (links or {}).items():
            _add(tar, name, kind=tarfile.SYMTYPE, linkname=target)
    return Tarball(buffer.getvalue())


def zip_with(files: dict[str, bytes], *, links: dict[str, str] | None = None,
             executable: tuple[str, ...] = ()) -> Tarball:
    """A zip of these members, written as a Unix zip tool does (modes, symlinks as S_IFLNK entries)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 5))
            info.create_system = 3
            info.external_attr = (stat.S_IFREG | (0o755 if name in executable else 0o644)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 5))
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return Tarball(buffer.getvalue())


def zstd_lookalike() -> Tarball:
    """Bytes that start as a zstd frame does: enough for a reader that sniffs the format."""
    return Tarball(b"(\xb5/\xfd" + bytes(range(256)) * 8)


def cut_member_tarball(declared: int = 7 << 30, present: int = 1 << 20) -> Tarball:
    """A whole gzip stream holding a tar whose member declares ``declared`` bytes but has ``present``, then nothing:
    the compression layer is intact, only the tar inside is cut short (a truncated tar, compressed afterwards)."""
    info = tarfile.TarInfo(f"{TOP}/lib/libLLVM.a")
    info.size, info.mode, info.mtime = declared, 0o644, 1_700_000_000
    folder = tarfile.TarInfo(f"{TOP}/")
    folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
    plain = folder.tobuf(format=tarfile.GNU_FORMAT) + info.tobuf(format=tarfile.GNU_FORMAT) + bytes(present)
    return Tarball(gzip.compress(plain, mtime=0))
