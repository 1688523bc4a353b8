"""Resumable, verified downloads: the only module that speaks HTTP.

A download streams into a ``.part`` file while its sha256 — and the md5 or sha512 the
recipe states — is computed (one pass over the network bytes). After a dropped connection,
a timeout or an interrupted run it continues with ``Range: bytes=<part size>-``; the answer
must be ``206`` with a matching ``Content-Range``, and a server that ignores Range (``200``)
is read from the start again. Connection errors, timeouts and 5xx are retried with exponential backoff;
4xx never are. Candidate URLs (mirrors, then the original) are tried in order, each into a
``.part`` of its own: bytes from two URLs are never spliced, and a mirror that failed keeps
what it delivered for the next run. A ``.part`` is only ever deleted when its bytes are known
to be wrong (a digest mismatch, a tarball that does not unpack) or the server sends the file
again from the start; giving up, a full disk and Ctrl-C keep it, and the next run says
"resuming llvm at 59 MB of 812 MB". ``remote_size`` asks a server how large a file is, for a
dry run's estimate, without downloading it. ``FLAGTREE_CPU_NO_NETWORK=1`` (tests of air-gapped
machines) makes every connection fail at once, loopback included (``file://`` still works).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .atomic import write_atomic
from .digest import Hashers, mismatches
from .diskspace import disk_full, is_disk_full
from .errors import ArtifactError
from .growing import GrowingFile
from .limits import stall_timeout_s
from .progress import ProgressTask, human_bytes
from .ui import UI

CHUNK = 1 << 20  # the same as growing.CHUNK
_HEADERS = {"User-Agent": "flagtree-cpu",
            # identity: the digest and the size are of the file's bytes, never a transfer-compressed form
            "Accept-Encoding": "identity"}
_PROBE_TIMEOUT_S = (3, 5)  # connect, read: a dry run's size question must not hold the dry run up
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
NO_NETWORK_ENV = "FLAGTREE_CPU_NO_NETWORK"
_SWITCHED_OFF = f"the network is switched off ({NO_NETWORK_ENV}=1); no connection was opened"


def network_switched_off() -> bool:
    return os.environ.get(NO_NETWORK_ENV, "").strip() not in ("", "0")  # anything but empty or 0


@dataclass(frozen=True)
class Downloaded:
    part: Path  # complete, not yet verified against an expected digest
    sha256: str
    size: int
    url: str  # the URL that served the bytes
    digests: dict[str, str] = field(default_factory=dict)  # sha256 and every other algorithm computed


class _Failure(Exception):
    """This candidate URL cannot serve the file; try the next one."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.reason, self.status = reason, status


class _Part:
    """The .part file and the digests of the bytes in it, kept in step while streaming.

    Only a resumed download re-reads bytes from disk (the part left by an earlier run);
    bytes that arrive are hashed as they are written.
    """

    def __init__(self, path: Path, watcher: GrowingFile | None = None, algorithms: Iterable[str] = ()):
        self.path = path
        self.digest = Hashers(algorithms)
        self.size = 0
        self.watcher = watcher

    def sync_with_disk(self) -> int:
        on_disk = self.path.stat().st_size if self.path.exists() else 0
        if on_disk != self.size:
            self.digest, self.size = self.digest.fresh(), 0
            if on_disk:
                with open(self.path, "rb") as f:
                    while chunk := f.read(CHUNK):
                        self.digest.update(chunk)
                        self.size += len(chunk)
        return self.size

    def restart(self) -> None:
        self.path.unlink(missing_ok=True)
        self.digest, self.size = self.digest.fresh(), 0
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

    def downloaded(self, url: str) -> Downloaded:
        digests = self.digest.hexdigests()
        return Downloaded(self.path, digests["sha256"], self.size, url, digests)


