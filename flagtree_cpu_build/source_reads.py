"""The values artifacts read from synced sources' files (``matches`` rules; ``recipe.reads`` names them).

A checkout is someone else's tree: its file may be a link out of it, a FIFO, huge, not JSON, or hold a value made
to climb out of a folder once it is put in a path. So the file is read as a regular file inside its checkout,
capped, and a value is a plain name (letters, digits, ``. _ + -``) — a digest also of its algorithm's length —
or the read fails, in words that name the file. A file that is not there yet (the source is not checked out) is
*waiting*: its value comes from the lock when the lock recorded it at the commit the source is pinned to, else the
plan says it is read after sync.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .recipe.reads import captures, marker, names_used, rules_of, used_names
from .regular_file import read_regular

if TYPE_CHECKING:
    from .lockfile import Lock, ReadLock
    from .recipe import Artifact, Recipe
    from .recipe.pins import CommitFrom, RefFrom, SourcePin

# a read file is a hash file, a JSON of pins, a version file: megabytes at most
MAX_READ_BYTES = 16 << 20
_PLAIN = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9._+-]{0,255}")
_HEX = {"md5": 32, "sha256": 64, "sha512": 128}


@dataclass(frozen=True)
class ReadValue:
    """One value an artifact read, and where from: what the lock records."""

    artifact: str
    name: str  # "" for {match}
    source: str
    file: str
    value: str
    commit: str | None  # the source's commit when it was read (the lock's); None: not known
    origin: Literal["file", "lock"] = "file"

    @property
    def key(self) -> str:
        return marker(self.artifact, self.name)

    @property
    def placeholder(self) -> str:
        return "{match" + (f".{self.name}" if self.name else "") + "}"


@dataclass(frozen=True)
class Reads:
    values: tuple[ReadValue, ...] = ()
    waiting: dict[str, tuple[str, ...]] = field(default_factory=dict)  # artifact -> "SOURCE's FILE" not there yet
    problems: dict[str, tuple[str, ...]] = field(default_factory=dict)  # artifact -> why a read failed

    def by_marker(self) -> dict[str, str]:
        return {v.key: v.value for v in self.values}


def read_all(recipe: Recipe, root: Path, lock: Lock | None) -> Reads:
    """Every value the artifacts of ``recipe`` (variants chosen, placeholders not yet filled in) read."""
    values: list[ReadValue] = []
    waiting: dict[str, tuple[str, ...]] = {}
    problems: dict[str, tuple[str, ...]] = {}
    for name, artifact in recipe.artifacts.items():
        names = artifact.read_names or names_used(artifact)
        if not names:
            continue
        got, wait, bad = read_artifact(name, artifact, names, recipe, root, lock)
        values += got
        if wait:
            waiting[name] = wait
        if bad:
            problems[name] = bad
    return Reads(tuple(values), waiting, problems)


def read_artifact(name: str, artifact: Artifact, names: tuple[str, ...], recipe: Recipe, root: Path,
                  lock: Lock | None) -> tuple[list[ReadValue], tuple[str, ...], tuple[str, ...]]:
    """The values ``names`` of one artifact, the files still to be read, and why a read failed."""
    rules = rules_of(artifact.matches)
    named, _twice = captures(rules)
    digests = _digest_names(name, artifact)
    values: list[ReadValue] = []
    waiting: list[str] = []
    problems: list[str] = []
    for i, rule in enumerate(rules):
        wanted = [n for n in names if n in named and named[n].rule == i]
        if not wanted:
            continue  # a checking rule: probes compares it with the URL
        where = f"{rule.source}'s {rule.what}"
        key = f"artifacts.{name}.matches" + (f".{i}" if isinstance(artifact.matches, tuple) else "")
        text, missing, problem = _read_rule_file(rule, recipe, root)
        commit = _source_commit(lock, rule.source)
        if missing:
            locked = _from_lock(name, wanted, rule, recipe, lock)
            if locked is None:
                waiting.append(where)
            for v in locked or ():  # the lock is a file anyone may have edited: its values are judged alike
                why = judge(v.value, digests.get(v.name))
                if why is None:
                    values.append(v)
                else:
                    problems.append(f"the lock records {v.value[:80]!r} for {v.placeholder} (reads.{v.key}), {why} "
                                    f"— move the lock aside and sync again")
            continue
        captured: dict[str | None, str] = {}
        if problem is None:
            value, groups, problem = capture(rule, text, key)
            captured = {None: value, **groups}
        for n in wanted if problem is None else ():
            value = captured.get(named[n].group, "")
            why = judge(value, digests.get(n))
            if why is not None:
                problems.append(f"{where} gives {value[:80]!r} for {{match{'.' + n if n else ''}}}, {why} — "
                                f"correct {key}, or pin {rule.source} to a commit whose file has it")
            else:
                values.append(ReadValue(name, n, rule.source, rule.what, value, commit))
        if problem is not None:
            problems.append(f"{where} {problem}")
    return values, tuple(waiting), tuple(problems)


def judge(value: str, algorithm: str | None) -> str | None:
    """Why a read value cannot go into a URL, a path or a digest; None when it can."""
    if not _PLAIN.fullmatch(value):
        return ("which is not a plain name (up to 256 letters, digits and . _ + -) a URL, a path or a digest can "
                "carry")
    if algorithm is not None and not (len(value) == _HEX[algorithm] and re.fullmatch("[0-9a-fA-F]+", value)):
        return f"which is not an {algorithm} digest ({_HEX[algorithm]} hexadecimal characters)"
    return None


def _digest_names(name: str, artifact: Artifact) -> dict[str, str]:
    """Read name -> the digest algorithm it is the value of."""
    found = {}
    for algorithm, value in artifact.digest.items():
        for n in used_names(value):  # the recipe's words, or a resolved recipe's value not read yet
            found[n] = algorithm
    return found


def _source_commit(lock: Lock | None, source: str) -> str | None:
    entry = lock.sources.get(source) if lock else None
    return entry.commit if entry else None


def _from_lock(name: str, wanted: list[str], rule: SourcePin, recipe: Recipe,
               lock: Lock | None) -> list[ReadValue] | None:
    """The values the lock recorded for a file that is not checked out, when it recorded all of them from the same
    file at the commit the source is at (the recipe's pin, else the lock's)."""
    if lock is None:
        return None
    commit = recipe.sources[rule.source].commit or _source_commit(lock, rule.source)
    found = []
    for n in wanted:
        entry = lock.reads.get(marker(name, n))
        if entry is None or (entry.source, entry.file) != (rule.source, rule.what) or entry.commit != commit:
            return None
        found.append(ReadValue(name, n, rule.source, rule.what, entry.value, entry.commit, "lock"))
    return found


def _read_rule_file(rule: SourcePin | CommitFrom | RefFrom, recipe: Recipe,
                    root: Path) -> tuple[str, bool, str | None]:
    """The file's text, whether it is missing (not checked out yet), or why it cannot be read."""
    return read_rule_text(rule, root / recipe.source_path(rule.source))


