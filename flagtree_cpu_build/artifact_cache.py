"""The per-user download cache: verified files keyed by sha256, shared by every workspace.

Layout (``$FLAGTREE_CPU_CACHE_DIR``, else ``$XDG_CACHE_HOME/flagtree-cpu``, then
``downloads/``)::

    CACHEDIR.TAG             tells backup tools this is a cache
    blobs/<sha256>           complete, verified files (published by an atomic rename)
    blobs/<sha256>.json      where each came from
    urls/<sha256 of URL>     the sha256 first seen at a URL (trust on first use, per user)
    partial/<key>.part       downloads in progress (resumable) and their .source notes
    locks/<key>.lock         one process downloads a file; the others wait and reuse it

Nothing here is ever half-written: a blob appears complete or not at all. Nothing is recorded
for bytes that have not unpacked: a download (or an import) becomes a blob, with its notes, only
after its tarball unpacked, so a server that once served a broken file cannot poison the cache.
A note found damaged (a folder in its place, garbage inside) is rebuilt with a warning; a folder
with contents where a file belongs is left alone and named.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .atomic import write_atomic
from .digest import Hashers, hash_text
from .download import CHUNK, discard_part, make_way, source_note
from .locking import exclusive
from .partials import PartialFolder, sweep
from .ui import UI

_CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                 "# This file is a cache directory tag created by flagtree-cpu.\n"
                 "# For information about cache directory tags see https://bford.info/cachedir/\n")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def url_key(url: str) -> str:
    return hash_text(url)[:32]


class ArtifactCache:
    def __init__(self, root: Path, ui: UI | None):
        self.root = root
        self.ui = ui

    def _ensure(self) -> None:
        for sub in ("blobs", "urls", "partial", "locks"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        tag = self.root / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text(_CACHEDIR_TAG)

    def blob(self, sha256: str) -> Path | None:
        sha = sha256.lower()
        path = self.root / "blobs" / sha
        return path if _SHA256.fullmatch(sha) and path.is_file() else None

    def sha_seen_at(self, url: str) -> str | None:
        """The sha256 first seen at ``url`` (trust on first use); None when unknown or the note is damaged
        (it is rewritten by the next download)."""
        note = self.root / "urls" / url_key(url)
        if not os.path.lexists(note):
            return None
        try:
            sha = note.read_text().strip()
        except (OSError, UnicodeDecodeError):
            sha = ""
        if _SHA256.fullmatch(sha):
            return sha
        self._warn(f"the download cache note {note} is damaged; it is ignored and rewritten by the next download")
        return None

    def part_path(self, url: str) -> Path:
        return self.root / "partial" / f"{url_key(url)}.part"

    def sweep(self) -> None:
        """Imports that a killed run left half-copied."""
        sweep(self.root / "partial", self._info, self._warn)

    @contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Held while downloading or publishing ``name``: a second process waits, then reuses."""
        self._ensure()
        lock = self.root / "locks" / f"{name}.lock"
        make_way(lock, self._warn)
        with exclusive(lock, on_wait=self._info):
            yield

    def add(self, part: Path, sha256: str, url: str, served_from: str) -> Path:
        """Move a complete file whose tarball unpacked into the cache (atomically) and remember its URL."""
        self._ensure()
        blob = self.root / "blobs" / sha256
        make_way(blob, self._warn)
        os.replace(part, blob)
        source_note(part).unlink(missing_ok=True)  # a download's note goes with its part
        meta = {"url": url, "served_from": served_from, "size": blob.stat().st_size, "added": time.time()}
        _write_atomic(blob.with_name(blob.name + ".json"), json.dumps(meta, indent=2), self._warn)
        _write_atomic(self.root / "urls" / url_key(url), sha256 + "\n", self._warn)
        return blob

    def mend_notes(self, sha256: str, url: str, served_from: str) -> None:
        """A blob in use whose notes are damaged (a folder in their place, garbage inside) gets them back."""
        blob = self.root / "blobs" / sha256
        meta = blob.with_name(blob.name + ".json")
        try:
            valid = isinstance(json.loads(meta.read_text()), dict)
        except (OSError, ValueError, UnicodeDecodeError):
            valid = False
        if not valid:
            self._warn(f"the download cache note {meta} was damaged; it is written again")
            meta_text = json.dumps({"url": url, "served_from": served_from, "size": blob.stat().st_size,
                                    "added": time.time()}, indent=2)
            _write_atomic(meta, meta_text, self._warn)
        if self.sha_seen_at(url) != sha256:
            _write_atomic(self.root / "urls" / url_key(url), sha256 + "\n", self._warn)

    def forget(self, sha256: str, url: str) -> None:
        """Drop a blob whose tarball turned out not to unpack, and the note that led to it."""
        blob = self.root / "blobs" / sha256
        for path in (blob, blob.with_name(blob.name + ".json")):
            if path.is_file() or path.is_symlink():
                path.unlink()
        if self.sha_seen_at(url) == sha256:
            (self.root / "urls" / url_key(url)).unlink()

    def drop_part(self, url: str) -> None:
        discard_part(self.part_path(url))

    def import_file(self, source: Path, algorithms: Iterable[str] = ()) -> tuple[dict[str, str], PartialFolder, Path]:
        """Copy a file the user downloaded into a folder of ours in the cache, hashing it on the way (one read):
        its sha256 and each of ``algorithms`` (the recipe's md5, sha512). Not yet trusted nor kept: the caller
        compares the digests, unpacks, then ``add``s the copy."""
        self._ensure()
        folder = PartialFolder.create(self.root / "partial" / "import")
        copy = folder.path / "tarball"
        digest = Hashers(algorithms)
        try:
            with open(source, "rb") as src, open(copy, "wb") as dst:
                while chunk := src.read(CHUNK):
                    dst.write(chunk)
                    digest.update(chunk)
        except BaseException:
            folder.remove()
            raise
        return digest.hexdigests(), folder, copy

    def _info(self, message: str) -> None:
        if self.ui is not None:
            self.ui.info(message)

    def _warn(self, message: str) -> None:
        if self.ui is not None:
            self.ui.warn(message)


def _write_atomic(path: Path, text: str, warn: Callable[[str], None]) -> None:
    make_way(path, warn)  # an empty folder where the note belongs goes; one with contents is named and kept
    write_atomic(path, text)
