"""The workspace lock file (``.flagtree-cpu/lock.yaml``): what a recipe resolved to, exactly.

A recipe may leave a source unpinned (flagtree-cpu ``ref: main``) or an artifact without
a sha256. The first run resolves them and records the result here — every repository
and submodule commit, patches applied, artifact digests, the recipe digest and the tool
version — and later runs reuse it, so a workspace does not drift when ``main`` moves.
``--update`` re-resolves; ``--frozen`` refuses to change it.

The file is YAML, written atomically, and validated with the same engine as recipes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml

from . import __version__
from .atomic import write_atomic
from .errors import UsageError
from .recipe import schema as rs
from .recipe.schema import spec

if TYPE_CHECKING:
    from .recipe import Artifact

LOCK_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class SubmoduleLock:
    path: str = spec("submodule path inside the source (nested ones joined with '/')")
    url: str = spec("submodule URL from .gitmodules")
    commit: str = spec("the gitlink commit")


@dataclass(frozen=True, kw_only=True)
class PatchLock:
    file: str = spec("patch file name")
    sha256: str = spec("sha256 of the patch as applied")


@dataclass(frozen=True, kw_only=True)
class SourceLock:
    url: str = spec("repository URL")
    ref: str | None = spec("branch or tag", default=None)
    commit: str = spec("the checked-out commit")
    resolved_from: Literal["recipe", "ref"] = spec("where the commit came from: the recipe's pin, or "
                                                   "resolving the ref", default="recipe")
    submodules: tuple[SubmoduleLock, ...] = spec("submodules at their gitlinks", default=())
    patches: tuple[PatchLock, ...] = spec("patches applied", default=())


@dataclass(frozen=True, kw_only=True)
class ArtifactLock:
    url: str = spec("download URL (what the recipe says; mirrors are recorded in served_from)")
    sha256: str = spec("sha256 of the download")
    size: int | None = spec("bytes", default=None)
    served_from: str | None = spec("the URL or file the bytes came from", default=None)


@dataclass(frozen=True, kw_only=True)
class Lock:
    lock_version: int = spec("lock file format version")
    tool_version: str = spec("flagtree-cpu version that wrote it")
    recipe: str = spec("recipe name")
    recipe_digest: str = spec("sha256 of the normalized recipe when written")
    sources: dict[str, SourceLock] = spec("sources", default_factory=dict)
    artifacts: dict[str, ArtifactLock] = spec("artifacts", default_factory=dict)


def empty_lock(recipe_name: str, recipe_digest: str) -> Lock:
    return Lock(lock_version=LOCK_VERSION, tool_version=__version__, recipe=recipe_name,
                recipe_digest=recipe_digest)


def locked_artifact(lock: Lock | None, name: str, url: str) -> ArtifactLock | None:
    """The lock's entry for artifact ``name`` if it was recorded for this URL (another URL is another file)."""
    entry = lock.artifacts.get(name) if lock else None
    return entry if entry and entry.url == url else None


def expected_sha256(lock: Lock | None, name: str, artifact: Artifact) -> str | None:
    """What the artifact's download must hash to: the recipe's sha256, else the lock's for the same URL."""
    entry = locked_artifact(lock, name, artifact.url)
    return (artifact.sha256 or "").lower() or (entry.sha256 if entry else None)


def read_lock(path: Path) -> Lock | None:
    """The lock at ``path``, or None when there is none yet.

    Any damage — not YAML, hostile YAML, a folder, unreadable, not UTF-8, cut short by a full
    disk, wrong types — is a UsageError that names the file and the way out. The lock only
    records what can be resolved again, so moving it aside loses nothing.
    """
    import shlex

    from .recipe import loader as recipe_yaml  # the bounded reader recipes use: a lock on disk is as untrusted

    fix = (f"move it aside and resolve again: mv {shlex.quote(str(path))} {shlex.quote(f'{path}.damaged')}, "
           "then `flagtree-cpu lock` (with this run's --workdir and --recipe)")
    try:
        text = recipe_yaml.read_text(path)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise UsageError(f"lock file {path} is a folder, not a file", fix=fix) from None
    except PermissionError:
        raise UsageError(f"cannot read lock file {path}: permission denied",
                         fix=f"make it readable (chmod u+rw {shlex.quote(str(path))}), or {fix}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"lock file {path}:{recipe_yaml.utf8_error_line(exc)} is damaged: not UTF-8 text",
                         fix=fix) from None
    except OSError as exc:
        raise UsageError(f"cannot read lock file {path}: {exc.strerror or exc}", fix=fix) from None
    loaded = recipe_yaml.load(text, str(path))
    if loaded.problems:
        first = loaded.problems[0]
        raise UsageError(f"lock file {first.where} is damaged: {first.message}", fix=fix)
    if not isinstance(loaded.data, dict) or loaded.data.get("lock_version") != LOCK_VERSION:
        what = "empty" if loaded.data is None else f"not a version-{LOCK_VERSION} flagtree-cpu lock"
        raise UsageError(f"lock file {path} is {what}", fix=fix)
    ctx = rs.Context()
    lock = rs.convert(loaded.data, Lock, ctx)
    if ctx.problems:
        first = ctx.problems[0]
        line = loaded.position(first.path).line
        raise UsageError(f"lock file {path}:{line} is damaged at {'.'.join(map(str, first.path))}: "
                         f"{first.message}", fix=fix)
    return lock


# setup runs sync and fetch in two threads; each changes its own part of the same file.
_UPDATING = threading.Lock()


def update_lock(path: Path, recipe_name: str, recipe_digest: str, change: Callable[[Lock], Lock]) -> None:
    """Read, change and write the lock file as one step, so concurrent stages never lose each other's part."""
    with _UPDATING:
        old = read_lock(path)
        new = change(old or empty_lock(recipe_name, recipe_digest))
        if new != old:
            write_lock(path, new)


def write_lock(path: Path, lock: Lock) -> None:
    """Write atomically: a reader sees the old lock or the new one, never half of one."""
    lock = replace(lock, tool_version=__version__)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# Written by flagtree-cpu: what this workspace's recipe resolved to.\n"
              "# Keep it next to the recipe to reproduce the workspace; `flagtree-cpu sync --update`\n"
              "# re-resolves, `--frozen` refuses to change it.\n")
    body = yaml.safe_dump(rs.to_data(lock), sort_keys=False, width=100)
    # a lock file is shared (committed next to a CI config), so it gets the permissions any file of this
    # user would, which is write_atomic's default; and it is the one record that cannot be made again
    write_atomic(path, header + body, durable=True)
