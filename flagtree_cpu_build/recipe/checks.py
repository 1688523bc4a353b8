"""The rules a recipe must obey, each with a message that says how to fix it.

Every function here is a check in the sense of ``schema``: it receives a converted
value, the conversion context and the key path, and reports problems. The placeholder catalog and the checks of
fields that hold placeholders are ``placeholder_checks``'s.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..cache_url import CompileCacheUrlError, parse_url
from ..digest import HEX_LENGTHS
from ..farm_hosts import CompileFarmError, parse_hosts
from . import schema as rs
from .match_names import DIGEST_PLACEHOLDER
from .schema import Context, Path_, json_rule, suggest

ARCHES = ("aarch64", "x86_64", "riscv64", "ppc64le", "s390x")
_ARCH_ALIASES = {"arm64": "aarch64", "amd64": "x86_64", "x64": "x86_64", "x86-64": "x86_64"}
NAME_PATTERN = "^[a-z0-9][a-z0-9_-]*$"
ENV_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$"
_NAME_RE = re.compile(NAME_PATTERN[1:-1])
ENV_NAME_RE = re.compile(ENV_NAME_PATTERN[1:-1])
_HEX_RE = re.compile(r"[0-9a-fA-F]+")
_GIT_SCHEMES = ("https", "http", "ssh", "git", "file")
_DOWNLOAD_SCHEMES = ("https", "http", "file")


# --- checks: (value, ctx, path) -> report problems ------------------------------------


@json_rule({"pattern": NAME_PATTERN})
def check_name(value: str, ctx: Context, path: Path_) -> None:
    if not _NAME_RE.fullmatch(value):
        ctx.report(path, f"{value!r} is not a valid name",
                   "use lower-case letters, digits, '-' and '_', starting with a letter or digit")


@json_rule({"propertyNames": {"pattern": NAME_PATTERN}})
def check_names(value: Mapping[str, Any], ctx: Context, path: Path_) -> None:
    for key in value:
        check_name(key, ctx, path + (key,))


def _url_check(schemes: tuple[str, ...], what: str) -> rs.Check:
    def check(value: str, ctx: Context, path: Path_) -> None:
        scheme, sep, rest = value.partition("://")
        if not sep:
            if re.fullmatch(r"[\w.-]+@[\w.-]+:.+", value):
                fix = f"write it as ssh://{value.replace(':', '/', 1)}"
            else:
                fix = f"add the scheme, e.g. https://{value}"
            ctx.report(path, f"{value!r} is not a URL: it has no scheme", fix)
        elif scheme not in schemes:
            ctx.report(path, f"{what} URL scheme {scheme!r} is not supported",
                       f"use one of: {', '.join(s + '://' for s in schemes)}")
        elif not rest.strip("/"):
            ctx.report(path, f"{value!r} has no host or path after the scheme")

    return check


check_git_url = _url_check(_GIT_SCHEMES, "git")
check_download_url = _url_check(_DOWNLOAD_SCHEMES, "download")
_check_wheelhouse_url = _url_check(("file", "http", "https"), "wheelhouse")


def check_compile_farm_hosts(value: str, ctx: Context, path: Path_) -> None:
    """distcc's hosts as farm_hosts reads them: a word distcc would misread (or the tool cannot probe) is a recipe
    error. Whether a host answers is `build`'s question."""
    try:
        parse_hosts(value)
    except CompileFarmError as err:
        ctx.report(path, err.message, err.fix)


def check_compile_cache_url(value: str, ctx: Context, path: Path_) -> None:
    """ccache's remote storage URL, as cache_url reads it: a URL ccache would refuse or misread in every
    compilation is a recipe error. Whether the installed ccache can use its scheme is `build`'s question."""
    try:
        parse_url(value)
    except CompileCacheUrlError as err:
        ctx.report(path, err.message, err.fix)


def check_wheelhouse_location(value: str, ctx: Context, path: Path_) -> None:
    """An absolute folder, file:// or http(s):// (a relative folder would depend on where the tool runs)."""
    if value.startswith(("/", "~")):
        return
    if "://" not in value:
        ctx.report(path, f"wheelhouse {value!r} is neither an absolute folder nor a URL",
                   "write the folder's absolute path, or file:///path, or http(s)://host/path")
        return
    _check_wheelhouse_url(value, ctx, path)


@json_rule({"pattern": "^[0-9a-fA-F]{40}$"})
def check_commit(value: str, ctx: Context, path: Path_) -> None:
    if len(value) == 40 and _HEX_RE.fullmatch(value):
        return
    if _HEX_RE.fullmatch(value) and len(value) < 40:
        ctx.report(path, f"{value!r} is an abbreviated commit id ({len(value)} characters); a pin "
                   "must be the full 40-character id",
                   f"run `git rev-parse {value}` in a clone to get the full id")
    else:
        ctx.report(path, f"{value!r} is not a commit id (40 hexadecimal characters)",
                   "put a branch or tag name in `ref:` and the full commit id in `commit:`")