def read_rule_text(rule: SourcePin | CommitFrom | RefFrom, checkout: Path) -> tuple[str, bool, str | None]:
    """The text a rule captures from (a file's, or the digest of the files ``sha256_of`` names), whether it is
    missing (the source is not checked out yet), or why it cannot be read."""
    hashed = getattr(rule, "sha256_of", None)
    if hashed is not None:
        if not checkout.is_dir():
            return "", True, None
        return hash_of_files(checkout, hashed.glob)
    assert rule.file is not None
    path = checkout / rule.file
    if not path.exists() and not path.is_symlink():
        return "", True, None
    if not _inside(path, checkout):  # a link in the checkout may point anywhere; only its own files are read
        return "", False, "leads outside the checkout (a symbolic link), so it is not read"
    text, problem = read_text(path)
    return text, False, problem


def _inside(path: Path, checkout: Path) -> bool:
    try:
        path.resolve().relative_to(checkout.resolve())
    except (ValueError, OSError):
        return False
    return True


# the patches a project names its LLVM after: a few dozen small files
MAX_HASHED_FILES = 1000


def hash_of_files(checkout: Path, pattern: str) -> tuple[str, bool, str | None]:
    """The sha256 (hex) of the files ``pattern`` matches in ``checkout``: sorted by path, contents concatenated
    (triton-ascend's formula for its LLVM's name); or why not. Each file is read as a regular file inside the
    checkout, and the count and the bytes in all are capped."""
    from .digest import Hasher

    try:
        found = sorted(p for p in checkout.glob(pattern) if not p.is_dir())
    except (OSError, ValueError) as exc:
        return "", False, f"cannot be listed ({exc})"
    if not found:
        return "", False, "matches no file"
    if len(found) > MAX_HASHED_FILES:
        return "", False, f"matches {len(found)} files, more than the {MAX_HASHED_FILES} a recipe hashes"
    hasher, total = Hasher("sha256"), 0
    for path in found:
        rel = path.relative_to(checkout).as_posix()
        if not _inside(path, checkout):
            return "", False, f"has {rel}, which leads outside the checkout (a symbolic link), so it is not read"
        try:
            data = read_regular(path, MAX_READ_BYTES - total)
        except OSError as exc:
            return "", False, f"has {rel}, which cannot be read ({exc.strerror or exc})"
        total += len(data)
        if total > MAX_READ_BYTES:
            return "", False, f"adds up to more than {MAX_READ_BYTES >> 20} MiB, which no files a recipe hashes do"
        hasher.update(data)
    return hasher.hexdigest(), False, None


