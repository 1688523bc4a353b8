"""Digests: the one module that hashes bytes (hashlib lives here and nowhere else).

A ``Checksum`` is a value — an algorithm and a hex digest — written ``sha256:<hex>`` (a bare
64-digit hex string is a sha256, as recipes and lock files have always written them). Files
and downloads are hashed as they stream, through a ``Hasher``. The algorithms this tool knows
are the table below: accepting a new one (md5 for an old mirror, say) is one more entry there.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20  # 1 MiB: large enough to stream at disk speed, small enough to stay out of memory's way

# algorithm -> hex digits of its digest. sha1 is here for git's object ids (a repository's object format).
HEX_LENGTHS = {"sha1": 40, "sha256": 64, "sha512": 128}
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
    hasher = Hasher(algorithm)
    with open(path, "rb") as f:
        while data := f.read(chunk):
            hasher.update(data)
    return hasher.hexdigest()


def _known(algorithm: str) -> str:
    if algorithm not in HEX_LENGTHS:
        raise ValueError(f"unknown digest algorithm {algorithm!r}; known: {', '.join(sorted(HEX_LENGTHS))}")
    return algorithm
