"""What a download that failed says: one error for every candidate URL, and a requests exception in a line.

Kept apart from ``download`` (the HTTP) so the words can grow without the transfer code growing: the
reasons each candidate gave are the error's details, and the fix fits what went wrong (a digest that
did not match, bytes kept to resume, the network switched off).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

from .errors import ArtifactError
from .progress import human_bytes

NO_NETWORK_ENV = "FLAGTREE_CPU_NO_NETWORK"
SWITCHED_OFF = f"the network is switched off ({NO_NETWORK_ENV}=1); no connection was opened"


def all_failed(label: str, failures: list[str], unresolved: Sequence[str] = ()) -> ArtifactError:
    """``unresolved``: the host names that got no DNS answer, when every candidate failed for that."""
    error = _all_failed(label, failures)
    error.unresolved_hosts = tuple(dict.fromkeys(unresolved))
    return error


def _all_failed(label: str, failures: list[str]) -> ArtifactError:
    if failures and all(SWITCHED_OFF in f for f in failures):
        return ArtifactError(f"could not download {label}: {SWITCHED_OFF}", details=tuple(failures), fix=f"unset "
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


def short(exc: BaseException) -> str:
    # a server's words (a Location header in a redirect error): escaped, so no control character reaches a log
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(exc))
    return f"{type(exc).__name__}: {text[:160]}{'...' if len(text) > 160 else ''}"


def unresolved(exc: BaseException) -> bool:
    """A host name that got no DNS answer (socket.gaierror somewhere in the chain requests and urllib3 wrap it
    in): not a dropped connection, so not retried."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        current = todo.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        if isinstance(current, socket.gaierror):
            return True
        seen.add(id(current))
        todo += [current.__cause__, current.__context__, getattr(current, "reason", None), *current.args]
    return False


def from_size(size: int) -> str:
    return f", resuming at {human_bytes(size)}" if size else ""


def kept(part: Path) -> str:
    size = part.stat().st_size if part.is_file() else 0
    return f"; the partial download ({human_bytes(size)}, {part}) is kept" if size else ""