@dataclass
class Downloader:
    ui: UI
    attempts: int = 5
    backoff_s: float = 0.5  # 0.5, 1, 2, 4 ... seconds between attempts
    connect_timeout_s: float = 15.0
    read_timeout_s: float = field(default_factory=stall_timeout_s)  # FLAGTREE_CPU_STALL_TIMEOUT
    watcher: GrowingFile | None = None  # told as the .part file grows or starts again
    # told (url, total, bytes already here) before a body is written: the free-space check
    on_size: Callable[[str, int | None, int], None] | None = None

    def fetch(self, urls: Sequence[str], part_for: Callable[[str], Path], *, label: str,
              expected: Mapping[str, str] | None = None) -> Downloaded:
        """Download the first candidate that works into its own part file; every digest in ``expected``
        (algorithm -> hex) must match. sha256 is always computed: it is the download cache's key."""
        expected = {k.lower(): v.lower() for k, v in (expected or {}).items()}
        failures: list[str] = []
        for url in urls:
            part = part_for(url)
            try:
                result = self._fetch_one(url, part, label, expected)
            except _Failure as failure:
                failures.append(f"{url}: {failure.reason}{_kept(part)}")
                continue
            except OSError as exc:
                if is_disk_full(exc):
                    raise disk_full(part, None, f"downloading {label}", None,
                                    keep_note=_kept(part).lstrip("; ")) from None
                raise
            wrong = mismatches(expected, result.digests)
            if wrong:
                discard_part(part)
                said = "; ".join(f"{algorithm} mismatch — expected {want}, got {got}" for algorithm, want, got in wrong)
                failures.append(f"{url}: {said} ({result.size} bytes); the partial file was removed")
                continue
            for other in urls:  # the file is here: what other candidates left is of no further use
                if other != url:
                    with contextlib.suppress(ArtifactError):  # a folder in its place is named another time
                        discard_part(part_for(other))
            return result
        raise _all_failed(label, failures)

    # -- one candidate ------------------------------------------------------------------------

    def _fetch_one(self, url: str, path: Path, label: str, expected: Mapping[str, str]) -> Downloaded:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = _Part(path, self.watcher, expected)
        local = _local_path(url)
        if local is not None:
            if self.watcher is not None:
                self.watcher.follow(path)
            return self._copy_local(url, local, part, label)
        if network_switched_off():
            raise _Failure(_SWITCHED_OFF)
        import requests
        import urllib3

        session = requests.Session()
        session.headers.update(_HEADERS)
        note = self._resume_point(url, part, label)
        if self.watcher is not None:  # only now: the unpacker must never open bytes about to be discarded
            self.watcher.follow(path)
        last = "server errors"
        with self.ui.progress(f"downloading {label}", total=note.get("total"), unit="bytes") as task:
            for attempt in range(self.attempts):
                if attempt:
                    delay = min(30.0, self.backoff_s * 2 ** (attempt - 1))
                    self.ui.info(f"{label}: {last}; trying again in {delay:g} s" + _from(part.size))
                    time.sleep(delay)
                try:
                    if self._attempt(session, url, part, task, note):
                        break
                except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as exc:
                    # refused, reset, timed out, or cut in the middle of the body: the .part is kept
                    last = _short(exc)
            else:
                raise _Failure(f"gave up after {self.attempts} attempts ({last})")
        # the note stays with the part until the part becomes a blob: a complete file that cannot be unpacked
        # yet (a limit, a full disk) is resumed as complete by the next run, not downloaded again
        return part.downloaded(url)

    def _copy_local(self, url: str, local: Path, part: _Part, label: str) -> Downloaded:
        if not local.is_file():
            raise _Failure("no such file")
        total = local.stat().st_size
        if self.on_size is not None:
            self.on_size(url, total, 0)
        with self.ui.progress(f"copying {label}", total=total, unit="bytes") as task, open(local, "rb") as src:
            part.restart()
            part.copy_from(iter(lambda: src.read(CHUNK), b""), "wb", task, total)
        return part.downloaded(url)

    def _resume_point(self, url: str, part: _Part, label: str) -> dict[str, Any]:
        """The .part's note, after checking the bytes are this URL's; says so when a download resumes."""
        make_way(part.path, self.ui.warn)
        note = read_source_note(part.path, self.ui)
        if part.path.exists() and note.get("url") != url:
            part.restart()  # bytes from another URL (or of unknown origin) cannot be continued from this one
            note = {}
        note = {"url": url, "total": note.get("total")}
        write_source_note(part.path, note)
        have = part.path.stat().st_size if part.path.exists() else 0
        total = note["total"]
        if have and total and have >= total:
            self.ui.info(f"{label}: the download an earlier run kept is complete ({human_bytes(have)}); checking it")
        elif have:
            self.ui.info(f"resuming {label} at {human_bytes(have)}" + (f" of {human_bytes(total)}" if total else ""))
        return note

    def _attempt(self, session: Any, url: str, part: _Part, task: ProgressTask, note: dict[str, Any]) -> bool:
        """One request; True when the file is complete, False to retry (5xx). Raises _Failure on 4xx."""
        offset = part.sync_with_disk()
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        response = session.get(url, stream=True, headers=headers,
                               timeout=(self.connect_timeout_s, self.read_timeout_s))
        with response:
            status = response.status_code
            if status == 416 and offset:
                if _total_from(response.headers.get("Content-Range", "")) == offset:
                    self._learned(url, part, note, offset)
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
                total = None if not match or match.group(3) == "*" else int(match.group(3))
                if not match or int(match.group(1)) != offset or (note["total"] and total != note["total"]):
                    part.restart()  # not the bytes we asked for, or the file changed: start over
                    return False
                mode = "ab"
            else:  # 200: a fresh download, or a server that ignores Range: take it from the start
                part.restart()
                length = response.headers.get("Content-Length")
                mode, total = "wb", int(length) if length and length.isdigit() else None
            self._learned(url, part, note, total)
            part.copy_from(_received(response.raw), mode, task, total)
            return total is None or part.size >= total  # a body that ended early is resumed

    def _learned(self, url: str, part: _Part, note: dict[str, Any], total: int | None) -> None:
        """The server said the size: remember it with the part, tell the unpacker, check the free space."""
        if total and note.get("total") != total:
            note["total"] = total
            write_source_note(part.path, note)
        if self.watcher is not None:
            self.watcher.sized(total)
        if self.on_size is not None:
            self.on_size(url, total, part.size)


