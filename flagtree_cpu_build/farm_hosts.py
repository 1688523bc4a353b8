"""The hosts of a compile farm, as the user writes them (distcc's ``DISTCC_HOSTS`` language, a safe subset).

``HOST[:PORT][/LIMIT][,lzo]``, separated by spaces or commas: ``10.0.0.5/8 build2:3633,lzo``. The tool reaches
each helper over plain TCP (distccd ``--daemon``), so it can probe it before the build; other forms of the
language are refused with the reason rather than passed on to distcc unread:

- ``localhost`` / ``127.0.0.1`` without a port would make distcc compile on this machine as a "host": the board
  already compiles locally whenever the farm cannot (distcc's fallback), so a farm host is always a daemon;
  a daemon on this machine's loopback is still fine when a port is given (the tests and the bench run two);
- ``@HOST`` (ssh) cannot be probed with a deadline (ssh may prompt; its connection is not the tool's);
- ``,cpp`` (pump mode) needs distcc's include server, which ccache's prefix command never starts;
- ``--randomize``, ``+zeroconf`` and other options: distcc's own, not the tool's to guess at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UsageError

DEFAULT_PORT = 3632
DEFAULT_LIMIT = 4  # distcc's own default for a TCP host without /LIMIT
MAX_LIMIT = 256
MAX_HOSTS = 64
MAX_TEXT = 4096
_HOST = re.compile(r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)(?::(?P<port>\d{1,5}))?"
                   r"(?:/(?P<limit>\d{1,4}))?(?P<options>(?:,(?:lzo|cpp|auth))*)")
_OPTIONS = ("lzo", "cpp", "auth")  # what distcc reads after a host's comma
FIX = 'give hosts as HOST[:PORT][/LIMIT][,lzo], e.g. --compile-farm "10.0.0.5/8 build2:3633"'


class CompileFarmError(UsageError):
    """A compile farm the tool cannot use as written (exit 2, before anything runs)."""


@dataclass(frozen=True)
class FarmHost:
    host: str
    port: int
    limit: int  # the compile jobs distcc sends it at once
    lzo: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def spec(self) -> str:
        """The host as DISTCC_HOSTS says it (always with the port and the limit: nothing left to distcc's defaults)."""
        return f"{self.address}/{self.limit}" + (",lzo" if self.lzo else "")


def parse_hosts(text: str, origin: str | None = None) -> tuple[FarmHost, ...]:
    """The hosts of ``text``; CompileFarmError (exit 2) naming ``origin`` (an option, a variable, a recipe key)
    and the word it cannot use."""
    named = f"compile farm {text[:80]!r}" + (f" (from {origin})" if origin else "")
    if len(text) > MAX_TEXT:
        raise CompileFarmError(f"compile farm (from {origin or 'the option'}) is {len(text)} characters long; "
                               f"at most {MAX_TEXT}", fix=FIX)
    words = text.split()
    words = [w for word in words for w in _split_commas(word)]
    if not words:
        raise CompileFarmError(f"{named}: no host", fix=FIX)
    if len(words) > MAX_HOSTS:
        raise CompileFarmError(f"{named}: {len(words)} hosts; at most {MAX_HOSTS}", fix=FIX)
    hosts = tuple(_host(word, named) for word in words)
    seen: set[str] = set()
    for host in hosts:
        if host.address in seen:
            raise CompileFarmError(f"{named}: {host.address} is named twice", fix=FIX)
        seen.add(host.address)
    return hosts


def _split_commas(word: str) -> list[str]:
    """``a,b`` is two hosts; ``a,lzo`` is one host with an option (distcc's own reading of the comma)."""
    parts = word.split(",")
    out = [parts[0]]
    for part in parts[1:]:
        if part in _OPTIONS:
            out[-1] += "," + part
        else:
            out.append(part)
    return [w for w in out if w]


def _host(word: str, named: str) -> FarmHost:
    if word.startswith("@") or "@" in word:
        raise CompileFarmError(f"{named}: {word!r} is an ssh host; the farm needs helpers running distccd "
                               "--daemon (TCP), which the tool can probe before the build", fix=FIX)
    if word.startswith(("-", "+")):
        raise CompileFarmError(f"{named}: {word!r} is a distcc option, not a host", fix=FIX)
    match = _HOST.fullmatch(word)
    if match is None:
        raise CompileFarmError(f"{named}: {word!r} is not HOST[:PORT][/LIMIT][,lzo]", fix=FIX)
    options = [o for o in match["options"].split(",") if o]
    if "cpp" in options:
        raise CompileFarmError(f"{named}: {word!r} asks for distcc's pump mode (,cpp), which needs distcc's include "
                               "server; through ccache each unit is preprocessed here and sent whole", fix=FIX)
    if "auth" in options:
        raise CompileFarmError(f"{named}: {word!r} asks for GSS-API authentication (,auth), which the probe cannot "
                               "speak", fix=FIX)
    host = match["host"]
    if match["port"] is None and host in ("localhost", "127.0.0.1"):
        raise CompileFarmError(f"{named}: {word!r} is this machine, which compiles whatever the farm does not "
                               "anyway; name helpers (or a local distccd with its :PORT)", fix=FIX)
    port = int(match["port"]) if match["port"] else DEFAULT_PORT
    if not 0 < port < 65536:
        raise CompileFarmError(f"{named}: {word!r}: port {port} is not 1-65535", fix=FIX)
    limit = int(match["limit"]) if match["limit"] else DEFAULT_LIMIT
    if not 0 < limit <= MAX_LIMIT:
        raise CompileFarmError(f"{named}: {word!r}: limit {limit} is not 1-{MAX_LIMIT}", fix=FIX)
    return FarmHost(host, port, limit, lzo="lzo" in options)
