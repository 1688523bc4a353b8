"""What a recipe pins and puts in the tree: git sources, downloaded artifacts, symlinks.

Frozen dataclasses, like the rest of the format (``model``); their fields' ``spec`` carry
the documentation and checks that drive the loader and the JSON Schema. The rules that
look across all sources (``inside`` chains, overlapping checkouts) live here too, because
``Recipe.check`` and the checkout paths need them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .checks import (
    check_arches,
    check_artifact_sizes,
    check_commit,
    check_download_url,
    check_file_in_source,
    check_git_url,
    check_link_path,
    check_no_artifact_placeholders,
    check_placeholders,
    check_sha256,
    check_source_path,
    check_source_ref,
    escapes,
    find_patch,
)
from .schema import Context, Path_, spec


@dataclass(frozen=True, kw_only=True)
class Probe:
    """A cheap compatibility check on a source, run before any long step."""

    file: str = spec("file (relative to the source) that must exist", checks=check_file_in_source)
    contains: str | None = spec("text the file must contain", default=None)
    why: str = spec("what a failure means and what to do, shown to the user")


@dataclass(frozen=True, kw_only=True)
class Source:
    """A git repository checked out at a pinned commit."""

    url: str = spec("where to clone from", checks=check_git_url)
    ref: str | None = spec("branch or tag the commit belongs to; resolved once and locked when "
                           "`commit` is absent", default=None)
    commit: str | None = spec("the pinned commit (full 40-hex id)", default=None, checks=check_commit,
                              json={"pattern": "^[0-9a-fA-F]{40}$"})
    path: str | None = spec("checkout folder, relative to the workdir (or to the `inside` source);"
                            " default: the source name", default=None, checks=check_source_path)
    inside: str | None = spec("name of the source this one is checked out inside", default=None,
                              checks=check_source_ref)
    submodules: Literal["none", "recursive"] = spec("submodules to check out at their recorded "
                                                    "commits", default="none")
    shallow: bool = spec("fetch only the pinned commit on first clone", default=False)
    filter: Literal["blob:none", "tree:0"] | None = spec("partial-clone filter for the first clone",
                                                        default=None)
    patches: tuple[str, ...] = spec("patch files (under patches/) applied after checkout",
                                    default=())
    probes: tuple[Probe, ...] = spec("compatibility probes run after checkout", default=())

    def check(self, ctx: Context, path: Path_) -> None:
        if self.ref is None and self.commit is None:
            ctx.report(path, "a source needs `ref` (a branch or tag), `commit`, or both",
                       "add `ref: main` to follow a branch (resolved once, then locked)")
        for i, patch in enumerate(self.patches):
            if find_patch(patch, ctx.facts.get("patch_dirs", ())) is None:
                dirs = " or ".join(str(d) for d in ctx.facts.get("patch_dirs", ()))
                ctx.report(path + ("patches", i), f"patch file {patch!r} not found in {dirs}",
                           "put the file there, or fix its name")


@dataclass(frozen=True, kw_only=True)
class HostSelector:
    """Which hosts an artifact variant is for; every listed condition must hold."""

    os_id: tuple[str, ...] = spec("/etc/os-release ID values, e.g. almalinux", default=())
    arch: tuple[str, ...] = spec("architectures", default=(), checks=check_arches)

    def check(self, ctx: Context, path: Path_) -> None:
        if not self.os_id and not self.arch:
            ctx.report(path, "`when` needs at least one condition (os_id or arch)")

    def matches(self, os_id: str, arch: str) -> bool:
        return (not self.os_id or os_id in self.os_id) and (not self.arch or arch in self.arch)


@dataclass(frozen=True, kw_only=True)
class ArtifactVariant:
    """Replacement url/sha256/path for the hosts matched by `when` (first match wins)."""

    when: HostSelector = spec("the hosts this variant is for")
    url: str | None = spec("download URL on those hosts", default=None,
                           checks=(check_download_url, check_no_artifact_placeholders,
                                   check_placeholders), interpolate=True)
    sha256: str | None = spec("expected sha256 on those hosts", default=None, checks=check_sha256)
    path: str | None = spec("publish path on those hosts", default=None, interpolate=True,
                            checks=(check_no_artifact_placeholders, check_placeholders))
    size: int | None = spec("approximate download size in bytes", default=None, json={"minimum": 1})
    unpacked_size: int | None = spec("approximate unpacked size in bytes on those hosts", default=None,
                                     json={"minimum": 1})
    unpacked_entries: int | None = spec("approximate number of files, folders and links on those hosts",
                                        default=None, json={"minimum": 1})

    def check(self, ctx: Context, path: Path_) -> None:
        check_artifact_sizes(self, ctx, path)


@dataclass(frozen=True, kw_only=True)
class SourcePin:
    """Ties an artifact to a source file: the file's first `chars` characters must appear
    in the artifact URL (FlagTree names its LLVM tarball after cmake/llvm-hash.txt)."""

    source: str = spec("source holding the file", checks=check_source_ref)
    file: str = spec("file in that source", checks=check_file_in_source)
    chars: int = spec("how many leading characters of the file must appear in the URL",
                      default=8, json={"minimum": 1, "maximum": 64})

    def check(self, ctx: Context, path: Path_) -> None:
        if not 1 <= self.chars <= 64:
            ctx.report(path + ("chars",), f"chars must be between 1 and 64, got {self.chars}")


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """A downloaded, verified and unpacked toolchain (e.g. the LLVM prebuilt)."""

    url: str = spec("download URL", checks=(check_download_url, check_no_artifact_placeholders,
                                            check_placeholders), interpolate=True)
    sha256: str | None = spec("expected sha256; absent = recorded on first download (lock file)",
                              default=None, checks=check_sha256,
                              json={"pattern": "^[0-9a-fA-F]{64}$"})
    kind: Literal["tarball"] = spec("archive kind", default="tarball")
    path: str = spec("where the unpacked tree is published (relative = inside the workdir)",
                     interpolate=True, checks=(check_no_artifact_placeholders, check_placeholders))
    strip_components: int = spec("leading path components to drop while unpacking", default=0,
                                 json={"minimum": 0})
    version_file: str | None = spec("file written inside the tree holding the URL exactly", default=None,
                                    checks=check_file_in_source)
    size: int | None = spec("approximate download size in bytes (for plans and the free-space check)",
                            default=None, json={"minimum": 1})
    unpacked_size: int | None = spec(
        "approximate size of the unpacked tree in bytes (`du -sb`); checked against free space before "
        "unpacking, and unpacking stops beyond twice this (an archive bomb). Absent: the limit is 20 times "
        "the download", default=None, json={"minimum": 1})
    unpacked_entries: int | None = spec(
        "approximate number of files, folders and links in the tarball (`tar -tf FILE | wc -l`); unpacking "
        "stops beyond twice this. Absent: the limit is 200,000", default=None, json={"minimum": 1})
    matches: SourcePin | None = spec("consistency rule against a source file", default=None)
    variants: tuple[ArtifactVariant, ...] = spec("per-host replacements", default=())

    def check(self, ctx: Context, path: Path_) -> None:
        if self.strip_components < 0:
            ctx.report(path + ("strip_components",), "strip_components cannot be negative")
        check_artifact_sizes(self, ctx, path)


@dataclass(frozen=True, kw_only=True)
class Link:
    """One symlink: `path` relative to the root source, `target` relative to the link's folder."""

    path: str = spec("where the link is created, relative to the root source", checks=check_link_path)
    target: str = spec("what the link points to, relative to the link's own folder (an existing link "
                       "that reaches the same place through an absolute path is accepted as it is)")

    def check(self, ctx: Context, path: Path_) -> None:
        if self.target.startswith("/"):
            ctx.report(path + ("target",), f"target {self.target!r} is absolute; links must be "
                       "relative so the tree can be moved", "write it relative to the link's folder")
            return
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(self.path), self.target))
        if escapes(resolved):
            ctx.report(path + ("target",), f"target {self.target!r} resolves outside the root "
                       f"source (to {resolved!r})", "count the '../' parts again: the target is "
                       "relative to the folder that holds the link")
        elif resolved == posixpath.normpath(self.path):
            ctx.report(path + ("target",), "the link points at itself")


