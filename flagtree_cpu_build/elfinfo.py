"""Symbol versions in ELF files: what a binary needs, what a library provides.

"version `GLIBCXX_3.4.32' not found" is one of FlagTree's documented failures: the LLVM
prebuilt (or libtriton) was built against a newer libstdc++/glibc than the board has.
Reading ``.gnu.version_r`` of the binaries and ``.gnu.version_d`` of the system's libc and
libstdc++ tells that before anything runs. Only the headers and the two small sections are
read, so a 200 MB LLVM binary costs a few kilobytes of I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

_SHT_GNU_VERDEF, _SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE
_MACHINES = {3: "x86", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64"}


@dataclass(frozen=True)
class ElfVersions:
    machine: str
    needs: dict[str, frozenset[str]]  # library file name -> versions needed from it
    defines: frozenset[str]  # versions this file provides (for libraries)


class NotElf(ValueError):
    pass


def machine_of(header: bytes) -> str | None:
    """The architecture an ELF file is for, from its first 20 bytes; None when they are not an ELF header
    (a wheel's members are read this way, without unpacking them)."""
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    end = "<" if header[5] == 1 else ">"
    number = struct.unpack_from(end + "H", header, 18)[0]
    return _MACHINES.get(number, f"unknown (e_machine {number})")


def read_versions(path: Path) -> ElfVersions:
    with open(path, "rb") as f:
        ident = f.read(64)
        if len(ident) < 52 or ident[:4] != b"\x7fELF":
            raise NotElf(f"{path} is not an ELF file")
        is64, end = ident[4] == 2, "<" if ident[5] == 1 else ">"
        machine = _MACHINES.get(struct.unpack_from(end + "H", ident, 18)[0], "unknown")
        if is64:
            shoff, = struct.unpack_from(end + "Q", ident, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", ident, 0x3A)
            header, fields = end + "IIQQQQIIQQ", (1, 4, 5, 6, 7)
        else:
            shoff, = struct.unpack_from(end + "I", ident, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", ident, 0x2E)
            header, fields = end + "IIIIIIIIII", (1, 4, 5, 6, 7)
        sections = []
        for i in range(shnum):
            f.seek(shoff + i * shentsize)
            raw = struct.unpack(header, f.read(struct.calcsize(header)))
            sections.append(tuple(raw[k] for k in fields))  # (type, offset, size, link, info)

        def read_section(index: int) -> bytes:
            _type, offset, size, _link, _info = sections[index]
            f.seek(offset)
            return f.read(size)

        needs: dict[str, frozenset[str]] = {}
        defines: set[str] = set()
        for index, (kind, _offset, _size, link, count) in enumerate(sections):
            if kind == _SHT_GNU_VERNEED:
                needs = _verneed(read_section(index), read_section(link), count, end)
            elif kind == _SHT_GNU_VERDEF:
                defines = _verdef(read_section(index), read_section(link), count, end)
        return ElfVersions(machine, needs, frozenset(defines))


def _string(table: bytes, offset: int) -> str:
    return table[offset:table.index(b"\0", offset)].decode("ascii", "replace")


def _verneed(data: bytes, strings: bytes, count: int, end: str) -> dict[str, frozenset[str]]:
    needs: dict[str, frozenset[str]] = {}
    offset = 0
    for _ in range(count):
        _version, aux_count, file_name, aux, following = struct.unpack_from(end + "HHIII", data, offset)
        names, aux_offset = set(), offset + aux
        for _ in range(aux_count):
            _hash, _flags, _other, name, aux_next = struct.unpack_from(end + "IHHII", data, aux_offset)
            names.add(_string(strings, name))
            aux_offset += aux_next
        needs[_string(strings, file_name)] = frozenset(names)
        if not following:
            break
        offset += following
    return needs


def _verdef(data: bytes, strings: bytes, count: int, end: str) -> set[str]:
    defined, offset = set(), 0
    for _ in range(count):
        _version, flags, _index, aux_count, _hash, aux, following = struct.unpack_from(end + "HHHHIII", data, offset)
        if aux_count and not flags & 0x1:  # VER_FLG_BASE names the library itself, not a version
            name, _next = struct.unpack_from(end + "II", data, offset + aux)
            defined.add(_string(strings, name))
        if not following:
            break
        offset += following
    return defined


def version_key(name: str) -> tuple[str, tuple[int, ...]]:
    """``GLIBCXX_3.4.32`` -> ``("GLIBCXX", (3, 4, 32))``, for "newest provided" messages."""
    prefix, _, number = name.partition("_")
    parts = tuple(int(p) for p in number.split(".") if p.isdigit())
    return prefix, parts
