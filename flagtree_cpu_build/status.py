"""What the workspace holds compared with the recipe, and what `setup` would do about it.

One read-only inspection serves two commands: ``status`` shows each item's state, and
``setup --dry-run`` shows each item's action and reason ("clone flagtree @3911e5b: missing",
"download llvm 812 MB: not cached", "build: llvm changed"). Nothing here writes, downloads
or builds; the only network I/O is an optional HEAD request for a download's size.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .artifact_cache import ArtifactCache
from .download import parse_source_note
from .extract import read_stamp
from .lockfile import ArtifactLock, Lock, expected_sha256, locked_artifact, read_lock
from .mirrors import MirrorRule, candidate_urls
from .progress import human_bytes
from .recipe import Artifact, Recipe
from .stages import StageContext
from .state import read_state
from .workspace import user_cache_dir

STATUS_SCHEMA = "flagtree-cpu/status/v1"


@dataclass(frozen=True)
class Item:
    area: str  # sources, artifacts, links, python, build, validation
    subject: str
    state: str  # ok, missing, differs, dirty, conflict, stale, failed, skipped
    detail: str
    action: str = ""  # what setup would do; "" when nothing
    reason: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def current(self) -> bool:
        return self.state in ("ok", "skipped")

    def to_json(self) -> dict[str, Any]:
        return {"area": self.area, "subject": self.subject, "state": self.state, "detail": self.detail,
                "action": self.action or None, "reason": self.reason or None, **self.data}


@dataclass(frozen=True)
class WorkspaceStatus:
    recipe: str
    workspace: Path
    python: Path
    items: tuple[Item, ...]
    seconds: float

    @property
    def current(self) -> bool:
        return all(i.current for i in self.items)

    @property
    def download_bytes(self) -> int | None:
        """What setup would download; None when a size is unknown."""
        sizes = [i.data["download_bytes"] for i in self.items if "download_bytes" in i.data]  # fresh or resumed
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        return {"schema": STATUS_SCHEMA, "recipe": self.recipe, "workspace": str(self.workspace),
                "python": str(self.python), "current": self.current, "seconds": round(self.seconds, 3),
                "download_bytes": self.download_bytes, "items": [i.to_json() for i in self.items]}


@dataclass(frozen=True)
class Scope:
    """Which parts setup would run, and where downloads are cached."""

    python: Path
    cache_dir: Path | None = None
    skip_build: bool = False
    skip_validate: bool = False
    model: Path | None = None
    ask_sizes: bool = False  # HEAD requests for unknown download sizes (dry-run, online)
    mirrors: tuple[MirrorRule, ...] = ()  # asked before the original URL, as the download would be


def inspect_workspace(ctx: StageContext, scope: Scope) -> WorkspaceStatus:
    start = time.monotonic()
    recipe, ws = ctx.recipe, ctx.workspace
    lock = read_lock(ws.lock_file) if ws.lock_file.is_file() else None
    items = _sources(ctx, lock)
    items += _artifacts(recipe, lock, scope)
    sources_ready = all(i.current for i in items if i.area == "sources")
    items += _links(ctx, sources_ready)
    items += _python(ctx, scope)
    inputs_ready = all(i.current for i in items)
    items += _build(ctx, scope, inputs_ready)
    items += _validation(ctx, scope, all(i.current for i in items))
    return WorkspaceStatus(recipe.name, ws.root, scope.python, tuple(items), time.monotonic() - start)


# --- sources -------------------------------------------------------------------------------------


def _sources(ctx: StageContext, lock: Lock | None) -> list[Item]:
    from .gitcmd import git_result

    items = []
    for name in ctx.recipe.sources_in_order():
        source = ctx.recipe.sources[name]
        checkout = ctx.workspace.root / ctx.recipe.source_path(name)
        locked = lock.sources.get(name) if lock else None
        wanted = (source.commit or "").lower() or (locked.commit if locked and locked.url == source.url else None)
        pin = f"@{wanted[:7]}" if wanted else f"({source.ref}, resolved when cloned)"
        data = {"path": str(checkout), "pin": wanted}
        if not (checkout / ".git").exists():
            items.append(Item("sources", name, "missing", f"not checked out at {checkout}", f"clone {name} {pin}",
                              "missing", data))
            continue
        status, head, _ = git_result(["rev-parse", "HEAD"], cwd=checkout)
        head = head.strip() if status == 0 else ""
        changed = git_result(["status", "--porcelain", "--untracked-files=no"], cwd=checkout)[1].splitlines()
        data.update(head=head or None, modified_files=len(changed))
        dirty = f"; {len(changed)} modified tracked file{'s' if len(changed) != 1 else ''}" if changed else ""
        if wanted is None:
            items.append(Item("sources", name, "differs", f"at {head[:12]}; nothing locked for {source.ref!r}{dirty}",
                              f"pin {name} to the tip of {source.ref}", "not in the lock file", data))
        elif head != wanted:
            state = "dirty" if changed else "differs"
            action = (f"stop: {name} has local changes (commit or stash them, or --allow-dirty)" if changed
                      else f"move {name} {head[:7]} -> {wanted[:7]}")
            items.append(Item("sources", name, state, f"at {head[:12]}, the pin is {wanted[:12]}{dirty}", action,
                              "at another commit", data))
        else:
            wrong = _submodules_off(checkout)
            if wrong:
                items.append(Item("sources", name, "differs", f"at its pin; {len(wrong)} submodule(s) are not at "
                                  f"their recorded commits ({', '.join(wrong[:2])})", f"update {name}'s submodules",
                                  "submodules moved", data))
            else:
                items.append(Item("sources", name, "ok", f"at {head[:12]}{dirty}", data=data))
    return items


def _submodules_off(checkout: Path) -> list[str]:
    from .gitcmd import git_result

    if not (checkout / ".gitmodules").is_file():
        return []
    status, out, _ = git_result(["submodule", "status", "--recursive"], cwd=checkout)
    return [line[1:].split()[1] for line in out.splitlines() if line.strip() and line[0] != " "] if status == 0 \
        else ["(git submodule status failed)"]


# --- artifacts -----------------------------------------------------------------------------------


def _artifacts(recipe: Recipe, lock: Lock | None, scope: Scope) -> list[Item]:
    cache = ArtifactCache((scope.cache_dir or user_cache_dir(os.environ)) / "downloads", ui=None)
    items = []
    for name, artifact in recipe.artifacts.items():
        expected = expected_sha256(lock, name, artifact)
        dest = Path(artifact.path)
        stamp = read_stamp(dest)
        data: dict[str, Any] = {"path": str(dest), "sha256": expected, "url": artifact.url}
        if stamp and (stamp.get("sha256") == expected or (expected is None and stamp.get("url") == artifact.url)):
            items.append(Item("artifacts", name, "ok", f"{stamp['sha256'][:12]} published at {dest}",
                              data={**data, "sha256": stamp["sha256"]}))
            continue
        now = f"another tree is at {dest}" if dest.exists() else f"not published at {dest}"
        sha = expected or cache.sha_seen_at(artifact.url)
        if sha and cache.blob(sha):
            items.append(Item("artifacts", name, "missing", now, f"unpack {name} from the download cache",
                              "downloaded before", data))
            continue
        part = cache.part_path(artifact.url)
        note = parse_source_note(part) or {}
        have = part.stat().st_size if part.is_file() and note.get("url") == artifact.url else 0
        size = _download_size(artifact, locked_artifact(lock, name, artifact.url), note, scope)
        data["download_bytes"] = None if size is None else max(size - have, 0)
        what = f"download {name} {human_bytes(size) if size else '(size unknown)'}"
        if have:
            what = f"resume downloading {name} at {human_bytes(have)}" + (f" of {human_bytes(size)}" if size else "")
        items.append(Item("artifacts", name, "missing", now, what, "not cached", data))
    return items


def _download_size(artifact: Artifact, locked: ArtifactLock | None, note: dict[str, Any], scope: Scope) -> int | None:
    """The size of the download, from what is known here before asking the server: the lock, a partial
    download's record of what the server said, the recipe, a local file; then (dry-run, online) the server."""
    for known in (locked.size if locked else None, note.get("total"), artifact.size):
        if known:
            return int(known)
    for url in candidate_urls(artifact.url, scope.mirrors):  # where the download would come from, in order
        local = url[len("file://"):] if url.startswith("file://") else None
        if local is not None or "://" not in url:
            path = Path(local or url).expanduser()
            size = path.stat().st_size if path.is_file() else None
        else:
            size = _remote_size(url) if scope.ask_sizes else None
        if size:
            return size
    return None


