"""Tarballs for fetch tests: an LLVM-shaped prebuilt, and hostile ones.

Contents are deterministic (seeded), so digests are stable within a run; sizes are
small enough to keep tests fast but large enough to cut a download in the middle.
"""

from __future__ import annotations

import hashlib
import io
import random
import tarfile
from dataclasses import dataclass

TOP = "llvm-a66376b0-ubuntu-arm64"


@dataclass(frozen=True)
class Tarball:
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

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
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
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
        else:
            raise ValueError(kind)
    return Tarball(buffer.getvalue())
