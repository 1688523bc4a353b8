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

# Version 2 added `reads` and `requirements_files` (and what later rounds add beside them). A lock that holds
# none of them is written as version 1, so a workspace that uses none stays readable by an older flagtree-cpu;
# one that holds them is version 2, which an older tool refuses by its version instead of by an unknown key.
LOCK_VERSION = 2
READ_VERSIONS = (1, 2)
_V2_KEYS = ("reads", "requirements_files")


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
    resolved_from: Literal["recipe", "ref", "read"] = spec("where the commit came from: the recipe's pin, "
                                                           "another source's file (commit_from), or "
                                                           "resolving the ref", default="recipe")
    submodules: tuple[SubmoduleLock, ...] = spec("submodules at their gitlinks", default=())
    patches: tuple[PatchLock, ...] = spec("patches applied", default=())


@dataclass(frozen=True, kw_only=True)
class ArtifactLock:
    url: str = spec("download URL (what the recipe says; mirrors are recorded in served_from)")
    sha256: str = spec("sha256 of the download")
    size: int | None = spec("bytes", default=None)
    served_from: str | None = spec("the URL or file the bytes came from", default=None)
    digest: dict[str, str] = spec("the other digests the recipe stated (md5, sha512) and the download matched; "
                                  "absent when it stated none", default_factory=dict)

    def agrees_with(self, stated: dict[str, str]) -> bool:
        """This entry records the same digests the recipe states now (so its sha256 is of the file the recipe
        means); an entry written before the recipe stated an md5 cannot say, and is not used."""
        recorded = {**{k.lower(): v.lower() for k, v in self.digest.items()}, "sha256": self.sha256.lower()}
        return all(recorded.get(algorithm) == value for algorithm, value in stated.items())


@dataclass(frozen=True, kw_only=True)
class RequirementsFileLock:
    source: str = spec("the source the file was read from")
    file: str = spec("its path inside the source")
    commit: str | None = spec("the source's commit when it was read (as this lock records it)", default=None)
    files: dict[str, str] = spec("each file read (it and its -r includes) -> sha256", default_factory=dict)
    requirements: tuple[str, ...] = spec("the requirements it listed", default=())


@dataclass(frozen=True, kw_only=True)
class ReadLock:
    source: str = spec("the source whose file was read")
    file: str = spec("the file, relative to the source's checkout")
    commit: str | None = spec("the source's commit when it was read", default=None)
    value: str = spec("the value read")


@dataclass(frozen=True, kw_only=True)
class Lock:
    lock_version: int = spec("lock file format version")
    tool_version: str = spec("flagtree-cpu version that wrote it")
    recipe: str = spec("recipe name")
    recipe_digest: str = spec("sha256 of the normalized recipe when written")
    variant: str | None = spec("the recipe's variant it was written for", default=None)
    sources: dict[str, SourceLock] = spec("sources", default_factory=dict)
    artifacts: dict[str, ArtifactLock] = spec("artifacts", default_factory=dict)
    requirements_files: dict[str, RequirementsFileLock] = spec(
        "what each requirements_file entry of python.build/runtime read (key: python.build[2])", default_factory=dict)
    reads: dict[str, ReadLock] = spec("values read from sources' files, by placeholder (artifacts.NAME.match.X)",
                                      default_factory=dict)


def empty_lock(recipe_name: str, recipe_digest: str, variant: str | None = None) -> Lock:
    return Lock(lock_version=LOCK_VERSION, tool_version=__version__, recipe=recipe_name,
                recipe_digest=recipe_digest, variant=variant)


def locked_artifact(lock: Lock | None, name: str, url: str) -> ArtifactLock | None:
    """The lock's entry for artifact ``name`` if it was recorded for this URL (another URL is another file)."""
    entry = lock.artifacts.get(name) if lock else None
    return entry if entry and entry.url == url else None


def expected_digests(lock: Lock | None, name: str, artifact: Artifact) -> dict[str, str]:
    """What the artifact's download must hash to (algorithm -> hex): every digest the recipe states, plus the
    lock's sha256 for the same URL when the recipe states none and the lock entry agrees with what it does
    state. Empty: nothing is known yet (trust on first use)."""
    stated = artifact.expected_digests()
    entry = locked_artifact(lock, name, artifact.url)
    if "sha256" not in stated and entry is not None and entry.agrees_with(stated):
        return {**stated, "sha256": entry.sha256.lower()}
    return stated


def expected_sha256(lock: Lock | None, name: str, artifact: Artifact) -> str | None:
    """The sha256 the artifact's download must have (the cache key), if known before downloading: the recipe's,
    else the lock's for the same URL. An artifact that states only an md5 has none until its first download."""
    return expected_digests(lock, name, artifact).get("sha256")


def read_lock(path: Path) -> Lock | None:
    """The lock at ``path``, or None when there is none yet.

    Any damage — not YAML, hostile YAML, a folder, unreadable, not UTF-8, cut short by a full
    disk, wrong types — is a UsageError that names the file and the way out. The lock only
    records what can be resolved again, so moving it aside loses nothing.
    """
    import shlex

    from .recipe import loader as recipe_yaml  # the bounded reader recipes use: a lock on disk is as untrusted

    fix = (f"move it aside and resolve again: mv {shlex.quote(str(path))} {shlex.quote(f'{path}.damaged')}, "
           "then `flagtree-cpu lock`")
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
    version = loaded.data.get("lock_version") if isinstance(loaded.data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > LOCK_VERSION:
        raise UsageError(f"lock file {path} is lock version {version}, which is newer than this flagtree-cpu "
                         f"({__version__} reads versions {' and '.join(map(str, READ_VERSIONS))})",
                         fix=f"upgrade flagtree-cpu to the version that wrote it, or {fix}")
    if version not in READ_VERSIONS or isinstance(version, bool):
        what = "empty" if loaded.data is None else "not a flagtree-cpu lock (its lock_version is not 1 or 2)"
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


def update_lock(path: Path, recipe_name: str, recipe_digest: str, change: Callable[[Lock], Lock], *,
                variant: str | None = None) -> None:
    """Read, change and write the lock file as one step, so concurrent stages never lose each other's part.
    The lock records the variant it was last written for (``--variant``)."""
    with _UPDATING:
        old = read_lock(path)
        new = replace(change(old or empty_lock(recipe_name, recipe_digest, variant)), variant=variant)
        if new != old:
            write_lock(path, new)


def write_lock(path: Path, lock: Lock) -> None:
    """Write atomically: a reader sees the old lock or the new one, never half of one."""
    lock = replace(lock, tool_version=__version__)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# Written by flagtree-cpu: what this workspace's recipe resolved to.\n"
              "# Keep it next to the recipe to reproduce the workspace; `flagtree-cpu sync --update`\n"
              "# re-resolves, `--frozen` refuses to change it.\n")
    data = rs.to_data(lock)
    for key in _V2_KEYS:
        if not data.get(key):
            data.pop(key, None)  # a recipe that reads nothing keeps the lock it had
    data["lock_version"] = 2 if any(key in data for key in _V2_KEYS) else 1
    for entry in data.get("artifacts", {}).values():
        if not entry.get("digest"):
            entry.pop("digest", None)  # most artifacts state only a sha256: their entries stay as they were
    body = yaml.safe_dump(data, sort_keys=False, width=100)
    # a lock file is shared (committed next to a CI config), so it gets the permissions any file of this
    # user would, which is write_atomic's default; and it is the one record that cannot be made again
    write_atomic(path, header + body, durable=True)
