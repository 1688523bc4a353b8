"""Digests: the one module that hashes bytes (hashlib lives here and nowhere else).

A ``Checksum`` is a value — an algorithm and a hex digest — written ``sha256:<hex>`` (a bare
64-digit hex string is a sha256, as recipes and lock files have always written them). Files
and downloads are hashed as they stream, through a ``Hasher``. The algorithms this tool knows
are the table below: accepting a new one is one more entry there. ``Hashers`` computes several
in one pass (sha256, the download cache's key, plus the md5 or sha512 a recipe states).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHUNK = 1 << 20  # 1 MiB: large enough to stream at disk speed, small enough to stay out of memory's way

# algorithm -> hex digits of its digest. sha1 is here for git's object ids (a repository's object format);
# md5 for publishers that list nothing stronger (it verifies a download against mistakes, not an attacker:
# the cache key stays sha256 either way).
HEX_LENGTHS = {"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}
DEFAULT_ALGORITHM = "sha256"
_HEX = re.compile(r"[0-9a-f]+")


class Hasher:
    """A running digest of bytes fed in order (a download, a file read in chunks)."""

    def __init__(self, algorithm: str = DEFAULT_ALGORITHM):
        self.algorithm = _known(algorithm)
        self._hash = hashlib.new(self.algorithm)

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def checksum(self) -> Checksum:
        return Checksum(self.algorithm, self.hexdigest())


class Hashers:
    """Several running digests of the same bytes, fed once: always ``DEFAULT_ALGORITHM`` (sha256, the
    download cache's key), plus each algorithm in ``extra``."""

    def __init__(self, extra: Iterable[str] = ()):
        names = [DEFAULT_ALGORITHM, *sorted({a.lower() for a in extra} - {DEFAULT_ALGORITHM})]
        self._hashers = {name: Hasher(name) for name in names}

    @property
    def algorithms(self) -> tuple[str, ...]:
        return tuple(self._hashers)

    def update(self, data: bytes) -> None:
        for hasher in self._hashers.values():
            hasher.update(data)

    def hexdigests(self) -> dict[str, str]:
        return {name: hasher.hexdigest() for name, hasher in self._hashers.items()}

    def fresh(self) -> Hashers:
        """The same algorithms, with nothing fed yet (a download that starts over)."""
        return Hashers(self.algorithms)


def mismatches(expected: Mapping[str, str], got: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(algorithm, expected, got) for every expected digest that ``got`` contradicts or lacks; sha256 first."""
    found = []
    for algorithm in sorted(expected, key=lambda a: (a != DEFAULT_ALGORITHM, a)):
        want, have = expected[algorithm].lower(), got.get(algorithm, "")
        if have != want:
            found.append((algorithm, want, have or "not computed"))
    return found


def hash_file_all(path: Path, algorithms: Iterable[str], *, chunk: int = CHUNK) -> dict[str, str]:
    """sha256 and each of ``algorithms`` of a file, in one read."""
    return _read_into(path, Hashers(algorithms), chunk).hexdigests()


@dataclass(frozen=True)
class Checksum:
    algorithm: str
    hexdigest: str

    def __post_init__(self) -> None:
        _known(self.algorithm)
        digits = HEX_LENGTHS[self.algorithm]
        if len(self.hexdigest) != digits or not _HEX.fullmatch(self.hexdigest):
            raise ValueError(f"a {self.algorithm} digest is {digits} lower-case hex digits, not {self.hexdigest!r}")

    @classmethod
    def parse(cls, text: str) -> Checksum:
        """``sha256:<hex>`` (any known algorithm), or a bare 64-digit hex digest, which is a sha256.
        Upper-case hex is accepted and stored lower-case; anything else is a ValueError naming the rule."""
        algorithm, sep, digest = text.strip().partition(":")
        if not sep:
            algorithm, digest = DEFAULT_ALGORITHM, text.strip()
        return cls(algorithm.lower(), digest.lower())

    def matches(self, hexdigest: str) -> bool:
        return self.hexdigest == hexdigest.lower()

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hexdigest}"


def hash_bytes(data: bytes, algorithm: str = DEFAULT_ALGORITHM) -> str:
    """The hex digest of ``data``."""
    hasher = Hasher(algorithm)
    hasher.update(data)
    return hasher.hexdigest()


def hash_text(text: str, algorithm: str = DEFAULT_ALGORITHM) -> str:
    """The hex digest of ``text`` as UTF-8 (cache keys from URLs, digests of canonical JSON)."""
    return hash_bytes(text.encode(), algorithm)


def hash_file(path: Path, algorithm: str = DEFAULT_ALGORITHM, *, chunk: int = CHUNK) -> str:
    """The hex digest of a file, read in ``chunk``-sized pieces (never whole into memory)."""
    return _read_into(path, Hasher(algorithm), chunk).hexdigest()


def _read_into(path: Path, hasher: Any, chunk: int) -> Any:
    """``hasher`` (a Hasher or Hashers) fed the file's bytes, ``chunk`` at a time (never whole into memory)."""
    with open(path, "rb") as f:
        while data := f.read(chunk):
            hasher.update(data)
    return hasher


def _known(algorithm: str) -> str:
    if algorithm not in HEX_LENGTHS:
        raise ValueError(f"unknown digest algorithm {algorithm!r}; known: {', '.join(sorted(HEX_LENGTHS))}")
    return algorithm
