"""A bundle's manifest: what the bundle holds, what it was made for, and a digest of both.

The manifest is the archive's first member (``MANIFEST_NAME``), JSON. It lists every member with its
kind, size and sha256, so a bundle is verified by reading it once; and it carries its own ``digest``
(sha256 of the canonical JSON of everything else), so a changed manifest is found too, and an
incremental bundle can name the one it was made ``--since`` by that digest.

Reading is strict: a manifest comes from a file that may have been damaged or made by someone else, so
every key, type and member name is checked here, and anything unexpected is ``BundleDamaged`` naming
the key. Member names are one folder (fixed by the kind) and one plain file name: nothing in a bundle
can name a path that climbs out of the folder it is extracted into.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from .. import __version__, strict_json
from ..digest import hash_text
from ..host import read_host
from .errors import BundleDamaged

BUNDLE_SCHEMA = "flagtree-cpu/bundle/v1"
MANIFEST_NAME = "flagtree-cpu-bundle.json"  # always the archive's FIRST member

MemberKind = Literal["git", "artifact", "wheel", "lock", "recipe", "build"]
MEMBER_KINDS: tuple[str, ...] = get_args(MemberKind)
# the folder each kind lives in inside the archive (and inside the folder it is extracted to)
# "build": a published build (a wheel and its wheelhouse entry) of a `bundle create --for-wheelhouse` bundle
KIND_FOLDERS = {"git": "git", "artifact": "artifacts", "wheel": "wheels", "lock": "locks", "recipe": "recipes",
                "build": "builds"}

# a file name of a mirror (name-<hash>.git.bundle), a sha256, a wheel or sdist (may hold + and !), a recipe:
# no separators, no leading dot (so never "." or ".."), no control characters
_FILE_NAME = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9._+!~-]{0,199}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TOP_KEYS = ("schema", "tool_version", "created", "host", "recipe", "stack", "variant", "target", "since",
             "members", "digest")
_MEMBER_KEYS = ("name", "kind", "size", "sha256", "meta", "carried_by_since")


@dataclass(frozen=True)
class Member:
    """One file of the bundle. ``size`` and ``sha256`` are 0 and "" in a draft, until ``archive.seal``."""

    name: str  # git/<mirror>.bundle, artifacts/<sha256>, wheels/<file>, locks/<recipe>.yaml, recipes/<recipe>.yaml
    kind: MemberKind
    size: int = 0
    sha256: str = ""
    # git: {"url", "mirror", "commits": [..]}; artifact: {"recipe", "name", "url", "digest": {algo: hex}};
    # wheel: {"file"}; lock/recipe: {"recipe"}; build: {"entry": the wheelhouse manifest entry, "wheelhouse"}
    meta: dict[str, Any] = field(default_factory=dict)
    carried_by_since: bool = False  # left out of an incremental bundle: the one it was made --since has it

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "size": self.size, "sha256": self.sha256,
                "meta": self.meta, "carried_by_since": self.carried_by_since}


@dataclass(frozen=True)
class Manifest:
    tool_version: str
    created: str  # ISO 8601, UTC
    host: dict[str, str]  # {"hostname", "arch", "os"} of the machine that made the bundle
    recipe: str  # the top recipe
    stack: tuple[str, ...]  # bottom first, the top last (one name for an unstacked recipe)
    variant: str | None
    target: dict[str, Any]  # {"arch", "platforms": [..], "python": "3.12", "os_id", "glibc"}
    since: str | None  # the digest of the manifest of the bundle this one is incremental to
    members: tuple[Member, ...]
    digest: str = ""  # sha256 of the canonical JSON of everything else; "" in a draft

    @classmethod
    def draft(cls, *, recipe: str, stack: tuple[str, ...] | list[str], variant: str | None,
              target: dict[str, Any], members: tuple[Member, ...] | list[Member] = (),
              since: str | None = None) -> Manifest:
        """A manifest of this tool and this machine, now; members unsealed and no digest (``archive.seal``)."""
        facts = read_host()
        os_name = " ".join(part for part in (facts.os_id, facts.os_version_id) if part) or facts.system
        return cls(tool_version=__version__, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   host={"hostname": socket.gethostname(), "arch": facts.arch, "os": os_name},
                   recipe=recipe, stack=tuple(stack), variant=variant, target=dict(target), since=since,
                   members=tuple(members))

    def body(self) -> dict[str, Any]:
        """Everything the digest covers: the JSON without the digest."""
        return {"schema": BUNDLE_SCHEMA, "tool_version": self.tool_version, "created": self.created,
                "host": self.host, "recipe": self.recipe, "stack": list(self.stack), "variant": self.variant,
                "target": self.target, "since": self.since, "members": [m.to_json() for m in self.members]}

    def compute_digest(self) -> str:
        return hash_text(canonical_json(self.body()))

    def with_digest(self) -> Manifest:
        return replace(self, digest=self.compute_digest())

    def to_json(self) -> dict[str, Any]:
        return {**self.body(), "digest": self.digest}

    def to_bytes(self) -> bytes:
        """The member's bytes in the archive: readable (indented), sorted, ending in a newline."""
        return (json.dumps(self.to_json(), indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_json(cls, data: Any, origin: str) -> Manifest:
        """The manifest ``data`` (parsed JSON) describes, checked key by key and against its own digest.
        ``origin`` names where it came from in messages. Anything else: BundleDamaged."""
        return _parse(data, origin)

    @classmethod
    def from_bytes(cls, raw: bytes, origin: str) -> Manifest:
        """Parse the manifest member's bytes (strict JSON: no NaN, no key twice) and check it (``from_json``)."""
        try:
            data = strict_json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: [[[[... nested deep
            raise BundleDamaged(f"{origin} is not valid JSON ({exc}); it is not a flagtree-cpu bundle, or it was "
                                "damaged") from None
        return _parse(data, origin)

    def member(self, name: str) -> Member:
        """The member called ``name``; KeyError naming it when the manifest has none."""
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"the bundle's manifest has no member {name!r}")

    def present(self) -> tuple[Member, ...]:
        """The members the archive holds (not the ones an incremental bundle leaves to its --since bundle)."""
        return tuple(m for m in self.members if not m.carried_by_since)

    def of_kind(self, kind: MemberKind) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.kind == kind)

    def made_for(self) -> str:
        """What the bundle is for, as messages say it: 'recipe X variant Y, aarch64, Python 3.12'."""
        variant = f" variant {self.variant}" if self.variant else ""
        arch = self.target.get("arch") or "any architecture"
        python = f"Python {self.target['python']}" if self.target.get("python") else "any Python"
        return f"recipe {self.recipe}{variant}, {arch}, {python}"


def member_name(kind: MemberKind, file_name: str) -> str:
    """The archive name of a member of ``kind`` called ``file_name`` (ValueError for a name a bundle cannot hold)."""
    if kind not in KIND_FOLDERS:
        raise ValueError(f"unknown member kind {kind!r}; known: {', '.join(MEMBER_KINDS)}")
    if not _FILE_NAME.fullmatch(file_name):
        raise ValueError(f"{file_name!r} cannot be a bundle member's file name (letters, digits and ._+!~- only, "
                         "not starting with a dot, at most 200 characters)")
    return f"{KIND_FOLDERS[kind]}/{file_name}"


def name_problem(name: str, kind: str | None = None) -> str | None:
    """Why ``name`` cannot be a member of a bundle (of ``kind``, when given); None when it can."""
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "has an absolute path"
    if ".." in name.replace("\\", "/").split("/"):
        return "climbs out with '..'"
    folder, sep, file_name = name.partition("/")
    if not sep or folder not in KIND_FOLDERS.values() or not _FILE_NAME.fullmatch(file_name):
        return ("is not a bundle member name (one of " + ", ".join(f"{f}/FILE" for f in KIND_FOLDERS.values())
                + ", FILE letters, digits and ._+!~- only)")
    if kind is not None and KIND_FOLDERS.get(kind) != folder:
        return f"is in {folder}/, but its kind is {kind!r} (which lives in {KIND_FOLDERS.get(kind, '?')}/)"
    return None


def canonical_json(data: Any) -> str:
    """The one serialisation digests are taken of: sorted keys, no spaces, non-ASCII escaped."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


# --- reading ---------------------------------------------------------------------------------------------


class _Reader:
    """Typed access to one JSON object, each problem a BundleDamaged naming the key."""

    def __init__(self, origin: str):
        self.origin = origin

    def fail(self, key: str, why: str) -> BundleDamaged:
        return BundleDamaged(f"the bundle's manifest ({self.origin}) is not a {BUNDLE_SCHEMA} manifest: {key} {why}")

    def get(self, data: dict[str, Any], key: str, types: type | tuple[type, ...], where: str = "") -> Any:
        value = data.get(key)
        # bool is an int to Python; a size of `true` is not a size
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in _as_tuple(types))
            raise self.fail(f"{where}{key}", f"must be {names}, not {type(value).__name__} ({str(value)[:60]!r})")
        return value

    def exact_keys(self, data: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
        missing = [k for k in keys if k not in data]
        extra = sorted(k for k in data if k not in keys)
        if missing or extra:
            why = "; ".join(part for part in (f"missing {', '.join(missing)}" if missing else "",
                                              f"unknown {', '.join(map(str, extra))}" if extra else "") if part)
            raise self.fail(where or "the top level", f"has the wrong keys ({why})")


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _parse(data: Any, origin: str) -> Manifest:
    r = _Reader(origin)
    if not isinstance(data, dict):
        raise r.fail("the document", f"must be an object, not {type(data).__name__}")
    schema = data.get("schema")
    if isinstance(schema, str) and schema.startswith("flagtree-cpu/bundle/") and schema != BUNDLE_SCHEMA:
        raise BundleDamaged(f"{origin} is a {schema[:80]} manifest; this flagtree-cpu reads {BUNDLE_SCHEMA}",
                            fix="import it with the flagtree-cpu version that made it, or make the bundle again "
                                "with this one")
    if schema != BUNDLE_SCHEMA:
        raise r.fail("schema", f"is {str(schema)[:80]!r}")
    r.exact_keys(data, _TOP_KEYS, "")
    stack = r.get(data, "stack", list)
    if not stack or not all(isinstance(s, str) and s for s in stack):
        raise r.fail("stack", "must be a non-empty list of recipe names")
    host = r.get(data, "host", dict)
    if not all(isinstance(v, str) for v in host.values()):
        raise r.fail("host", "values must be strings")
    members = tuple(_parse_member(r, m, i) for i, m in enumerate(r.get(data, "members", list)))
    seen: set[str] = set()
    for m in members:
        if m.name in seen:
            raise r.fail("members", f"name {m.name!r} twice")
        seen.add(m.name)
    since = r.get(data, "since", (str, type(None)))
    digest = r.get(data, "digest", str)
    for key, value in (("since", since), ("digest", digest)):
        if value is not None and not _SHA256.fullmatch(value):
            raise r.fail(key, "must be a sha256 (64 lower-case hex digits)")
    manifest = Manifest(tool_version=r.get(data, "tool_version", str), created=r.get(data, "created", str),
                        host=host, recipe=r.get(data, "recipe", str), stack=tuple(stack),
                        variant=r.get(data, "variant", (str, type(None))), target=r.get(data, "target", dict),
                        since=since, members=members, digest=digest)
    computed = manifest.compute_digest()
    if computed != digest:
        raise BundleDamaged(f"the bundle's manifest ({origin}) was changed after the bundle was made: its digest "
                            "does not match its contents", details=(f"manifest says {digest}",
                                                                    f"contents hash to {computed}"))
    return manifest


def _parse_member(r: _Reader, data: Any, index: int) -> Member:
    where = f"members[{index}]."
    if not isinstance(data, dict):
        raise r.fail(f"members[{index}]", f"must be an object, not {type(data).__name__}")
    r.exact_keys(data, _MEMBER_KEYS, f"members[{index}]")
    name, kind = r.get(data, "name", str, where), r.get(data, "kind", str, where)
    if kind not in MEMBER_KINDS:
        raise r.fail(f"{where}kind", f"{kind!r} is not one of {', '.join(MEMBER_KINDS)}")
    if problem := name_problem(name, kind):
        raise r.fail(f"{where}name", f"{name[:120]!r} {problem}")
    size = r.get(data, "size", int, where)
    sha256 = r.get(data, "sha256", str, where)
    if size < 0:
        raise r.fail(f"{where}size", "must not be negative")
    if not _SHA256.fullmatch(sha256):
        raise r.fail(f"{where}sha256", "must be a sha256 (64 lower-case hex digits)")
    return Member(name=name, kind=kind, size=size, sha256=sha256, meta=r.get(data, "meta", dict, where),
                  carried_by_since=r.get(data, "carried_by_since", bool, where))
