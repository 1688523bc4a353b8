"""A compile cache shared by several machines: ccache's remote storage (a Redis server or an HTTP one).

Boards in a lab or jobs of a CI matrix that build the same commits compile the same translation units;
ccache (>= 4.4) can keep its results on a server they all reach. The tool does not cache anything
itself: it only tells the build's ccache where that server is (``CCACHE_REMOTE_STORAGE``, for ccache
4.4-4.6 ``CCACHE_SECONDARY_STORAGE``) and gives each recipe its own namespace (``CCACHE_NAMESPACE``,
ccache >= 4.7). The recipe's build turns ccache on by itself when it is installed.

Where the URL comes from: ``--compile-cache URL``, else ``$FLAGTREE_CPU_COMPILE_CACHE``, else the
recipe's ``build.compile_cache``. The cache's location is not a build input: these variables are
added after the build stamp is computed and never change it.

The cache never fails a build, nor makes it slower than no cache: a URL the installed ccache would fail
every compilation on is exit 2 when it is read (cache_url.py); without a suitable ccache, or when the server
does not answer the probe in its own protocol within 2 s (cache_probe.py), the tool says so once and the
build uses the local ccache only; ccache gets short timeouts, so a server that stalls during the build
costs each compilation one short wait before ccache compiles locally, which the summary reports once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cache_probe import answers
from .cache_url import (
    FIX,
    HELPER_CCACHE,
    CacheUrl,
    CompileCacheUrlError,
    ccache_refuses,
    parse_url,
    remote_storage,
)
from .proc import capture

ENV_VAR = "FLAGTREE_CPU_COMPILE_CACHE"
MIN_CCACHE = (4, 4)  # remote ("secondary") storage
NAMESPACE_CCACHE = (4, 7)  # the namespace option; remote_storage replaces secondary_storage
# the counters of `ccache --print-stats` the build result carries (their difference over the build)
COUNTERS = ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss", "local_storage_hit", "local_storage_miss",
            "remote_storage_hit", "remote_storage_miss", "remote_storage_error", "remote_storage_timeout")


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


def storage_helper(url: CacheUrl, ccache: str, version: tuple[int, ...], env: Mapping[str, str]) -> str | None:
    """The storage helper ccache >= 4.13 would run for ``url``'s scheme (its libexec folders, next to it, PATH)."""
    if version < HELPER_CCACHE:
        return None
    program = f"ccache-storage-{url.scheme}"
    try:
        libexec = capture([ccache, "--get-config", "libexec_dirs"], env=env, timeout_s=10).stdout.strip()
    except Exception:  # noqa: BLE001 - then only the other two places count
        libexec = ""
    folders = [*filter(None, libexec.split(os.pathsep)), str(Path(ccache).parent)]
    found = next((str(Path(f) / program) for f in folders if os.access(Path(f) / program, os.X_OK)), None)
    return found or shutil.which(program, path=env.get("PATH"))


def check_url(value: str, origin: str, env: Mapping[str, str]) -> CacheUrl:
    """``value`` as a URL the ccache on ``env``'s PATH can store in; CompileCacheUrlError (exit 2) naming ``origin``
    (--compile-cache, the variable or the recipe) when it cannot: before anything runs, not in every compilation."""
    url = _parsed(value, origin)
    ccache, version = ccache_version(env)
    _refuse_if_unusable(url, origin, ccache, version, env)
    return url


def _parsed(value: str, origin: str) -> CacheUrl:
    return parse_url(value, None if origin == "--compile-cache" else origin)  # the option's error names it


def _refuse_if_unusable(url: CacheUrl, origin: str, ccache: str | None, version: tuple[int, ...] | None,
                        env: Mapping[str, str]) -> None:
    if ccache is None or version is None or unsuitable(ccache, version):
        return  # no usable ccache at all: the build says so once and goes without the shared cache
    why = ccache_refuses(url, version, storage_helper(url, ccache, version, env))
    if why is not None:
        named = f"compile cache {url.shown!r}" + ("" if origin == "--compile-cache" else f" (from {origin})")
        raise CompileCacheUrlError(f"{named}: {why} ({ccache})",
                                   fix=f"{FIX}, or install ccache 4.13 or newer with ccache-storage-{url.scheme}")


def lookup_env(python: Path | None, environ: Mapping[str, str]) -> dict[str, str]:
    """Enough of the build environment to find the ccache the build would run: the target venv's bin, then PATH."""
    folders = [str(python.parent)] if python is not None else []
    return {**environ, "PATH": os.pathsep.join([*folders, environ.get("PATH", "")])}


def check_configured(option: str | None, environ: Mapping[str, str], recipe_value: str | None,
                     python: Path | None = None) -> CacheUrl | None:
    """The URL `build` and `setup` would hand to ccache (option, variable or recipe), checked when the command
    starts; None when none is configured."""
    chosen = configured(option, environ, recipe_value)
    return None if chosen is None else check_url(chosen[0], chosen[1], lookup_env(python, environ))


def cache_env(url: CacheUrl, version: tuple[int, ...], namespace: str, base_dir: str | None,
              inherited: Mapping[str, str]) -> dict[str, str]:
    """The variables the build's ccache gets. Machines keep their workspaces in different folders: the
    preprocessed source names them, so without a base dir (paths under it hashed relative) no other machine's
    result would ever match. A CCACHE_BASEDIR of the user's stays."""
    storage = remote_storage(url, version)
    env = ({"CCACHE_REMOTE_STORAGE": storage, "CCACHE_NAMESPACE": namespace} if version >= NAMESPACE_CCACHE
           else {"CCACHE_SECONDARY_STORAGE": storage})
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
    """The shared cache for this build, or None when none is configured; ``warn`` says (once) why it is not used.
    A URL this ccache cannot store in is CompileCacheUrlError (exit 2) before anything compiles."""
    chosen = configured(option, build_env, recipe_value)
    if chosen is None:
        return None
    session = CacheSession(_parsed(*chosen), chosen[1])
    session.ccache, session.version = ccache_version(build_env)
    why = unsuitable(session.ccache, session.version)
    if why is not None:
        session.problem = why
        warn(f"compile cache {session.url.shown}: {why}; building without the shared cache "
             "(apt-get install ccache, 4.4 or newer)")
        return session
    _refuse_if_unusable(session.url, session.origin, session.ccache, session.version, build_env)
    # A server that does not answer as ccache needs would cost every compilation a wait and give nothing: the
    # build goes on with the local ccache alone (the recipe's build uses it whenever it is installed).
    session.problem = answers(session.url)
    if session.problem is not None:
        warn(f"compile cache {session.url.shown}: {session.problem}; building with the local ccache only")
        return _with_stats(session, build_env)
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