@json_rule({"pattern": "^[0-9a-fA-F]{64}$"})
def check_sha256(value: str, ctx: Context, path: Path_) -> None:
    if not (len(value) == 64 and _HEX_RE.fullmatch(value)):
        ctx.report(path, f"{value!r} is not a sha256 digest (64 hexadecimal characters, got "
                   f"{len(value)})", "run `sha256sum FILE`, or remove the key to record the "
                   "digest on first download")


# the digests a recipe may state (sha1 is only for git objects)
DIGEST_LENGTHS = {a: HEX_LENGTHS[a] for a in ("md5", "sha256", "sha512")}


@json_rule({"propertyNames": {"enum": list(DIGEST_LENGTHS)}, "properties": {
    a: {"pattern": f"^([0-9a-fA-F]{{{n}}}|{DIGEST_PLACEHOLDER})$"} for a, n in DIGEST_LENGTHS.items()}})
def check_digests(value: Mapping[str, str], ctx: Context, path: Path_) -> None:
    """md5 / sha256 / sha512 -> hexadecimal digests of the right length, or one value read from a source's file
    ({match} / {match.NAME}, judged once read)."""
    for algorithm, digest in value.items():
        length = DIGEST_LENGTHS.get(algorithm)
        if length is not None and re.fullmatch(DIGEST_PLACEHOLDER, digest):
            continue
        if length is None:
            hint = suggest(algorithm, DIGEST_LENGTHS)
            ctx.report(path + (algorithm,), f"unknown digest algorithm {algorithm!r}{hint}",
                       f"use one of: {', '.join(DIGEST_LENGTHS)}")
        elif not (len(digest) == length and _HEX_RE.fullmatch(digest)):
            ctx.report(path + (algorithm,), f"{digest!r} is not an {algorithm} digest ({length} hexadecimal "
                       f"characters, got {len(digest)})", f"run `{algorithm}sum FILE`, or copy the digest the "
                       "publisher lists next to the download")


def check_digest_agrees(artifact: Any, ctx: Context, path: Path_) -> None:
    """`sha256:` and `digest: {sha256: ...}` both given must agree."""
    both = getattr(artifact, "sha256", None), (getattr(artifact, "digest", None) or {}).get("sha256")
    if all(both) and both[0].lower() != both[1].lower():
        ctx.report(path + ("digest", "sha256"), "sha256 and digest.sha256 disagree", "keep one of them")


def check_regex(value: str, ctx: Context, path: Path_) -> None:
    try:
        re.compile(value)
    except re.error as exc:
        ctx.report(path, f"{value!r} is not a regular expression: {exc}",
                   "escape literal characters such as . ( [ with a backslash")


@json_rule({"pattern": r"^[^.]+(\.[^.]+)*$"})
def check_json_path(value: str, ctx: Context, path: Path_) -> None:
    if not value or any(not part for part in value.split(".")):
        ctx.report(path, f"{value!r} is not a JSON path", "write keys (and list indexes) separated by dots, "
                   "e.g. llvm_hash or builds.0.hash")


