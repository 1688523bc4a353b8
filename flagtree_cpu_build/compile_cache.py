"""A compile cache shared by several machines: ccache's remote storage (a Redis server or an HTTP one).

Boards in a lab or jobs of a CI matrix that build the same commits compile the same translation units;
ccache (>= 4.4) can keep its results on a server they all reach. The tool does not cache anything
itself: it only tells the build's ccache where that server is (``CCACHE_REMOTE_STORAGE``, for ccache
4.4-4.6 ``CCACHE_SECONDARY_STORAGE``) and gives each recipe its own namespace (``CCACHE_NAMESPACE``,
ccache >= 4.7). The recipe's build turns ccache on by itself when it is installed.

Where the URL comes from: ``--compile-cache URL``, else ``$FLAGTREE_CPU_COMPILE_CACHE``, else the
recipe's ``build.compile_cache``. The cache's location is not a build input: these variables are
added after the build stamp is computed and never change it.

The cache never fails a build: without a suitable ccache, or when the server does not answer before
the build, the tool says so once and the build uses the local ccache only; a server that dies during
the build makes ccache count errors and compile locally, which the summary reports once.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .errors import UsageError
from .proc import capture

ENV_VAR = "FLAGTREE_CPU_COMPILE_CACHE"
SCHEMES = {"redis": 6379, "rediss": 6379, "http": 80, "https": 443}
MIN_CCACHE = (4, 4)  # remote ("secondary") storage
NAMESPACE_CCACHE = (4, 7)  # the namespace option; remote_storage replaces secondary_storage
CONNECT_TIMEOUT_S = 1.0
# the counters of `ccache --print-stats` the build result carries (their difference over the build)
COUNTERS = ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss", "local_storage_hit", "local_storage_miss",
            "remote_storage_hit", "remote_storage_miss", "remote_storage_error", "remote_storage_timeout")


class CompileCacheUrlError(UsageError):
    """A compile cache URL ccache's remote storage would not accept."""


@dataclass(frozen=True)
class CacheUrl:
    url: str
    scheme: str
    host: str
    port: int

    @property
    def shown(self) -> str:
        """The URL without a password (redis://:secret@host shows as redis://***@host)."""
        parts = urlsplit(self.url)
        if parts.password is None and parts.username is None:
            return self.url
        return self.url.replace(parts.netloc, "***@" + parts.netloc.rsplit("@", 1)[1], 1)


def parse_url(url: str) -> CacheUrl:
    """``redis://HOST[:PORT][/DB]`` or ``http(s)://HOST[:PORT]/PATH``: what ccache's remote_storage accepts."""
    fix = "use redis://HOST:PORT (a Redis server) or http://HOST:PORT/PATH (ccache's HTTP storage)"
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as err:
        raise CompileCacheUrlError(f"compile cache {url!r} is not a URL: {err}", fix=fix) from None
    if parts.scheme not in SCHEMES:
        raise CompileCacheUrlError(f"compile cache {url!r}: ccache stores only in redis://, rediss://, http:// or "
                                   "https:// servers", fix=fix)
    if not parts.hostname:
        raise CompileCacheUrlError(f"compile cache {url!r} names no host", fix=fix)
    if parts.scheme.startswith("redis") and parts.path.strip("/") and not parts.path.strip("/").isdigit():
        raise CompileCacheUrlError(f"compile cache {url!r}: a Redis URL's path is a database number (/0)", fix=fix)
    if "|" in url:
        raise CompileCacheUrlError(f"compile cache {url!r}: ccache attributes (|...) are the tool's to add",
                                   fix="give the bare URL")
    return CacheUrl(url.strip(), parts.scheme, parts.hostname, port or SCHEMES[parts.scheme])


def configured(option: str | None, environ: Mapping[str, str], recipe_value: str | None) -> tuple[str, str] | None:
    """(URL, where it came from): the command line, else the environment, else the recipe; None when unset."""
    for value, origin in ((option, "--compile-cache"), (environ.get(ENV_VAR), ENV_VAR),
                          (recipe_value, "the recipe's build.compile_cache")):
        if value and value.strip():
            return value.strip(), origin
    return None


# --- ccache and the server -------------------------------------------------------------------------


def ccache_version(env: Mapping[str, str]) -> tuple[str | None, tuple[int, ...] | None]:
    """(path, version) of the ccache the build would run (the build environment's PATH), or (None, None)."""
    path = shutil.which("ccache", path=env.get("PATH"))
    if path is None:
        return None, None
    try:
        out = capture([path, "--version"], env=env, timeout_s=10).stdout
    except Exception:  # noqa: BLE001 - a ccache that cannot even say its version is no use; the build goes on
        return path, None
    words = out.split()
    raw = words[2] if len(words) > 2 and words[:2] == ["ccache", "version"] else ""
    try:
        return path, tuple(int(p) for p in raw.split(".")[:3])
    except ValueError:
        return path, None


def unsuitable(path: str | None, version: tuple[int, ...] | None) -> str | None:
    """Why this ccache cannot use a remote storage, or None."""
    if path is None:
        return "ccache is not on the build's PATH"
    if version is None:
        return f"the version of {path} is unknown"
    if version < MIN_CCACHE:
        return f"ccache {'.'.join(map(str, version))} ({path}) has no remote storage (it needs ccache >= 4.4)"
    return None


