"""Resumable, verified downloads: the only module that speaks HTTP.

A download streams into a ``.part`` file while its sha256 is computed (one pass over
the network bytes). After a dropped connection, a timeout or an interrupted run it
continues with ``Range: bytes=<part size>-``; the answer must be ``206`` with a
matching ``Content-Range``, and a server that ignores Range (``200``) is read from the
start again. Connection errors, timeouts and 5xx are retried with exponential backoff;
4xx never are. Candidate URLs (mirrors, then the original) are tried in order.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .errors import ArtifactError
from .ui import UI, ProgressTask

CHUNK = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass(frozen=True)
class Downloaded:
    part: Path  # complete, not yet verified against an expected digest
    sha256: str
    size: int
    url: str  # the URL that served the bytes


class _Failure(Exception):
    """This candidate URL cannot serve the file; try the next one."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.reason, self.status = reason, status


class _Part:
    """The .part file and the sha256 of the bytes in it, kept in step while streaming.

    Only a resumed download re-reads bytes from disk (the part left by an earlier run);
    bytes that arrive are hashed as they are written.
    """

    def __init__(self, path: Path, watcher: GrowingFile | None = None):
        self.path = path
        self.digest = hashlib.sha256()
        self.size = 0
        self.watcher = watcher

    def sync_with_disk(self) -> int:
        on_disk = self.path.stat().st_size if self.path.exists() else 0
        if on_disk != self.size:
            self.digest, self.size = hashlib.sha256(), 0
            if on_disk:
                with open(self.path, "rb") as f:
                    while chunk := f.read(CHUNK):
                        self.digest.update(chunk)
                        self.size += len(chunk)
        return self.size

    def restart(self) -> None:
        self.path.unlink(missing_ok=True)
        self.digest, self.size = hashlib.sha256(), 0
        if self.watcher is not None:
            self.watcher.restarted()

    def copy_from(self, chunks: Iterable[bytes], mode: str, task: ProgressTask, total: int | None) -> None:
        with open(self.path, mode) as out:
            for chunk in chunks:
                out.write(chunk)
                self.digest.update(chunk)
                self.size += len(chunk)
                if self.watcher is not None:
                    out.flush()  # the reader of the growing file reads it through its own descriptor
                    self.watcher.grew()
                task.update(self.size, total)


class StreamStale(Exception):
    """The .part file was started again after the reader had read from it: what it read is void."""


class StreamAborted(Exception):
    """The download failed or was stopped; the reader's consumer must give up."""


