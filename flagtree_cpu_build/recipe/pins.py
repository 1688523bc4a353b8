"""How an artifact reads a source's file: one `matches` rule (FlagTree names its LLVM tarball after the first 8
characters of cmake/llvm-hash.txt; triton-cpu keeps the hash, build number and sha256s in cmake/llvm-info.json)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .checks import check_file_in_source, check_json_path, check_regex, check_source_ref
from .match_names import NAME_PATTERN
from .schema import Context, Path_, spec


@dataclass(frozen=True, kw_only=True)
class HashOf:
    """The source's files a rule hashes: triton-ascend names its LLVM after a digest of its LLVM patches."""

    glob: str = spec("a glob of files in the source (e.g. third_party/ascend/llvm_patch/*.patch): sorted by path, "
                     "their contents concatenated and hashed with sha256", checks=check_file_in_source)


@dataclass(frozen=True, kw_only=True)
class SourcePin:
    """A value read from a source's file after sync: the artifact's url, path and digest use it as {match} (the
    first rule's) or {match.NAME}. Where the URL is written out instead (no {match} in it), the rule checks that
    its value appears in the URL, before anything is downloaded."""

    source: str = spec("source holding the file", checks=check_source_ref)
    file: str | None = spec("file in that source (or sha256_of)", default=None, checks=check_file_in_source)
    sha256_of: HashOf | None = spec("the value is the sha256 (hex) of these files of the source instead of a file's "
                                    "text; chars takes its first N characters (default: all 64)", default=None)
    chars: int | None = spec("the value is the file's first N characters (with json_path: of the value there); the "
                             "default, 8, when neither regex nor json_path is given", default=None,
                             json={"minimum": 1, "maximum": 64})
    regex: str | None = spec("a regular expression: the value is its first group (else the whole match); named "
                             "groups are {match.GROUP} too", default=None, checks=check_regex)
    json_path: str | None = spec("a dotted path into the file's JSON (e.g. llvm_hash, or builds.0.hash): the value "
                                 "there", default=None, checks=check_json_path)
    as_name: str | None = spec("the name of this rule's value: {match.NAME} (a regex's named groups are named "
                               "too)", key="as", default=None, json={"pattern": f"^{NAME_PATTERN}$"})

    def check(self, ctx: Context, path: Path_) -> None:
        if (self.file is None) == (self.sha256_of is None):
            ctx.report(path, "give `file` or `sha256_of`" + (", not both" if self.file else ""),
                       "file: the file whose text holds the value; sha256_of: {glob: ...} to hash files")
        if self.sha256_of is not None:
            for key in ("regex", "json_path"):
                if getattr(self, key) is not None:
                    ctx.report(path + (key,), f"sha256_of takes no {key}: the value is the digest",
                               "keep chars to take its first N characters")
        given = [k for k in ("chars", "regex", "json_path") if getattr(self, k) is not None]
        if len(given) > 1 and given != ["chars", "json_path"]:  # a JSON value's first N characters: a short hash
            ctx.report(path, f"give one of chars, regex and json_path, not {' and '.join(given)}",
                       "keep the one that reads the file as it is written (chars may narrow json_path's value)")
        if self.as_name is not None and not re.fullmatch(NAME_PATTERN, self.as_name):
            ctx.report(path + ("as",), f"{self.as_name!r} cannot name a placeholder",
                       "use letters, digits and '_', starting with a letter: {match.llvm_hash}")
        if self.chars is not None and not 1 <= self.chars <= 64:
            ctx.report(path + ("chars",), f"chars must be between 1 and 64, got {self.chars}")

    @property
    def leading_chars(self) -> int | None:
        """How many leading characters to compare (the default rule), or None for regex/json_path."""
        if self.regex is None and self.json_path is None:
            return self.chars or (64 if self.sha256_of is not None else 8)
        return None

    @property
    def what(self) -> str:
        """The file the rule reads, or the glob of those it hashes (what messages and the lock name)."""
        return self.file if self.file is not None else self.sha256_of.glob if self.sha256_of else ""




@dataclass(frozen=True, kw_only=True)
class CommitFrom:
    """A source's commit read from another source's file after that one is checked out: an `llvm-project` source
    at the commit FlagTree's cmake/llvm-hash.txt names."""

    source: str = spec("the source holding the file (checked out first)", checks=check_source_ref)
    file: str = spec("file in that source", checks=check_file_in_source)
    chars: int | None = spec("how many leading characters of the file (with json_path: of the value there) are the "
                             "commit (default: 40, a full commit id)", default=None,
                             json={"minimum": 40, "maximum": 40})
    regex: str | None = spec("a regular expression; its first group (else the whole match) is the commit",
                             default=None, checks=check_regex)
    json_path: str | None = spec("a dotted path into the file's JSON whose value is the commit", default=None,
                                 checks=check_json_path)

    def check(self, ctx: Context, path: Path_) -> None:
        _one_way_of_reading(self, ctx, path)

    @property
    def leading_chars(self) -> int | None:
        if self.regex is None and self.json_path is None:
            return self.chars or 40
        return None


@dataclass(frozen=True, kw_only=True)
class RefFrom:
    """A source's branch or tag read from another source's file after that one is checked out (googletest at the
    `GIT_TAG v1.17.0` of Triton's unittest/googletest.cmake): resolved to a commit once, then locked."""

    source: str = spec("the source holding the file (checked out first)", checks=check_source_ref)
    file: str = spec("file in that source", checks=check_file_in_source)
    chars: int | None = spec("how many leading characters of the file (with json_path: of the value there) are the "
                             "name (default: the first line)", default=None, json={"minimum": 1, "maximum": 255})
    regex: str | None = spec("a regular expression; its first group (else the whole match) is the branch or tag",
                             default=None, checks=check_regex)
    json_path: str | None = spec("a dotted path into the file's JSON whose value is the branch or tag", default=None,
                                 checks=check_json_path)

    def check(self, ctx: Context, path: Path_) -> None:
        _one_way_of_reading(self, ctx, path)
        if self.chars is not None and not 1 <= self.chars <= 255:
            ctx.report(path + ("chars",), f"chars must be between 1 and 255, got {self.chars}")

    @property
    def leading_chars(self) -> int | None:
        if self.regex is None and self.json_path is None:
            return self.chars  # None: the whole file, of which the first line is taken
        return None


def _one_way_of_reading(reader: CommitFrom | RefFrom, ctx: Context, path: Path_) -> None:
    """A value is read one way: leading characters, a regular expression or a JSON path (chars may cut a JSON
    value)."""
    given = [k for k in ("chars", "regex", "json_path") if getattr(reader, k) is not None]
    if len(given) > 1 and given != ["chars", "json_path"]:
        ctx.report(path, f"give one of chars, regex and json_path, not {' and '.join(given)}",
                   "keep the one that reads the file as it is written")