def _remote_size(url: str) -> int | None:
    """Content-Length of a HEAD request (redirects followed, a short timeout); a server that leaves it out
    is asked for one byte, whose Content-Range names the whole size."""
    if not url.startswith(("http://", "https://")):
        return None
    import requests

    headers = {"User-Agent": "flagtree-cpu", "Accept-Encoding": "identity"}  # the file's size, not a gzip of it
    try:
        response = requests.head(url, allow_redirects=True, timeout=(3, 5), headers=headers)
        length = response.headers.get("Content-Length", "")
        if response.ok and length.isdigit() and int(length) > 0:
            return int(length)
        with requests.get(url, headers={**headers, "Range": "bytes=0-0"}, stream=True, timeout=(3, 5)) as probe:
            total = probe.headers.get("Content-Range", "").rpartition("/")[2]
            return int(total) if probe.status_code == 206 and total.isdigit() else None
    except requests.RequestException:
        return None


# --- links ---------------------------------------------------------------------------------------


def _links(ctx: StageContext, sources_ready: bool) -> list[Item]:
    from .links import plan_links

    recipe = ctx.recipe
    if recipe.links is None:
        return []
    count = len(recipe.links.entries)
    root = ctx.workspace.root / recipe.source_path(recipe.links.root)
    if not root.is_dir():
        return [Item("links", f"{count} links", "missing", f"{recipe.links.root} is not checked out yet",
                     f"create {count} links", "after the sources")]
    plan = plan_links(recipe, ctx.workspace)
    if not sources_ready and not plan.all_ok:  # the sources move first; the links are planned again then
        return [Item("links", f"{count} links", "missing", f"{len(plan.with_state('ok'))} of {count} in place now",
                     f"create or fix {count - len(plan.with_state('ok'))} links", "after the sources")]
    counts = {s: len(plan.with_state(s)) for s in ("ok", "create", "update", "conflict", "dangling")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    if plan.all_ok:
        return [Item("links", f"{count} links", "ok", f"all {count} in place in {plan.root}")]
    blocked = plan.with_state("conflict", "dangling")
    if blocked:
        return [Item("links", f"{count} links", "conflict", summary,
                     f"stop: {blocked[0].path}: {blocked[0].detail}", "something is in the way",
                     {"links": [p.to_json() for p in plan.links]})]
    todo = counts["create"] + counts["update"]
    return [Item("links", f"{count} links", "missing", summary, f"create or fix {todo} links", "not in place",
                 {"links": [p.to_json() for p in plan.links]})]


# --- python, build, validation ---------------------------------------------------------------------


def _python(ctx: StageContext, scope: Scope) -> list[Item]:
    from . import pythonenv

    recipe, ws = ctx.recipe, ctx.workspace
    if scope.skip_build:
        return []
    wanted = list(recipe.python.build) + list(recipe.python.runtime)  # as setup's python stage installs them
    if not scope.python.exists():
        if scope.python != ws.venv_dir / "bin" / "python":
            return [Item("python", str(scope.python), "missing", "does not exist", "stop: --python must exist",
                         "missing")]
        names = ", ".join(r.requirement for r in wanted)
        return [Item("python", str(scope.python), "missing", "no workspace venv yet",
                     f"create the venv {ws.venv_dir}" + (f"; pip install {names}" if names else ""), "missing")]
    report = pythonenv.check(scope.python, wanted, os.pathsep.join([str(scope.python.parent),
                                                                    os.environ.get("PATH", "")]))
    if not report.missing:
        return [Item("python", str(scope.python), "ok", f"Python {report.version}; {len(wanted)} prerequisites "
                     "present")]
    return [Item("python", str(scope.python), "missing", f"Python {report.version}; missing: "
                 f"{', '.join(p.describe() for p in report.missing)}",
                 f"pip install {' '.join(p.requirement.requirement for p in report.missing)}", "missing",
                 {"missing": [p.name for p in report.missing]})]


def _build(ctx: StageContext, scope: Scope, inputs_ready: bool) -> list[Item]:
    from .build import build_freshness

    if ctx.recipe.build is None:
        return []
    if scope.skip_build:
        return [Item("build", "build", "skipped", "--skip-build")]
    stamp = read_state(ctx.workspace.state_dir / "build-editable.json", needs=("digest", "components"))
    if stamp is None:
        return [Item("build", "build", "missing", "no build stamp in this workspace", "build", "no previous build")]
    if not inputs_ready:
        moved = _moved_inputs(ctx, stamp)
        return [Item("build", "build", "stale", f"built before (stamp {stamp['digest'][:12]})", "build",
                     "; ".join(moved) if moved else "after the stages above", {"stamp": stamp["digest"]})]
    reasons = build_freshness(ctx, scope.python)
    if not reasons:
        return [Item("build", "build", "ok", f"up to date (stamp {stamp['digest'][:12]})",
                     data={"stamp": stamp["digest"]})]
    return [Item("build", "build", "stale", f"stamp {stamp['digest'][:12]} differs", "build", "; ".join(reasons),
                 {"stamp": stamp["digest"], "reasons": reasons})]


def _moved_inputs(ctx: StageContext, stamp: dict[str, Any]) -> list[str]:
    """What the pins change compared with the last build, before anything is synced or fetched."""
    lock = read_lock(ctx.workspace.lock_file) if ctx.workspace.lock_file.is_file() else None
    components = stamp.get("components", {})
    moved = []
    for name, recorded in components.get("sources", {}).items():
        source = ctx.recipe.sources.get(name)
        locked = lock.sources.get(name) if lock and source else None
        wanted = (source.commit if source else None) or (locked.commit if locked else None)
        if wanted and recorded.get("commit") != wanted.lower():
            moved.append(f"{name} moves {str(recorded.get('commit'))[:7]} -> {wanted[:7]}")
    for name, sha in components.get("artifacts", {}).items():
        artifact = ctx.recipe.artifacts.get(name)
        if artifact is None:
            continue
        wanted = expected_sha256(lock, name, artifact)
        if wanted and wanted != sha:
            moved.append(f"{name} changed ({str(sha)[:7]} -> {wanted[:7]})")
    return moved


def _validation(ctx: StageContext, scope: Scope, built_current: bool) -> list[Item]:
    from .validate import configured, current_validation, last_validation

    if not configured(ctx.recipe):
        return []
    if scope.skip_build or scope.skip_validate:  # --skip-build skips validation too: name the flag given
        return [Item("validation", "kernels", "skipped", "--skip-build" if scope.skip_build else "--skip-validate")]
    last = last_validation(ctx)
    kernels = len(configured(ctx.recipe))
    if last is None:
        return [Item("validation", "kernels", "missing", "no validation report in this workspace",
                     f"run {kernels} kernels", "never validated")]
    summary = last.get("summary", {})
    figures = f"{summary.get('pass', 0)} passed, {summary.get('fail', 0)} failed, {summary.get('skip', 0)} skipped"
    when = f"{figures} at {last.get('started', '?')}"
    data = {"last": {"ok": last.get("ok"), "started": last.get("started"), "summary": summary}}
    if not last.get("ok"):
        return [Item("validation", "kernels", "failed", when, f"run {kernels} kernels", "failed last time", data)]
    if built_current and current_validation(ctx, scope.python, scope.model):
        return [Item("validation", "kernels", "ok", f"passed for this build: {when}", data=data)]
    reason = "after the build" if not built_current else "the build, interpreter or expectations changed since"
    return [Item("validation", "kernels", "stale", f"passed before: {when}", f"run {kernels} kernels", reason, data)]

