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
``max_bytes`` (a wheelhouse manifest's cap, a wheel's listed size) is held while reading: a larger
announced size is refused before the body, a body without a length stops one byte past it, and that
``.part`` is removed. A local file (a path, ``file://``) is read only when it is a regular file.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .digest import Hashers, mismatches
from .diskspace import disk_full, is_disk_full
from .download_failures import NO_NETWORK_ENV, SWITCHED_OFF, unresolved
from .download_failures import all_failed as _all_failed
from .download_failures import from_size as _from
from .download_failures import kept as _kept
from .download_failures import short as _short
from .download_notes import (  # noqa: F401  (their home for the download cache and the wheelhouse too)
    discard_part,
    make_way,
    parse_source_note,
    read_source_note,
    source_note,
    write_source_note,
)
from .errors import ArtifactError
from .growing import GrowingFile
from .limits import stall_timeout_s
from .progress import ProgressTask, human_bytes
from .regular_file import NotRegularFile, open_regular
from .ui import UI

CHUNK = 1 << 20  # the same as growing.CHUNK
_HEADERS = {"User-Agent": "flagtree-cpu",
            # identity: the digest and the size are of the file's bytes, never a transfer-compressed form
            "Accept-Encoding": "identity"}
_PROBE_TIMEOUT_S = (3, 5)  # connect, read: a dry run's size question must not hold the dry run up
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


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

    def __init__(self, reason: str, status: int | None = None, *, unresolved: str | None = None):
        super().__init__(reason)
        self.reason, self.status = reason, status
        self.unresolved = unresolved  # the host name that got no DNS answer, when that is the reason


class _TooLarge(_Failure):
    """More bytes than the caller's ``max_bytes`` (announced, or arrived): they are not the file asked for."""

    def __init__(self, max_bytes: int, said: str = "received more"):
        super().__init__(f"size mismatch — expected at most {max_bytes} bytes, {said}")


class _Part:
    """The .part file and the digests of the bytes in it, kept in step while streaming.

    Only a resumed download re-reads bytes from disk (the part left by an earlier run);
    bytes that arrive are hashed as they are written.
    """

    def __init__(self, path: Path, watcher: GrowingFile | None = None, algorithms: Iterable[str] = (),
                 max_bytes: int | None = None):
        self.path = path
        self.digest = Hashers(algorithms)
        self.size = 0
        self.watcher = watcher
        self.max_bytes = max_bytes

    def check_size(self, total: int | None) -> None:
        """An announced size over the limit is refused before its body is read."""
        if total is not None and self.max_bytes is not None and total > self.max_bytes:
            raise _TooLarge(self.max_bytes, f"the server announced {total}")

    def room(self) -> int:
        """How much to read next: a chunk, but never past one byte over the limit (which proves it is exceeded)."""
        return CHUNK if self.max_bytes is None else max(0, min(CHUNK, self.max_bytes + 1 - self.size))

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
        """``chunks`` are read while ``room()`` is left: at most one byte past the limit arrives, then it stops."""
        with open(self.path, mode) as out:
            for chunk in chunks:
                out.write(chunk)
                self.digest.update(chunk)
                self.size += len(chunk)
                if self.watcher is not None:
                    out.flush()  # the reader of the growing file reads it through its own descriptor
                    self.watcher.grew()
                task.update(self.size, total)
                if self.max_bytes is not None and self.size > self.max_bytes:
                    raise _TooLarge(self.max_bytes)

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
              expected: Mapping[str, str] | None = None, max_bytes: int | None = None) -> Downloaded:
        """Download the first candidate that works into its own part file; every digest in ``expected``
        (algorithm -> hex) must match. sha256 is always computed: it is the download cache's key. ``max_bytes``:
        a larger file is refused as soon as it is announced or arrives (at most ``max_bytes + 1`` are read)."""
        expected = {k.lower(): v.lower() for k, v in (expected or {}).items()}
        failures: list[str] = []
        unresolved: list[str] = []  # the hosts of the candidates that failed for want of a DNS answer
        for url in urls:
            part = part_for(url)
            try:
                result = self._fetch_one(url, part, label, expected, max_bytes)
            except _TooLarge as failure:  # its bytes are wrong: never resumed
                discard_part(part)
                failures.append(f"{url}: {failure.reason}; the partial file was removed")
                continue
            except _Failure as failure:
                failures.append(f"{url}: {failure.reason}{_kept(part)}")
                unresolved += [failure.unresolved] if failure.unresolved else []
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
        # no candidate resolved: the network is missing (or every name is wrong), which setup reports once for all
        raise _all_failed(label, failures, unresolved if len(unresolved) == len(failures) else ())

    # -- one candidate ------------------------------------------------------------------------

    def _fetch_one(self, url: str, path: Path, label: str, expected: Mapping[str, str],
                   max_bytes: int | None) -> Downloaded:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = _Part(path, self.watcher, expected, max_bytes)
        local = _local_path(url)
        if local is not None:
            if self.watcher is not None:
                self.watcher.follow(path)
            return self._copy_local(url, local, part, label)
        if network_switched_off():
            raise _Failure(SWITCHED_OFF)
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
                    if unresolved(exc):  # no DNS answer: no network here, or a wrong name; waiting changes neither
                        host = urlparse(url).hostname or url
                        raise _Failure(f"the host name {host} cannot be resolved (no network, or no DNS answer for "
                                       "it); not retried", unresolved=host) from None
                    # refused, reset, timed out, or cut in the middle of the body: the .part is kept
                    last = _short(exc)
                except (requests.RequestException, ValueError) as exc:  # a redirect to ftp:// or file://, a loop
                    # of redirects, a header no parser takes: what the server said cannot be followed
                    raise _Failure(f"its answer cannot be followed ({_short(exc)}); not retried") from None
            else:
                raise _Failure(f"gave up after {self.attempts} attempts ({last})")
        # the note stays with the part until the part becomes a blob: a complete file that cannot be unpacked
        # yet (a limit, a full disk) is resumed as complete by the next run, not downloaded again
        return part.downloaded(url)

    def _copy_local(self, url: str, local: Path, part: _Part, label: str) -> Downloaded:
        try:  # a FIFO or a device in a shared folder is refused before it is opened (it would block, or never end)
            source = open_regular(local)
        except FileNotFoundError:
            raise _Failure("no such file") from None
        except OSError as err:
            raise _Failure(str(err) if isinstance(err, NotRegularFile) else f"cannot read it ({err.strerror})") \
                from None
        with source as src:
            total = os.fstat(src.fileno()).st_size
            part.check_size(total)
            if self.on_size is not None:
                self.on_size(url, total, 0)
            with self.ui.progress(f"copying {label}", total=total, unit="bytes") as task:
                part.restart()
                part.copy_from(iter(lambda: src.read(part.room()), b""), "wb", task, total)
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
        if part.max_bytes is not None and offset > part.max_bytes:  # an earlier part of another file: start over
            part.restart()
            offset = 0
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
            part.check_size(total)
            self._learned(url, part, note, total)
            part.copy_from(_received(response.raw, part), mode, task, total)
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