def check_variant_names(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
    known = ctx.facts.get("variants")
    if known is None:
        return
    for i, name in enumerate(value):
        if name not in known:
            have = ", ".join(sorted(known)) or "none"
            ctx.report(path + (i,), f"there is no variant named {name!r}{suggest(name, known)}",
                       f"the recipe's variants: {have}")


def _relative_path_check(what: str, escape_msg: str) -> rs.Check:
    def check(value: str, ctx: Context, path: Path_) -> None:
        if not value or value.strip() != value:
            ctx.report(path, f"{what} {value!r} is empty or has surrounding spaces")
        elif value.startswith(("/", "~")) or "\\" in value:
            ctx.report(path, f"{what} {value!r} must be a relative path with '/' separators")
        elif escapes(value):
            ctx.report(path, f"{what} {value!r} {escape_msg}", "remove the '..' parts")

    return check


def escapes(rel: str) -> bool:
    return posixpath.normpath(rel).split("/")[0] == ".."


check_file_in_source = _relative_path_check("path", "escapes the source's folder")
check_link_path = _relative_path_check("link path", "escapes the root source's folder")
check_source_path = _relative_path_check("source path", "escapes the workdir")


@json_rule({"propertyNames": {"pattern": ENV_NAME_PATTERN}, "items": {"pattern": ENV_NAME_PATTERN}})
def check_env_names(value: Any, ctx: Context, path: Path_) -> None:
    names = value.keys() if isinstance(value, Mapping) else value
    for i, name in enumerate(names):
        if not ENV_NAME_RE.fullmatch(name):
            where = path + ((name,) if isinstance(value, Mapping) else (i,))
            ctx.report(where, f"{name!r} is not an environment variable name",
                       "use letters, digits and '_', not starting with a digit")


@json_rule({"items": {"pattern": r"^(?!\*+$)[A-Za-z_*][A-Za-z0-9_*]*$"}})
def check_env_patterns(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
    """Variable names, or globs with '*' (LLVM_* drops every inherited LLVM_ variable, *_HOME every ..._HOME)."""
    for i, name in enumerate(value):
        if not name.strip("*") or not ENV_NAME_RE.fullmatch(name.replace("*", "X")):
            ctx.report(path + (i,), f"{name!r} is not an environment variable name or a glob like LLVM_*",
                       "use letters, digits and '_', with '*' for any run of characters")


def check_script_path(value: str, ctx: Context, path: Path_) -> None:
    """A script to source: absolute (a vendor toolkit), or relative to the workdir without leaving it."""
    if not value.strip():
        ctx.report(path, "the script path is empty")
    elif not value.startswith(("/", "{")) and escapes(value):
        ctx.report(path, f"script {value!r} escapes the workdir", "give an absolute path (e.g. under a "
                   "toolchain: {toolchains.NAME.path}/set_env.sh) or one inside the workdir")


@json_rule({"enum": list(ARCHES)})
def check_arch(value: str, ctx: Context, path: Path_) -> None:
    """One architecture (a `uname -m` name), with the alias hint of ``check_arches``."""
    if value not in ARCHES:
        alias = _ARCH_ALIASES.get(value)
        fix = f"Linux calls it {alias!r}" if alias else f"use one of: {', '.join(ARCHES)}"
        ctx.report(path, f"unknown architecture {value!r}{suggest(value, ARCHES)}", fix)


@json_rule({"items": {"enum": list(ARCHES)}})
def check_arches(value: tuple[str, ...], ctx: Context, path: Path_) -> None:
    for i, arch in enumerate(value):
        check_arch(arch, ctx, path + (i,))


# a distribution name as PEP 508 spells it (pip uninstall takes names only: no version, no option)
DISTRIBUTION_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$"


@json_rule({"items": {"pattern": DISTRIBUTION_PATTERN}})
def check_distribution_names(value: Iterable[str], ctx: Context, path: Path_) -> None:
    for i, name in enumerate(value):
        if not re.fullmatch(DISTRIBUTION_PATTERN, name):
            bare = re.match(r"[A-Za-z0-9._-]*[A-Za-z0-9]", name.lstrip("-"))
            ctx.report(path + (i,), f"{name!r} is not a distribution name: only names are uninstalled (no version, "
                       "no option)", f"write it as {bare.group(0)}" if bare else "e.g. triton")


def check_requirement(value: str, ctx: Context, path: Path_) -> None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(value)
    except InvalidRequirement as exc:
        ctx.report(path, f"{value!r} is not a valid requirement: {exc}",
                   "write it as pip would take it, e.g. 'ninja>=1.11.1' or 'torch==2.10.0+cpu'")


def check_specifier(value: str, ctx: Context, path: Path_) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        ctx.report(path, f"{value!r} is not a version range", "e.g. '>=3.10,<3.14' or '==3.3.*'")


def _known(kind: str, singular: str) -> rs.Check:
    def check(value: str, ctx: Context, path: Path_) -> None:
        names = ctx.facts.get(kind, set())
        if value not in names:
            have = ", ".join(sorted(names)) or "none"
            ctx.report(path, f"there is no {singular} named {value!r}{suggest(value, names)}",
                       f"use one of the recipe's {kind}: {have}")

    return check


check_source_ref = _known("sources", "source")
check_artifact_ref = _known("artifacts", "artifact")


def find_patch(name: str, dirs: Iterable[Path]) -> Path | None:
    if escapes(name) or name.startswith("/"):
        return None
    for folder in dirs:
        if (folder / name).is_file():
            return folder / name
    return None


def check_device_path(device: str, ctx: Context, path: Path_) -> None:
    """A device node path, or a glob of them (`/dev/dri/renderD*`: any one match is enough); never outside /dev."""
    if not device.startswith("/dev/"):
        ctx.report(path, f"{device!r} is not a device node path",
                   "write it as /dev/NAME (or a glob: /dev/dri/renderD*)")
    elif ".." in device.split("/"):
        ctx.report(path, f"{device!r} leaves /dev through '..'", "name the node under /dev, e.g. /dev/dri/renderD*")
