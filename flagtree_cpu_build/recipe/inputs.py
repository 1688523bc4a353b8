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

from ..artifact_kinds import DEFAULT_KIND, FOLDER_KINDS, KINDS, KINDS_SUMMARY, ArtifactKind
from .checks import (
    check_commit,
    check_digest_agrees,
    check_digests,
    check_download_url,
    check_file_in_source,
    check_git_url,
    check_link_path,
    check_sha256,
    check_source_path,
    check_source_ref,
    escapes,
    find_patch,
)
from .link_values import check_link_placeholders
from .pins import CommitFrom, RefFrom, SourcePin
from .placeholder_checks import check_artifact_placeholders, check_no_artifact_placeholders
from .reads import check_reads
from .schema import Context, Path_, spec
from .selector import HostSelector, Selector, SelectorFacts  # noqa: F401 (their home before selector.py)


@dataclass(frozen=True, kw_only=True)
class Probe:
    """A cheap compatibility check on a source, run before any long step."""

    file: str = spec("file (relative to the source) that must exist", checks=check_file_in_source)
    contains: str | None = spec("text the file must contain", default=None)
    why: str = spec("what a failure means and what to do, shown to the user")


@dataclass(frozen=True, kw_only=True)
class Patch:
    """A patch applied after checkout: a file under the recipe's patches/ folders (written as a bare
    string), or a file of one of the recipe's sources (`from`); `into` runs `git apply` in a folder of the
    checkout, e.g. a submodule (spine-triton applies its own patch/triton.patch inside its triton submodule)."""

    SHORTHAND = "file"  # a bare string means {file: <string>}

    file: str = spec("the patch: a file name under the recipe's patches/ folders, or with `from`, a path in "
                     "that source's checkout")
    from_source: str | None = spec("the source whose checkout holds the file (the patched source itself, or "
                                   "another one of this recipe); read after checkout", key="from", default=None,
                                   checks=check_source_ref)
    into: str | None = spec("folder of the patched checkout the patch applies to (e.g. a submodule); default: "
                            "the checkout's top", default=None, checks=check_file_in_source)
    when: Selector | None = spec("the hosts (and variants) the patch is for; elsewhere it is not applied (and one "
                                 "applied before is taken back), and the plan says why", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        if self.from_source is not None:  # a path in a checkout: it must stay inside it (found after sync)
            check_file_in_source(self.file, ctx, path + ("file",))

    @property
    def label(self) -> str:
        """How the lock file and messages name it: the file name for a recipe patch (as before `from` and
        `into` existed), ``SOURCE:PATH`` for a source's file, `` into FOLDER`` added for a folder."""
        own = f"{self.from_source}:{self.file}" if self.from_source else posixpath.basename(self.file)
        return f"{own} into {self.folder}" if self.folder else own

    @property
    def folder(self) -> str:
        """``into`` normalized; "" for the checkout's top."""
        folder = posixpath.normpath(self.into) if self.into else "."
        return "" if folder == "." else folder


@dataclass(frozen=True, kw_only=True)
class Source:
    """A git repository checked out at a pinned commit."""

    url: str = spec("where to clone from", checks=check_git_url)
    ref: str | None = spec("branch or tag the commit belongs to; resolved once and locked when "
                           "`commit` is absent", default=None)
    commit: str | None = spec("the pinned commit (full 40-hex id)", default=None, checks=check_commit)
    commit_from: CommitFrom | None = spec("read the commit from another source's file after that one is checked "
                                          "out (e.g. llvm-project at FlagTree's cmake/llvm-hash.txt); recorded in "
                                          "the lock", default=None)
    ref_from: RefFrom | None = spec("read the branch or tag from another source's file after that one is checked "
                                    "out (e.g. googletest at the GIT_TAG of Triton's unittest/googletest.cmake); "
                                    "resolved to a commit once and recorded in the lock", default=None)
    path: str | None = spec("checkout folder, relative to the workdir (or to the `inside` source);"
                            " default: the source name", default=None, checks=check_source_path)
    inside: str | None = spec("name of the source this one is checked out inside", default=None,
                              checks=check_source_ref)
    submodules: Literal["none", "recursive"] = spec("submodules to check out at their recorded "
                                                    "commits", default="none")
    shallow: bool = spec("fetch only the pinned commit on first clone", default=False)
    filter: Literal["blob:none", "tree:0"] | None = spec("partial-clone filter for the first clone",
                                                        default=None)
    patches: tuple[Patch, ...] = spec("patches applied after checkout (and submodules), each once: a file name "
                                      "under patches/, or {file, from, into}", default=())
    probes: tuple[Probe, ...] = spec("compatibility probes run after checkout", default=())
    # filled in for a host (resolve.select_variants): the labels of the patches whose `when` does not hold there
    skipped_patches: tuple[str, ...] = spec("patches not applied on this host", default=(), internal=True)

    @property
    def pin_reader(self) -> tuple[CommitFrom | RefFrom | None, str]:
        """The rule that reads this source's pin from another source's file, and its key (none: None, "")."""
        if self.commit_from is not None:
            return self.commit_from, "commit_from"
        if self.ref_from is not None:
            return self.ref_from, "ref_from"
        return None, ""

    def check(self, ctx: Context, path: Path_) -> None:
        if self.ref is None and self.commit is None and self.commit_from is None and self.ref_from is None:
            ctx.report(path, "a source needs `ref` (a branch or tag), `commit`, or both (or `commit_from` or "
                       "`ref_from`)", "add `ref: main` to follow a branch (resolved once, then locked)")
        if self.ref_from is not None and (self.ref, self.commit, self.commit_from) != (None, None, None):
            ctx.report(path + ("ref_from",), "give `ref_from` alone: the file names the branch or tag, and the lock "
                       "the commit it resolved to", "delete ref, commit and commit_from from this source")
        if self.commit is not None and self.commit_from is not None:
            ctx.report(path + ("commit_from",), "give `commit` or `commit_from`, not both",
                       "keep commit_from to follow the file, or commit to pin by hand")
        seen: dict[str, int] = {}
        for i, patch in enumerate(self.patches):
            where = path + ("patches", i)
            if patch.label in seen:
                ctx.report(where, f"patch {patch.label!r} is listed twice (also entry {seen[patch.label]})",
                           "delete one of the two entries")
            seen.setdefault(patch.label, i)
            # a source's own file can only be looked for once it is checked out (sync says when it is missing)
            if patch.from_source is None and find_patch(patch.file, ctx.facts.get("patch_dirs", ())) is None:
                dirs = " or ".join(str(d) for d in ctx.facts.get("patch_dirs", ()))
                ctx.report(where, f"patch file {patch.file!r} not found in {dirs}",
                           "put the file there, or fix its name; a patch kept in a source's checkout is written "
                           "{file: PATH, from: SOURCE}")


@dataclass(frozen=True, kw_only=True)
class ArtifactVariant:
    """Replacement url/sha256/path for the hosts matched by `when` (first match wins)."""

    when: Selector = spec("the hosts (and variants) this replacement is for")
    url: str | None = spec("download URL on those hosts", default=None,
                           checks=(check_download_url, check_no_artifact_placeholders,
                                   check_artifact_placeholders), interpolate=True)
    sha256: str | None = spec("expected sha256 on those hosts", default=None, checks=check_sha256)
    digest: dict[str, str] = spec("expected digests on those hosts: md5, sha256 and/or sha512", default_factory=dict,
                                  checks=check_digests)
    path: str | None = spec("publish path on those hosts", default=None, interpolate=True,
                            checks=(check_no_artifact_placeholders, check_artifact_placeholders))
    size: int | None = spec("approximate download size in bytes", default=None, json={"minimum": 1})
    unpacked_size: int | None = spec("approximate unpacked size in bytes on those hosts", default=None,
                                     json={"minimum": 1})
    unpacked_entries: int | None = spec("approximate number of files, folders and links on those hosts",
                                        default=None, json={"minimum": 1})
    root: ArtifactRoot | None = spec("which folder of the archive is published on those hosts (another archive "
                                     "may hold its tree elsewhere)", default=None)

    def check(self, ctx: Context, path: Path_) -> None:
        check_digest_agrees(self, ctx, path)


@dataclass(frozen=True, kw_only=True)
class ArtifactRoot:
    """Which folder of the archive becomes the published tree."""

    strip: int = spec("leading path components to drop while unpacking", default=0, json={"minimum": 0})
    find: str | None = spec("publish the shallowest folder that holds this entry (e.g. bin) instead", default=None,
                            checks=check_file_in_source)

    def check(self, ctx: Context, path: Path_) -> None:
        if self.strip < 0:
            ctx.report(path + ("strip",), "strip cannot be negative")
        if self.strip and self.find:
            ctx.report(path, "give strip or find, not both", "find already picks the folder to publish")


@dataclass(frozen=True, kw_only=True)
class AfterUnpack:
    """A clean-up applied to the unpacked tree before it is published."""

    remove: str = spec("a glob, relative to the published tree, of what to delete (e.g. sysroot/lib64/cmake/*)",
                       checks=check_file_in_source)


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """A downloaded, verified and unpacked toolchain (e.g. the LLVM prebuilt)."""

    url: str = spec("download URL; {match} / {match.NAME} are values read from a source's file (`matches`)",
                    checks=(check_download_url, check_no_artifact_placeholders, check_artifact_placeholders),
                    interpolate=True)
    sha256: str | None = spec("expected sha256; absent = recorded on first download (lock file)",
                              default=None, checks=check_sha256)
    digest: dict[str, str] = spec("expected digests: md5, sha256 and/or sha512 (any one verifies the download; "
                                  "sha256 is also computed, as the cache key); a value may be {match.NAME}, read "
                                  "from a source's file", default_factory=dict,
                                  checks=check_digests)
    kind: ArtifactKind = spec(KINDS_SUMMARY, default=DEFAULT_KIND)
    path: str = spec("where the unpacked tree is published (relative = inside the workdir); may use {match}",
                     interpolate=True, checks=(check_no_artifact_placeholders, check_artifact_placeholders))
    root: ArtifactRoot = spec("which folder of the archive is published", default_factory=ArtifactRoot)
    after_unpack: tuple[AfterUnpack, ...] = spec("clean-ups applied before publishing", default=())
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
    matches: SourcePin | tuple[SourcePin, ...] | None = spec(
        "values read from a source's file after sync (one rule or a list): {match} in url, path and digest is the "
        "first rule's value, {match.NAME} a rule's `as: NAME` or a regex's named group; recorded in the lock. With "
        "the URL written out, each rule checks that its value appears in it", default=None)
    variants: tuple[ArtifactVariant, ...] = spec("per-host replacements", default=())
    publish: Literal["own", "shared"] = spec(
        "own: this recipe's tree in this workspace (fetch replaces one another recipe or workspace published only "
        "with --replace NAME); shared: a versioned folder of a cache many workspaces and recipes use (~/.triton/"
        "nvidia/ptxas/<version>): reused when the digests fit, never replaced nor cleaned", default="own")
    read_names: tuple[str, ...] = spec("the {match...} names url, path and digest use (set when resolved)",
                                       default=(), internal=True)
    choosing: tuple[str, ...] = spec("the {match...} names a variant's `when.match` needs that are not read yet: "
                                     "which variant applies is decided after sync (set when resolved)", default=(),
                                     internal=True)
    read_in: dict[str, tuple[str, ...]] = spec("which of url, path, digest and variants use each {match...} "
                                               "name (set when resolved)", default_factory=dict, internal=True)

    def check(self, ctx: Context, path: Path_) -> None:
        check_digest_agrees(self, ctx, path)
        check_reads(self, ctx, path)
        if not KINDS[self.kind].folders and (self.root.strip or self.root.find or self.after_unpack):
            ctx.report(path + ("kind",), f"{KINDS[self.kind].summary} has no folders: root and after_unpack do not "
                       "apply", f"remove them, or set kind: {' / '.join(FOLDER_KINDS)}")

    def expected_digests(self) -> dict[str, str]:
        """Every digest the recipe states, lower-case (sha256 from either key)."""
        found = {k.lower(): v.lower() for k, v in self.digest.items()}
        if self.sha256:
            found["sha256"] = self.sha256.lower()
        return found

    @property
    def strip_components(self) -> int:  # the v1 name, still read by the unpacker
        return self.root.strip


@dataclass(frozen=True, kw_only=True)
class Link:
    """One symlink: `path` relative to the root source, `target` relative to the link's folder."""

    path: str = spec("where the link is created, relative to the root source; may use the placeholders that name "
                     "things ({python.version}, {python.tag}, {platform.tag}, {arch}, {target.arch}, {variant})",
                     interpolate=True, checks=(check_link_path, check_link_placeholders))
    target: str = spec("what the link points to, relative to the link's own folder (an existing link "
                       "that reaches the same place through an absolute path is accepted as it is); the same "
                       "placeholders as `path`, e.g. python/build/cmake.{platform.tag}-cpython-{python.version}; "
                       "the link rules hold after filling in", interpolate=True, checks=check_link_placeholders)

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
            parent = posixpath.dirname(key)
            while parent and parent != "/":  # the folders around it, each looked up: linear in the entries
                j = seen.get(parent)
                if j is not None:
                    ctx.report(path + ("entries", i, "path"), f"link path {link.path!r} lies "
                               f"inside link {parent!r} (entry {j}); it would be created through "
                               "the other link", "link the folder or its files, not both")
                parent = posixpath.dirname(parent)


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
    for name, source in sources.items():  # a commit read from a source's file: that source is checked out first
        reader, key = source.pin_reader
        if reader is None or reader.source not in sources:
            continue
        if reader.source == name or sources[reader.source].pin_reader[0] is not None:
            ctx.report(path + (name, key, "source"), f"{name}'s {key[:-5]} cannot be read from "
                       f"{reader.source}, whose own commit " + ("is this one" if reader.source == name else
                                                               "is read from a file too"),
                       "read it from a source pinned by `commit` or `ref`")
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