def read_text(path: Path) -> tuple[str, str | None]:
    """A source's file as text, or why it cannot be read. It is read as a regular file, capped: it may be a link
    to a device or a FIFO, or far bigger than any file a recipe reads."""
    try:
        data = read_regular(path, MAX_READ_BYTES)
    except OSError as exc:
        return "", f"cannot be read ({exc.strerror or exc})"
    if len(data) > MAX_READ_BYTES:
        return "", f"is larger than {MAX_READ_BYTES >> 20} MiB, which no file a recipe probes is"
    return data.decode("utf-8", errors="replace"), None


def capture(pin: SourcePin | CommitFrom | RefFrom, text: str,
            key: str) -> tuple[str, dict[str | None, str], str | None]:
    """The piece of the file the rule reads, a regex's named groups, or why it cannot be read (with what to do)."""
    fix = f"correct {key}, or pin {pin.source} to a commit whose file has it"
    if pin.json_path is not None:
        try:
            data = json.loads(text)
        except ValueError as exc:
            return "", {}, (f"is not JSON ({getattr(exc, 'msg', exc)}, line {getattr(exc, 'lineno', '?')}), so "
                            f"json_path {pin.json_path} cannot be read — {fix}")
        except RecursionError:
            return "", {}, f"is JSON nested too deeply to read — {fix}"
        value, missing = at_path(data, pin.json_path)
        if missing is not None:
            return "", {}, f"has no {pin.json_path} ({missing}) — {fix}"
        if isinstance(value, (dict, list)) or value is None or value == "":
            return "", {}, (f"holds {json.dumps(value)[:60]} at {pin.json_path}, not a value a URL can contain "
                             f"— {fix}")
        text_value = str(value).lower() if isinstance(value, bool) else str(value)
        return (text_value[:pin.chars] if pin.chars else text_value), {}, None
    if pin.regex is not None:
        match = re.search(pin.regex, text, re.MULTILINE)
        if match is None:
            return "", {}, f"has nothing matching {pin.regex!r} — {fix}"
        groups = {g: v for g, v in match.groupdict().items() if v is not None}
        return (match.group(1) or "" if match.re.groups else match.group(0)), groups, None
    # FlagTree's setup.py reads exactly the first 8 characters
    return text[:pin.leading_chars], {}, None


def at_path(data: Any, path: str) -> tuple[Any, str | None]:
    """The value at a dotted path (integer parts index lists), or a note on where the path stops."""
    here = data
    for depth, part in enumerate(path.split(".")):
        where = ".".join(path.split(".")[:depth]) or "the top"
        if isinstance(here, dict):
            if part not in here:
                keys = ", ".join(sorted(map(str, here))[:8]) or "none"
                return None, f"{where} has no key {part!r}; its keys: {keys}"
            here = here[part]
        elif isinstance(here, list):
            if not part.lstrip("-").isdigit() or not -len(here) <= int(part) < len(here):
                return None, f"{where} is a list of {len(here)}, and {part!r} is not an index in it"
            here = here[int(part)]
        else:
            return None, f"{where} is {json.dumps(here)[:40]}, not an object or a list"
    return here, None


