"""doctor checks of the network: can clones and downloads reach what they would use?

Probed as a download would go: artifacts through their mirror rewrites first (``--mirror``,
``FLAGTREE_CPU_MIRRORS``), then the recipe's URL; sources after git's own insteadOf rules; each
through the proxy the environment names. A TCP connection is the probe: nothing is downloaded.
Skipped for a ``--sysroot`` snapshot (this machine's network is not the board's).
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from ..interrupts import block_interrupts
from .facts import stage_plans
from .kit import DoctorContext, Outcome, check, fail, ok, skip, warn


@dataclass(frozen=True)
class _Route:
    """One way a clone or download gets its bytes: over the network (``endpoint``) or from a local file."""

    endpoint: tuple[str, int] | None
    local: Path | None
    mirror: bool  # a --mirror / FLAGTREE_CPU_MIRRORS rewrite, not the recipe's own URL


def _routes(c: DoctorContext) -> list[tuple[str, list[_Route]]]:
    """(who, routes in the order they are tried) for each source and artifact with something to reach.

    Sources after git's insteadOf rules; artifacts as a download tries them: each mirror rewrite, then the
    original (``mirrors.candidate_urls``).
    """
    from ..download import _local_path  # the one rule for which URLs a download reads from disk
    from ..gitcmd import effective_url
    from ..mirrors import candidate_urls

    found: list[tuple[str, list[_Route]]] = []
    for name, source in c.recipe.sources.items():
        url = effective_url(source.url) or source.url
        endpoint = _endpoint(url)
        if endpoint:  # a local path, or a form we cannot tell (scp-like ssh): nothing to probe, as before
            found.append((f"sources.{name}", [_Route(endpoint, None, False)]))
    for name, artifact in c.recipe.artifacts.items():
        routes = []
        for url in candidate_urls(artifact.url, c.options.mirrors):
            endpoint, local = _endpoint(url), _local_path(url)
            if endpoint or local:
                routes.append(_Route(endpoint, local, url != artifact.url))
        if routes:
            found.append((f"artifacts.{name}", routes))
    return found


def _still_needed(c: DoctorContext) -> set[str] | None:
    """What a run would still fetch over the network, as ``_routes`` names it ("sources.NAME", "artifacts.NAME";
    "python" for prerequisites pip would install): the items of the stages' plans that are not current. None when
    the plans cannot say (a damaged lock: the workspace checks name it): every host is probed then."""
    from ..errors import FlagtreeCpuError

    try:
        items = stage_plans(c, "sources", "artifacts", "python")
    except FlagtreeCpuError:
        return None
    behind = [i for i in items if i.will not in ("ok", "skipped")]
    return {"python" if i.area == "python" else f"{i.area}.{i.subject}" for i in behind}


def _endpoint(url: str) -> tuple[str, int] | None:
    parsed = urlparse(url)
    default = {"https": 443, "http": 80, "git": 9418, "ssh": 22}.get(parsed.scheme)
    if not parsed.hostname or default is None:
        return None
    return parsed.hostname, parsed.port or default


def _proxy_for(c: DoctorContext, host: str, port: int) -> tuple[str, int] | None:
    if port not in (80, 443):
        return None
    no_proxy = (c.environ.get("no_proxy") or c.environ.get("NO_PROXY") or "").split(",")
    if any(entry.strip() and (host == entry.strip().lstrip(".") or host.endswith("." + entry.strip().lstrip(".")))
           for entry in no_proxy):
        return None
    names = ("https_proxy", "HTTPS_PROXY") if port == 443 else ("http_proxy", "HTTP_PROXY")
    value = next((c.environ[n] for n in (*names, "all_proxy", "ALL_PROXY") if c.environ.get(n)), None)
    if not value:
        return None
    proxy = urlparse(value if "://" in value else f"http://{value}")
    return (proxy.hostname, proxy.port or 3128) if proxy.hostname else None


@check("network.hosts", "network", "Recipe hosts reachable", live_only=True)
def network_hosts(c: DoctorContext) -> Outcome:
    if c.options.offline:
        return skip("--offline")
    needed = _still_needed(c)
    if needed is not None and not needed:
        return skip("nothing here needs the network: every source is at its pin, every artifact is published and "
                    "verified, and the Python prerequisites are installed")
    targets = [(who, routes) for who, routes in _routes(c) if needed is None or who in needed]
    if not targets:  # only pip: its package index is not one of the recipe's hosts
        return skip("only pip needs the network, for the Python prerequisites (its package index is not probed "
                    "here); every source is at its pin and every artifact is published and verified")
    endpoints = list(dict.fromkeys(r.endpoint for _, routes in targets for r in routes if r.endpoint))
    if not endpoints and all(r.local and r.local.is_file() for _, routes in targets for r in routes):
        return ok("every source and artifact is local")
    with ThreadPoolExecutor(max_workers=max(1, len(endpoints)), initializer=block_interrupts) as pool:
        probed = dict(zip(endpoints, pool.map(lambda e: _probe(c, *e), endpoints), strict=True))

    def reached(route: _Route) -> tuple[str, str | None]:
        """(where, error or None) for one route."""
        if route.endpoint is None:
            assert route.local is not None
            return f"local file {route.local}", None if route.local.is_file() else "no such file"
        error, via = probed[route.endpoint]
        return f"{route.endpoint[0]}:{route.endpoint[1]}{via}", error

    good, detours, unreachable = [], [], []
    for who, routes in targets:
        tried = []
        for route in routes:
            where, error = reached(route)
            label = f"mirror {where}" if route.mirror else where
            if error is None:
                good.append(f"{who} via {label}")
                if tried:  # a download gets there, after waiting on the mirrors before it
                    detours.append(f"{who}: {'; '.join(tried)}; downloads fall back to {label}")
                break
            tried.append(f"{label}: {error}")
        else:
            unreachable.append(f"{who} ({'; '.join(tried)})")
    if unreachable:
        return fail(f"{len(unreachable)} of {len(targets)} unreachable: " + "; ".join(unreachable),
                    "check the network and proxy (https_proxy); or mirrors: --mirror (or FLAGTREE_CPU_MIRRORS) for "
                    "artifacts, git's url.<mirror>.insteadOf for sources; or work offline: sync --git-cache, "
                    "fetch --offline --from")
    if detours:
        return warn("unreachable mirror: " + " | ".join(detours),
                    "check the mirror rules (--mirror, FLAGTREE_CPU_MIRRORS): a mirror that is down costs every "
                    "download its timeout first")
    return ok("reachable: " + ", ".join(good))


def _probe(c: DoctorContext, host: str, port: int) -> tuple[str | None, str]:
    """(error or None, " via proxy h:p" or "") for one TCP connection, through the proxy a download would use."""
    target = _proxy_for(c, host, port)
    dial = target or (host, port)
    via = f" via proxy {dial[0]}:{dial[1]}" if target else ""
    try:
        with socket.create_connection(dial, timeout=c.network_timeout_s):
            return None, via
    except OSError as exc:
        return f"{exc.__class__.__name__}: {exc}", via


@check("network.proxy", "network", "Proxy settings in effect", live_only=True)
def network_proxy(c: DoctorContext) -> Outcome:
    names = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")
    settings = [f"{n}={c.environ[n]}" for n in names if c.environ.get(n)]
    return ok("; ".join(settings) if settings else "no proxy variables set")