@dataclass(frozen=True, kw_only=True)
class Links:
    """Symlinks created inside one source's checkout."""

    root: str = spec("the source whose checkout holds the links", checks=check_source_ref)
    entries: tuple[Link, ...] = spec("the links")

    def check(self, ctx: Context, path: Path_) -> None:
        seen: dict[str, int] = {}
        for i, link in enumerate(self.entries):
            key = posixpath.normpath(link.path)
            if key in seen:
                ctx.report(path + ("entries", i, "path"), f"duplicate link path {link.path!r} "
                           f"(also entry {seen[key]})", "delete one of the two entries")
            seen.setdefault(key, i)
        for i, link in enumerate(self.entries):
            key = posixpath.normpath(link.path)
            for other, j in seen.items():
                if key.startswith(other + "/"):
                    ctx.report(path + ("entries", i, "path"), f"link path {link.path!r} lies "
                               f"inside link {other!r} (entry {j}); it would be created through "
                               "the other link", "link the folder or its files, not both")


# --- rules across sources ----------------------------------------------------------------


def check_source_tree(sources: Mapping[str, Source], ctx: Context, path: Path_) -> None:
    """`inside` chains end, and no checkout lies in another's folder unless declared `inside` it."""
    for name in sources:  # `inside` chains must end
        seen = [name]
        current = sources[name].inside
        while current is not None and current in sources:
            if current in seen:
                chain = " -> ".join(seen + [current])
                ctx.report(path + (name, "inside"), f"sources are inside each other in a circle: {chain}")
                return
            seen.append(current)
            current = sources[current].inside
    recipe_paths = {name: checkout_path(sources, name) for name in sources}
    for name, rel in recipe_paths.items():
        for other, other_rel in recipe_paths.items():
            if other == name:
                continue
            if rel == other_rel and name < other:
                ctx.report(path + (other, "path"), f"sources {name!r} and {other!r} use the same "
                           f"folder {rel!r}", "give each source its own `path`")
            elif rel.startswith(other_rel + "/") and not _is_inside(sources, name, other):
                ctx.report(path + (name, "path"), f"the checkout {rel!r} lies inside source "
                           f"{other!r}'s checkout", f"declare `inside: {other}` and make `path` "
                           "relative to it, so it is cloned after its parent")


def checkout_path(sources: Mapping[str, Source], name: str) -> str:
    """Source ``name``'s checkout folder relative to the workdir, following `inside`."""
    source = sources[name]
    own = source.path or name
    if source.inside:
        return posixpath.normpath(posixpath.join(checkout_path(sources, source.inside), own))
    return posixpath.normpath(own)


def _is_inside(sources: Mapping[str, Source], name: str, ancestor: str) -> bool:
    current = sources[name].inside
    while current is not None:
        if current == ancestor:
            return True
        current = sources[current].inside
    return False