def answers(url: CacheUrl, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """None when the server accepts a TCP connection (Redis or HTTP alike); else why not. A connect is all the
    build needs to know before it starts: ccache itself copes with a server that answers badly."""
    try:
        with socket.create_connection((url.host, url.port), timeout=timeout_s):
            return None
    except OSError as err:
        return err.strerror or str(err)


def cache_env(url: CacheUrl, version: tuple[int, ...], namespace: str, base_dir: str | None,
              inherited: Mapping[str, str]) -> dict[str, str]:
    """The variables the build's ccache gets. Machines keep their workspaces in different folders: the
    preprocessed source names them, so without a base dir (paths under it hashed relative) no other machine's
    result would ever match. A CCACHE_BASEDIR of the user's stays."""
    env = ({"CCACHE_REMOTE_STORAGE": url.url, "CCACHE_NAMESPACE": namespace} if version >= NAMESPACE_CCACHE
           else {"CCACHE_SECONDARY_STORAGE": url.url})
    if base_dir and not inherited.get("CCACHE_BASEDIR"):
        env["CCACHE_BASEDIR"] = base_dir
    return env


# --- statistics --------------------------------------------------------------------------------------


def parse_stats(text: str) -> dict[str, int]:
    """`ccache --print-stats`: one ``name<TAB>value`` line per counter. ccache 4.4-4.6 say secondary_storage_*
    for what 4.7 calls remote_storage_* (and primary_storage_* for local_storage_*): read as the new names."""
    stats = {}
    for line in text.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().lstrip("-").isdigit():
            name = name.strip().replace("secondary_storage_", "remote_storage_")
            stats[name.replace("primary_storage_", "local_storage_")] = int(value)
    return stats


def read_stats(env: Mapping[str, str], ccache: str) -> dict[str, int] | None:
    try:
        done = capture([ccache, "--print-stats"], env=env, timeout_s=30)
    except Exception:  # noqa: BLE001 - no statistics is no reason to fail a build
        return None
    return parse_stats(done.stdout) if done.returncode == 0 else None


def stats_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {name: max(0, after.get(name, 0) - before.get(name, 0)) for name in COUNTERS}


def summarize(shown: str, delta: Mapping[str, int]) -> str:
    """One line: how many of the build's cacheable compilations came from the shared cache."""
    compilations = delta["direct_cache_hit"] + delta["preprocessed_cache_hit"] + delta["cache_miss"]
    if not compilations:
        return f"compile cache {shown}: the build compiled nothing through ccache"
    shared = delta["remote_storage_hit"]
    line = (f"compile cache {shown}: {shared} of {compilations} compilation{'s' if compilations != 1 else ''} "
            f"from the shared cache ({round(100 * shared / compilations)} %)")
    local = delta["local_storage_hit"]
    return line + (f", {local} from the local ccache" if local else "")


# --- one build -----------------------------------------------------------------------------------------


@dataclass
class CacheSession:
    """The shared cache for one build: the variables it adds, the statistics before it."""

    url: CacheUrl
    origin: str
    ccache: str | None = None
    version: tuple[int, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # why the build goes without the shared cache
    before: dict[str, int] | None = None

    def data(self) -> dict[str, Any]:
        return {"url": self.url.shown, "from": self.origin, "ccache": ".".join(map(str, self.version or ())) or None,
                "active": bool(self.env), "namespace": self.env.get("CCACHE_NAMESPACE"),
                **({"problem": self.problem} if self.problem else {})}


def prepare(option: str | None, recipe_value: str | None, namespace: str, build_env: Mapping[str, str],
            warn: Any, base_dir: str | None = None) -> CacheSession | None:
    """The shared cache for this build, or None when none is configured; ``warn`` says (once) why it is not used."""
    chosen = configured(option, build_env, recipe_value)
    if chosen is None:
        return None
    session = CacheSession(parse_url(chosen[0]), chosen[1])
    session.ccache, session.version = ccache_version(build_env)
    why = unsuitable(session.ccache, session.version)
    if why is None:
        silent = answers(session.url)
        if silent is not None:
            why = f"does not answer ({silent})"
            session.problem = why
            warn(f"compile cache {session.url.shown} does not answer; building with the local ccache only")
            return _with_stats(session, build_env)
    if why is not None:
        session.problem = why
        warn(f"compile cache {session.url.shown}: {why}; building without the shared cache "
             "(apt-get install ccache, 4.4 or newer)")
        return session
    assert session.version is not None
    session.env = cache_env(session.url, session.version, namespace, base_dir, build_env)
    return _with_stats(session, build_env)


def _with_stats(session: CacheSession, build_env: Mapping[str, str]) -> CacheSession:
    assert session.ccache is not None
    session.before = read_stats({**build_env, **session.env}, session.ccache)
    return session


def finish(session: CacheSession, build_env: Mapping[str, str], warn: Any) -> tuple[dict[str, Any], str | None]:
    """The build result's ``compile_cache`` data and the summary line (None when there is nothing to count)."""
    data = session.data()
    if session.ccache is None or session.before is None:
        return data, None
    after = read_stats({**build_env, **session.env}, session.ccache)
    if after is None:
        return data, None
    delta = stats_delta(session.before, after)
    data["stats"] = delta
    errors = delta["remote_storage_error"] + delta["remote_storage_timeout"]
    if errors and session.env:
        warn(f"compile cache {session.url.shown}: {errors} request{'s' if errors != 1 else ''} to the server "
             "failed during the build (ccache compiled locally instead)")
    return data, summarize(session.url.shown, delta)

