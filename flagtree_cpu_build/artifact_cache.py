"""The per-user download cache: verified files keyed by sha256, shared by every workspace.

Layout (``$FLAGTREE_CPU_CACHE_DIR``, else ``$XDG_CACHE_HOME/flagtree-cpu``, then
``downloads/``)::

    CACHEDIR.TAG             tells backup tools this is a cache
    blobs/<sha256>           complete, verified files (published by an atomic rename)
    blobs/<sha256>.json      where each came from
    urls/<sha256 of URL>     the sha256 first seen at a URL (trust on first use, per user)
    partial/<key>.part       downloads in progress (resumable) and their .source notes
    locks/<key>.lock         one process downloads a file; the others wait and reuse it

Nothing here is ever half-written: a blob appears complete or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .download import CHUNK
from .locking import exclusive
from .ui import UI

_CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                 "# This file is a cache directory tag created by flagtree-cpu.\n"
                 "# For information about cache directory tags see https://bford.info/cachedir/\n")


def url_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()[:32]


class ArtifactCache:
    def __init__(self, root: Path, ui: UI):
        self.root = root
        self.ui = ui

    def _ensure(self) -> None:
        for sub in ("blobs", "urls", "partial", "locks"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        tag = self.root / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text(_CACHEDIR_TAG)

    def blob(self, sha256: str) -> Path | None:
        path = self.root / "blobs" / sha256.lower()
        return path if path.is_file() else None

    def sha_seen_at(self, url: str) -> str | None:
        note = self.root / "urls" / url_key(url)
        return note.read_text().strip() if note.is_file() else None

    def part_path(self, url: str) -> Path:
        return self.root / "partial" / f"{url_key(url)}.part"

    @contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Held while downloading or publishing ``name``: a second process waits, then reuses."""
        self._ensure()
        with exclusive(self.root / "locks" / f"{name}.lock", on_wait=self.ui.info):
            yield

    def add(self, part: Path, sha256: str, url: str, served_from: str) -> Path:
        """Move a complete, verified file into the cache (atomically) and remember its URL."""
        self._ensure()
        blob = self.root / "blobs" / sha256
        os.replace(part, blob)
        meta = {"url": url, "served_from": served_from, "size": blob.stat().st_size, "added": time.time()}
        _write_atomic(blob.with_name(blob.name + ".json"), json.dumps(meta, indent=2))
        _write_atomic(self.root / "urls" / url_key(url), sha256 + "\n")
        return blob

    def import_file(self, source: Path, url: str) -> tuple[str, Path]:
        """Copy a file the user downloaded into the cache; returns (sha256, blob). Not yet trusted:
        the caller compares the digest with what it expects."""
        self._ensure()
        tmp = self.root / "partial" / f"import-{os.getpid()}.part"
        digest = hashlib.sha256()
        with open(source, "rb") as src, open(tmp, "wb") as dst:  # one read of the source
            while chunk := src.read(CHUNK):
                dst.write(chunk)
                digest.update(chunk)
        sha = digest.hexdigest()
        if self.blob(sha):
            tmp.unlink()
            return sha, self.root / "blobs" / sha
        return sha, self.add(tmp, sha, url, served_from=str(source))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