def _received(raw: Any, part: _Part) -> Iterator[bytes]:
    """Body bytes as they arrive (read1): when the connection drops, everything that came is kept. Never more
    than the part has room for: a body without a length that does not end stops one byte past the limit."""
    while (room := part.room()) and (data := raw.read1(room, decode_content=False)):
        yield data


def _local_path(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(unquote(urlparse(url).path))
    if "://" not in url:
        return Path(url).expanduser()
    return None


def _total_from(content_range: str) -> int | None:
    match = re.search(r"/(\d+)$", content_range)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class RemoteSize:
    """What a server said of a file before it is downloaded (a dry run's question)."""

    size: int | None = None  # its size, when the server said it
    missing: bool = False  # the server said for certain that no file is there (404, 410 to the GET)
    why: str = ""  # without a size: what the server answered, or why it could not be asked


_GONE = {404: "not found", 410: "gone"}


def remote_size(url: str) -> int | None:
    """The size of the file at an http(s) URL (``ask_size``), None when it is not known."""
    return ask_size(url).size


def ask_size(url: str) -> RemoteSize:
    """Ask a server how large the file at an http(s) URL is, without downloading it: the Content-Length of a
    HEAD request (redirects followed, short timeouts); a server that leaves it out, or does not allow HEAD, is
    asked for one byte, whose Content-Range names the whole size. Only that GET's 404 or 410 says the file is
    missing, as the download would find it; a timeout, a 5xx, a refused connection decide nothing."""
    if not url.startswith(("http://", "https://")):
        return RemoteSize(why="not an http(s) URL")
    if network_switched_off():
        return RemoteSize(why=SWITCHED_OFF)
    import requests

    try:
        response = requests.head(url, allow_redirects=True, timeout=_PROBE_TIMEOUT_S, headers=_HEADERS)
        length = response.headers.get("Content-Length", "")
        if response.ok and length.isdigit() and int(length) > 0:
            return RemoteSize(int(length))
        with requests.get(url, headers={**_HEADERS, "Range": "bytes=0-0"}, stream=True,
                          timeout=_PROBE_TIMEOUT_S) as probe:
            status = probe.status_code
            total = probe.headers.get("Content-Range", "").rpartition("/")[2]
    except requests.RequestException as exc:
        return RemoteSize(why=f"{url}: {_short(exc)}")
    if status == 206 and total.isdigit():
        return RemoteSize(int(total))
    if status in _GONE:
        return RemoteSize(missing=True, why=f"{url}: HTTP {status} ({_GONE[status]})")
    return RemoteSize(why=f"{url}: " + ("the server did not say the size" if status < 400 else f"HTTP {status}"))