class GrowingFile:
    """A reader of the ``.part`` file while the download writes it, so the tarball can be unpacked as it
    arrives (``curl | tar -xz``, with resume): at the end of the bytes written so far it waits for more,
    until the download says it is complete (then end of file) or failed. If the download has to start the
    file again after bytes were read, reading raises StreamStale and the caller unpacks the finished file
    instead. Nothing read this way is trusted until the whole file's sha256 is verified."""

    def __init__(self, path: Path):
        self.path = path
        self.consumed = 0
        self._file: Any = None
        self._cond = threading.Condition()
        self._complete = self._aborted = self._stale = False

    # the download's side
    def grew(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def restarted(self) -> None:
        with self._cond:
            if self.consumed:
                self._stale = True
            elif self._file is not None:  # nothing read yet: follow the new file instead
                self._file.close()
                self._file = None
            self._cond.notify_all()

    def complete(self) -> None:
        with self._cond:
            self._complete = True
            self._cond.notify_all()

    def abort(self) -> None:
        with self._cond:
            self._aborted = True
            self._cond.notify_all()

    # the unpacker's side
    def read(self, size: int = -1) -> bytes:
        with self._cond:
            while True:
                if self._stale:
                    raise StreamStale(f"{self.path} was started again")
                if self._aborted:
                    raise StreamAborted(f"the download into {self.path} stopped")
                if self._file is None and self.path.exists():
                    self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()
                if self._file is not None:
                    data = self._file.read(size if size and size > 0 else CHUNK)
                    if data:
                        self.consumed += len(data)
                        return data
                if self._complete:
                    return b""
                self._cond.wait(0.5)

    def close(self) -> None:
        with self._cond:
            if self._file is not None:
                self._file.close()
                self._file = None


@dataclass
class Downloader:
    ui: UI
    attempts: int = 5
    backoff_s: float = 0.5  # 0.5, 1, 2, 4 ... seconds between attempts
    connect_timeout_s: float = 15.0
    read_timeout_s: float = 60.0
    watcher: GrowingFile | None = None  # told as the .part file grows or starts again

    def fetch(self, urls: Sequence[str], part: Path, *, label: str, expected_sha: str | None = None) -> Downloaded:
        """Download the first candidate that works into ``part``; verify ``expected_sha`` if given."""
        failures: list[str] = []
        for url in urls:
            try:
                result = self._fetch_one(url, part, label)
            except _Failure as failure:
                failures.append(f"{url}: {failure.reason}")
                continue
            if expected_sha and result.sha256 != expected_sha.lower():
                part.unlink(missing_ok=True)
                _source_note(part).unlink(missing_ok=True)
                failures.append(f"{url}: sha256 mismatch — expected {expected_sha.lower()}, got {result.sha256} "
                                f"({result.size} bytes); the partial file was removed")
                continue
            return result
        mismatch = any("sha256 mismatch" in f for f in failures)
        raise ArtifactError(
            f"could not download {label}" + (": the bytes did not match the expected sha256" if mismatch else ""),
            details=tuple(failures),
            fix=("the file changed upstream or a mirror serves another file: check the recipe's sha256 and the "
                 "mirror" if mismatch else
                 "check the URL, or use a mirror (--mirror PREFIX=REPLACEMENT or FLAGTREE_CPU_MIRRORS), or download "
                 "it by any means and import it: flagtree-cpu fetch --from FILE"),
        )

    # -- one candidate ------------------------------------------------------------------------

    def _fetch_one(self, url: str, path: Path, label: str) -> Downloaded:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = _Part(path, self.watcher)
        local = _local_path(url)
        if local is not None:
            if not local.is_file():
                raise _Failure("no such file")
            total = local.stat().st_size
            with self.ui.progress(f"copying {label}", total=total, unit="bytes") as task, open(local, "rb") as src:
                part.restart()
                part.copy_from(iter(lambda: src.read(CHUNK), b""), "wb", task, total)
            return Downloaded(path, part.digest.hexdigest(), part.size, url)

        import requests
        import urllib3

        session = requests.Session()
        # identity: the sha256 is over the file's bytes, never a transfer-compressed form of them
        session.headers.update({"User-Agent": "flagtree-cpu", "Accept-Encoding": "identity"})
        note = _source_note(path)
        if path.exists() and (not note.exists() or note.read_text() != url):
            part.restart()  # bytes from another URL cannot be continued from this one
        note.write_text(url)
        last = "server errors"
        with self.ui.progress(f"downloading {label}", unit="bytes") as task:
            for attempt in range(self.attempts):
                if attempt:
                    time.sleep(min(30.0, self.backoff_s * 2 ** (attempt - 1)))
                try:
                    if self._attempt(session, url, part, task):
                        break
                except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as exc:
                    # refused, reset, timed out, or cut in the middle of the body: the .part is kept
                    last = f"{type(exc).__name__}: {exc}"
            else:
                raise _Failure(f"gave up after {self.attempts} attempts ({last})")
        note.unlink(missing_ok=True)
        return Downloaded(path, part.digest.hexdigest(), part.size, url)

    def _attempt(self, session: Any, url: str, part: _Part, task: ProgressTask) -> bool:
        """One request; True when the file is complete, False to retry (5xx). Raises _Failure on 4xx."""
        offset = part.sync_with_disk()
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        response = session.get(url, stream=True, headers=headers,
                               timeout=(self.connect_timeout_s, self.read_timeout_s))
        with response:
            status = response.status_code
            if status == 416 and offset:
                if _total_from(response.headers.get("Content-Range", "")) == offset:
                    return True  # the previous run had already received everything
                part.restart()
                return False
            if 400 <= status < 500:
                hint = {404: "not found", 403: "forbidden", 401: "needs credentials"}.get(status, "client error")
                raise _Failure(f"HTTP {status} ({hint}); not retried", status)
            if status >= 500:
                return False
            if status == 206:
                match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
                if not match or int(match.group(1)) != offset:
                    part.restart()  # not the bytes we asked for: start over with a plain request
                    return False
                mode, total = "ab", None if match.group(3) == "*" else int(match.group(3))
            else:  # 200: a fresh download, or a server that ignores Range: take it from the start
                part.restart()
                length = response.headers.get("Content-Length")
                mode, total = "wb", int(length) if length and length.isdigit() else None
            part.copy_from(_received(response.raw), mode, task, total)
            return total is None or part.size >= total  # a body that ended early is resumed


def _received(raw: Any) -> Iterator[bytes]:
    """Body bytes as they arrive (read1): when the connection drops, everything that came is kept."""
    while data := raw.read1(CHUNK, decode_content=False):
        yield data


def _source_note(part: Path) -> Path:
    """Which URL a .part file came from; resuming from another URL could splice two files."""
    return part.with_name(part.name + ".source")


def _local_path(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(unquote(urlparse(url).path))
    if "://" not in url:
        return Path(url).expanduser()
    return None


def _total_from(content_range: str) -> int | None:
    match = re.search(r"/(\d+)$", content_range)
    return int(match.group(1)) if match else None


def hash_file(path: Path) -> tuple[str, int]:
    """(sha256, size) of a file already on disk (imports, verification)."""
    part = _Part(path)
    part.sync_with_disk()
    return part.digest.hexdigest(), part.size