def changed(values: tuple[ReadValue, ...], lock: Lock | None) -> dict[str, str]:
    """Marker -> the value the lock recorded, for each value read now that the lock records otherwise."""
    if lock is None:
        return {}
    out = {}
    for v in values:
        entry = lock.reads.get(v.key)
        if entry is not None and entry.value != v.value:
            out[v.key] = entry.value
    return out


def read_locks(recipe: Recipe, root: Path, lock: Lock | None) -> dict[str, ReadLock]:
    """The lock's ``reads`` entries for every value the resolved ``recipe`` reads now: its artifacts' ``{match}``
    values and its sources' commits (``commit_from``)."""
    from .lockfile import ReadLock

    entries = {}
    for name, artifact in recipe.artifacts.items():
        if artifact.read_names:
            values, _waiting, _problems = read_artifact(name, artifact, artifact.read_names, recipe, root, lock)
            entries.update({v.key: ReadLock(source=v.source, file=v.file, commit=v.commit, value=v.value)
                            for v in values})
    for name, source in recipe.sources.items():
        reader, key = source.pin_reader
        if reader is None:
            continue
        value = (read_commit if key == "commit_from" else read_ref)(recipe, root, name)[0]
        if value is not None:
            entries[f"sources.{name}.{key[:-5]}"] = ReadLock(source=reader.source, file=reader.file,
                                                             commit=_source_commit(lock, reader.source), value=value)
    return entries


# a branch or tag name git takes as it is (git check-ref-format's rules, narrowed): never an option, never a path
# that climbs, never a revision expression
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+/-]{0,254}")


def read_ref(recipe: Recipe, root: Path, name: str) -> tuple[str | None, str | None]:
    """The branch or tag source ``name`` is to be at, read from another source's file (``ref_from``): the name, or
    None with why not (None, None: the file is not checked out yet)."""
    def judged(value: str, key: str, holder: str) -> tuple[str, str | None]:
        value = value.strip().splitlines()[0].strip() if value.strip() else ""
        if not _REF.fullmatch(value) or ".." in value or "//" in value or value.endswith(("/", ".", ".lock")):
            return value, (f"gives {value[:80]!r}, which is not a branch or tag name (letters, digits and . _ + - /, "
                           f"up to 255) — correct {key}, or pin {holder} to a commit whose file names one")
        return value, None

    return _read_pin(recipe, root, name, "ref_from", judged)


def read_commit(recipe: Recipe, root: Path, name: str) -> tuple[str | None, str | None]:
    """The commit source ``name`` is to be at, read from another source's file (``commit_from``): the commit, or
    None with why not (None, None: the file is not checked out yet)."""
    def judged(value: str, key: str, holder: str) -> tuple[str, str | None]:
        if not re.fullmatch(r"[0-9a-fA-F]{40}", value):
            return value, (f"gives {value[:80]!r}, which is not a commit id (40 hexadecimal characters) — correct "
                           f"{key}, or pin {holder} to a commit whose file names one")
        return value.lower(), None

    return _read_pin(recipe, root, name, "commit_from", judged)


def _read_pin(recipe: Recipe, root: Path, name: str, field: str,
              judged: Callable[[str, str, str], tuple[str, str | None]]) -> tuple[str | None, str | None]:
    """What source ``name``'s ``field`` (commit_from or ref_from) reads, judged: the value, or None with why not
    (None, None: the file is not checked out yet)."""
    reader = getattr(recipe.sources[name], field)
    assert reader is not None
    key = f"sources.{name}.{field}"
    text, missing, problem = _read_rule_file(reader, recipe, root)
    if missing:
        return None, None
    if problem is None:
        value, _groups, problem = capture(reader, text, key)
        if problem is None:
            value, problem = judged(value, key, reader.source)
        if problem is None:
            return value, None
    return None, f"{key}: {reader.source}'s {reader.file} {problem}"
