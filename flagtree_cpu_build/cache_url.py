"""The compile cache's URL: what ccache's remote storage takes, checked before any compile relies on it.

ccache reads the URL in every compilation, and one it cannot use fails that compilation (exit 1: the
build's exit 5), or one it misreads fails every request: a space splits it into two storages, a bad
``%`` escape, a character outside RFC 3986 or port 0 is "Cannot parse URL", ``http://NAME@`` is "Expected
username:password", and ``redis://:PASSWORD@`` makes ccache send no password at all (it splits the
percent-decoded user info at the first ``:`` and authenticates only when the part before it is not empty).
Each of those was tried with ccache 4.7.5; they are refused here, when the option is read, with exit 2.

Schemes by ccache version (its NEWS and manual): ``redis://`` and ``http://`` are built in since 4.4 (the
"secondary storage"; 4.7 renamed it remote storage and added namespaces). Neither built-in storage has TLS
("HTTPS is not supported"); from 4.13 ccache can hand a URL to a storage helper, a program called
``ccache-storage-<scheme>`` (https helpers exist), so ``https://`` and ``rediss://`` need ccache >= 4.13 and
that helper. The timeouts (``connect-timeout``, ``operation-timeout``, in ms) are attributes every version
from 4.4 takes; 4.13 maps them onto its built-in storages and adds ``data-timeout`` for helpers.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from .errors import UsageError

SCHEMES = {"redis": 6379, "http": 80, "rediss": 6379, "https": 443}
BUILT_IN = ("redis", "http")  # ccache >= 4.4
HELPER_CCACHE = (4, 13)  # remote storage helpers: ccache-storage-<scheme>
FORMS = ("redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] (a Redis server) or http://[USER:PASSWORD@]HOST[:PORT][/PATH] "
         "(ccache's HTTP storage)")
FIX = f"give the compile cache as {FORMS}"
# What ccache gets for the server: short, so that a server that stalls after the tool's probe costs each
# compilation one short wait instead of ccache's default 10 s (ccache then compiles locally and leaves the
# server alone for the rest of that compilation). Both are per-socket waits, not limits on a transfer.
CONNECT_TIMEOUT_MS = 250
OPERATION_TIMEOUT_MS = 1000
# RFC 3986's characters: anything else ccache 4.7.5 refuses ("Path '/a{b' ... is invalid")
_URL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%")
_HOST_RE = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?")


class CompileCacheUrlError(UsageError):
    """A compile cache URL ccache's remote storage would not take, or would take and then fail on."""


@dataclass(frozen=True)
class CacheUrl:
    url: str  # as given (ccache gets it with the tool's attributes)
    scheme: str
    host: str
    port: int
    path: str = ""  # an HTTP storage's folder, percent-escapes as given
    user: str | None = None  # the credentials as ccache will send them (percent-decoded)
    password: str | None = None
    db: int = 0  # a Redis database

    @property
    def shown(self) -> str:
        """The URL without credentials (redis://secret@host shows as redis://***@host)."""
        return redact(self.url)

    @property
    def redis(self) -> bool:
        return self.scheme in ("redis", "rediss")

    @property
    def tls(self) -> bool:
        return self.scheme in ("rediss", "https")

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def redact(text: str) -> str:
    """``text`` with the user info of the URL in it replaced by ``***``."""
    end = _credentials_end(text)
    return f"{text.partition('://')[0]}://***{text[end:]}" if end else text


def _credentials_end(text: str) -> int:
    """Where the user info of the URL ``text`` ends (at its '@'), or 0. A '@' after the host part may be a password
    holding a raw '/' (which ends the host part early): everything up to the last '@' counts then."""
    head, sep, rest = text.partition("://")
    if not sep or "@" not in rest:
        return 0
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return len(head) + len(sep) + (authority.rindex("@") if "@" in authority else rest.rindex("@"))


def parse_url(url: str, origin: str | None = None) -> CacheUrl:
    """``redis://[[USER:]PASSWORD@]HOST[:PORT][/DB]`` or ``http(s)://[USER:PASSWORD@]HOST[:PORT][/PATH]``, as
    ccache reads it; a URL it would refuse or misread raises CompileCacheUrlError (exit 2), naming ``origin``
    (where the URL came from) when given."""
    text = url.strip()
    named = f"compile cache {redact(text)!r}" + (f" (from {origin})" if origin else "")

    def refuse(why: str, fix: str = FIX) -> CompileCacheUrlError:
        return CompileCacheUrlError(f"{named}: {why}", fix=fix)

    _check_characters(text, refuse)
    parts = urlsplit(text)
    if parts.scheme not in SCHEMES:
        raise refuse("ccache stores only in redis:// or http:// servers (https:// and rediss:// through a storage "
                     "helper of ccache 4.13 or newer)")
    try:
        port = parts.port
    except ValueError:
        port = -1
    host = parts.hostname or ""
    if not host:
        raise refuse("names no host")
    if port is not None and not 1 <= port <= 65535:
        raise refuse("its port is not a number from 1 to 65535")
    if not _is_host(host, parts.netloc):
        raise refuse("its host is neither a host name (letters, digits, '-', '.') nor an IP address")
    if parts.query or parts.fragment:
        part = "query ('?...')" if parts.query else "fragment ('#...')"
        raise refuse(f"ccache would ignore its {part}" + ("; a Redis database is the path (/2)" if "redis" in
                                                           parts.scheme else ""))
    address = parts.netloc.rpartition("@")[2]
    user, password = _credentials(parts.scheme, parts.netloc, address, refuse)
    db = 0
    if parts.scheme.startswith("redis") and parts.path.strip("/"):
        if not parts.path.strip("/").isdigit() or int(parts.path.strip("/")) >= 2**32:
            raise refuse("a Redis URL's path is a database number (/0)")
        db = int(parts.path.strip("/"))
    return CacheUrl(text, parts.scheme, host, port or SCHEMES[parts.scheme], parts.path, user, password, db)