def _received(raw: Any) -> Iterator[bytes]:
    """Body bytes as they arrive (read1): when the connection drops, everything that came is kept."""
    while data := raw.read1(CHUNK, decode_content=False):
        yield data


def _all_failed(label: str, failures: list[str]) -> ArtifactError:
    if failures and all(_SWITCHED_OFF in f for f in failures):
        return ArtifactError(f"could not download {label}: {_SWITCHED_OFF}", details=tuple(failures), fix=f"unset "
                             f"{NO_NETWORK_ENV}, or bring it without the network: flagtree-cpu bundle import FILE")
    mismatch = any(" mismatch — expected " in f for f in failures)
    kept = any("is kept" in f for f in failures)
    return ArtifactError(
        f"could not download {label}" + (": the bytes did not match the expected digest" if mismatch else ""),
        details=tuple(failures),
        fix=("the file changed upstream or a mirror serves another file: check the recipe's digest (sha256, md5 "
             "or sha512) and the mirror"
             if mismatch else
             ("run the same command again to resume; " if kept else "") +
             "check the URL, or use a mirror (--mirror PREFIX=REPLACEMENT or FLAGTREE_CPU_MIRRORS), or download it "
             "by any means and import it: flagtree-cpu fetch --from FILE"),
    )


def _short(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text[:160]}{'...' if len(text) > 160 else ''}"


def _from(size: int) -> str:
    return f", resuming at {human_bytes(size)}" if size else ""


def _kept(part: Path) -> str:
    size = part.stat().st_size if part.is_file() else 0
    return f"; the partial download ({human_bytes(size)}, {part}) is kept" if size else ""


def source_note(part: Path) -> Path:
    """Which URL a .part file came from, and the file's size; resuming from another URL could splice two files."""
    return part.with_name(part.name + ".source")


def parse_source_note(part: Path) -> dict[str, Any] | None:
    """The .part's note, read only: {} when there is none, None when it is damaged (a folder, not JSON)."""
    note = source_note(part)
    if not note.exists() and not note.is_symlink():
        return {}
    try:
        text = note.read_text()
        data = json.loads(text) if text.lstrip().startswith("{") else {"url": text.strip()}  # an older note: the URL
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    valid = isinstance(data, dict) and isinstance(data.get("url"), str) and \
        isinstance(data.get("total", 0), (int, type(None)))
    return data if valid else None


def read_source_note(part: Path, ui: UI | None) -> dict[str, Any]:
    """The .part's note; a damaged one costs the part, which is then of unknown origin."""
    data = parse_source_note(part)
    if data is not None:
        return data
    if ui is not None and part.exists():
        ui.warn(f"{source_note(part)}, which records where {part.name} came from, is damaged; the partial "
                "download is discarded and starts again")
    discard_part(part)
    return {}


def write_source_note(part: Path, note: dict[str, Any]) -> None:
    path = source_note(part)
    make_way(path)
    write_atomic(path, json.dumps(note))


def discard_part(part: Path) -> None:
    """Forget a partial download and its note (their bytes are wrong, or of unknown origin)."""
    for path in (part, source_note(part)):
        make_way(path)
        path.unlink(missing_ok=True)


def make_way(path: Path, warn: Callable[[str], None] | None = None) -> None:
    """Where the cache keeps a file, an empty folder is removed (with a warning); a folder with contents is
    not provably ours, so it is named and left alone."""
    if not path.is_dir() or path.is_symlink():
        return
    try:
        path.rmdir()
    except OSError:
        raise ArtifactError(f"{path} should be a file of flagtree-cpu's download cache but is a folder with "
                            "contents; it is left alone", fix=f"look inside, then remove it: rm -r {path}") from None
    if warn is not None:
        warn(f"removed the empty folder {path}, which stood where the download cache keeps a file")


def _local_path(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(unquote(urlparse(url).path))
    if "://" not in url:
        return Path(url).expanduser()
    return None


def _total_from(content_range: str) -> int | None:
    match = re.search(r"/(\d+)$", content_range)
    return int(match.group(1)) if match else None


def remote_size(url: str) -> int | None:
    """The size of the file at an http(s) URL, asked without downloading it: the Content-Length of a
    HEAD request (redirects followed, short timeouts); a server that leaves it out is asked for one
    byte, whose Content-Range names the whole size. None when the server does not say, cannot be
    reached, or the URL is not http(s)."""
    if not url.startswith(("http://", "https://")) or network_switched_off():
        return None
    import requests

    try:
        response = requests.head(url, allow_redirects=True, timeout=_PROBE_TIMEOUT_S, headers=_HEADERS)
        length = response.headers.get("Content-Length", "")
        if response.ok and length.isdigit() and int(length) > 0:
            return int(length)
        with requests.get(url, headers={**_HEADERS, "Range": "bytes=0-0"}, stream=True,
                          timeout=_PROBE_TIMEOUT_S) as probe:
            total = probe.headers.get("Content-Range", "").rpartition("/")[2]
            return int(total) if probe.status_code == 206 and total.isdigit() else None
    except requests.RequestException:
        return None