def _check_characters(text: str, refuse) -> None:  # noqa: ANN001 - parse_url's error maker
    if any(c.isspace() for c in text):
        raise refuse("it contains a space: ccache would read two storages and fail every compilation")
    if "|" in text:
        raise refuse("ccache attributes (|...) are the tool's to add", fix="give the bare URL")
    odd = next((i for i, c in enumerate(text) if c not in _URL_CHARS), None)
    if odd is not None:
        what = "is not ASCII" if not text[odd].isascii() else "cannot stand in a URL"
        where = "its credentials hold a character" if odd < _credentials_end(text) else f"it contains {text[odd]!r}"
        raise refuse(f"{where}, which {what}: percent-encode it (ccache refuses the URL)")
    for match in re.finditer("%", text):
        escape = text[match.start():match.start() + 3]
        if not re.fullmatch("%[0-9A-Fa-f]{2}", escape):
            where = "its credentials hold a '%' that" if match.start() < _credentials_end(text) else repr(escape)
            raise refuse(f"{where} is not a percent escape (%XX, two hex digits); ccache refuses the URL")


def _is_host(host: str, netloc: str) -> bool:
    if "[" in netloc:
        try:
            ipaddress.IPv6Address(host)
            return True
        except ValueError:
            return False
    return bool(_HOST_RE.fullmatch(host))


def _credentials(scheme: str, netloc: str, address: str, refuse) -> tuple[str | None, str | None]:  # noqa: ANN001
    """(user, password) as ccache sends them: it percent-decodes the user info, then splits it at the first ':'."""
    raw, at, _ = netloc.rpartition("@")
    if not at or not raw:
        return None, None
    decoded = unquote(raw)
    left, colon, right = decoded.partition(":")
    if scheme.startswith("redis"):
        if not left:  # ccache authenticates only when the part before ':' is not empty
            if right:
                raise refuse("ccache sends no password when the user name before ':' is empty",
                             fix=f"write it as {scheme}://PASSWORD@{address} (or {scheme}://USER:PASSWORD@{address})")
            return None, None
        if colon and ":" not in raw:
            raise refuse("ccache decodes '%3A' before it splits user from password, so it would send another user",
                         fix=f"write it as {scheme}://default:PASSWORD@{address} (Redis 6 names requirepass's user "
                         "'default')")
        return (left, right) if colon else (None, left)
    if not colon:
        raise refuse("ccache's HTTP storage needs USER:PASSWORD@ before the host; with a name alone it fails "
                     "every compilation", fix=f"write it as {scheme}://USER:PASSWORD@{address}/PATH")
    return left, right


def ccache_refuses(url: CacheUrl, version: tuple[int, ...] | None, helper: str | None) -> str | None:
    """Why a ccache of ``version`` (with ``helper``, the storage helper program it finds, or None) cannot store
    in ``url``; None when it can, or when its version is unknown (the build warns about that ccache anyway)."""
    if url.scheme in BUILT_IN or version is None:
        return None
    program = f"ccache-storage-{url.scheme}"
    have = ".".join(map(str, version))
    if version < HELPER_CCACHE:
        return (f"{url.scheme}:// needs ccache 4.13 or newer with its storage helper {program} (ccache's own Redis "
                f"and HTTP storage have no TLS); this ccache is {have}")
    if helper is None:
        return (f"{url.scheme}:// needs ccache's storage helper {program}, which ccache {have} would look for in its "
                "libexec folders, next to itself and on PATH: there is none")
    return None


def remote_storage(url: CacheUrl, version: tuple[int, ...]) -> str:
    """CCACHE_REMOTE_STORAGE (or 4.4-4.6's CCACHE_SECONDARY_STORAGE): the URL and the tool's short timeouts."""
    value = f"{url.url}|connect-timeout={CONNECT_TIMEOUT_MS}|operation-timeout={OPERATION_TIMEOUT_MS}"
    return value + (f"|data-timeout={OPERATION_TIMEOUT_MS}ms" if version >= HELPER_CCACHE else "")
