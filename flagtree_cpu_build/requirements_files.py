"""``requirements_file`` entries of ``python.build``/``python.runtime``: a project's own requirements file, read from
a synced source instead of copied into the recipe by hand.

The file is the project's, so it is read as hostile: a regular file only, never more than ``MAX_BYTES``, inside
its source's checkout (a ``..`` or a link that leads out is refused), and only requirement lines — ``-r`` of
another file of the same source is followed (``MAX_FILES`` in all, no cycles); ``-e``, URLs, paths and every
other pip option are refused, each as a located problem (the file, its line, the recipe key; exit 2), because
each would install something the recipe's pins do not name.

``with_requirements_files`` gives the resolved recipe those requirements in place of the entry, when the source is
checked out; otherwise the entry waits in ``python.unread`` ("read from FILE after sync") and the python stage,
which runs after sync, reads it (``read_entry``)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PipRequirement

from .errors import RecipeError, RecipeProblem
from .regular_file import TooLarge, read_capped

if TYPE_CHECKING:
    from .recipe import Recipe, Requirement, RequirementsFile

MAX_BYTES = 1 << 20  # a real requirements file is a few kB
MAX_FILES = 16  # the file and those it includes with -r
_INCLUDE = re.compile(r"^(?:-r|--requirement)(?:\s*=\s*|\s+|(?=[^\s=-]))(?P<file>\S+)$")


@dataclass(frozen=True)
class Read:
    """What one entry read: its requirements, and each file with its sha256 (the lock records them)."""

    key: str  # python.build[2]
    entry: RequirementsFile
    requirements: tuple[str, ...]
    files: tuple[tuple[str, str], ...]  # (path inside the source, sha256)


def checkout_of(recipe: Recipe, workdir: Path, source: str) -> Path:
    return workdir / recipe.source_path(source)


def is_synced(recipe: Recipe, workdir: Path, entry: RequirementsFile) -> bool:
    """The source is checked out (its folder exists): the file can be read now."""
    return checkout_of(recipe, workdir, entry.source).is_dir()


def read_entry(recipe: Recipe, workdir: Path, key: str, entry: RequirementsFile) -> Read:
    """The requirements ``entry`` names, read from its source's checkout (RecipeError, exit 2, for anything that is
    not a plain requirement or that leaves the source)."""
    from .digest import hash_bytes

    root = checkout_of(recipe, workdir, entry.source)
    where = f"{key}.requirements_file"
    problems: list[RecipeProblem] = []
    requirements: list[str] = []
    files: list[tuple[str, str]] = []
    pending: list[tuple[str, str, int | None]] = [(entry.file, recipe.file or recipe.name, None)]
    while pending:
        rel, named_by, named_at = pending.pop(0)
        if any(rel == seen for seen, _ in files):
            continue  # included twice (or a cycle): read once
        if len(files) >= MAX_FILES:
            problems.append(RecipeProblem(str(root / rel), None, where, f"more than {MAX_FILES} requirements files "
                                          "through -r includes", "include fewer files"))
            break
        data = _read(root, rel, entry.source, RecipeProblem(named_by, named_at, where, ""), problems)
        if data is None:
            continue
        files.append((rel, hash_bytes(data)))
        for line_no, line in _logical_lines(data.decode("utf-8", errors="replace")):
            origin = f"{root / rel}"
            include = _INCLUDE.match(line)
            if include:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), include.group("file")))
                pending.append((target, origin, line_no))
                continue
            problem = _refusal(line)
            if problem is not None:
                problems.append(RecipeProblem(origin, line_no, where, *problem))
            else:
                requirements.append(line)
    if problems:
        raise RecipeError(recipe.file or recipe.name, problems, fix="change the requirements file's lines (or "
                          "list those requirements in the recipe itself), then run the same command again")
    return Read(key, entry, tuple(dict.fromkeys(requirements)), tuple(files))


def _read(root: Path, rel: str, source: str, at: RecipeProblem, problems: list[RecipeProblem]) -> bytes | None:
    """The file's bytes, or None with its problem added (located where it was named: the recipe, or the line of
    the -r that included it)."""
    named_by, where = at.origin, at.key
    named_at = at.line
    path = root / rel
    if rel.startswith("/") or posixpath.normpath(rel).split("/")[0] == "..":
        problems.append(RecipeProblem(named_by, named_at, where, f"{rel} is outside source {source}",
                                      "include only files of the same source"))
        return None
    try:
        real, top = path.resolve(), root.resolve()
    except (OSError, RuntimeError):  # a link loop
        real, top = path, root
    if not real.is_relative_to(top):  # a link that leads out of the checkout
        problems.append(RecipeProblem(named_by, named_at, where, f"{path} leads outside source {source} (to {real})",
                                      "requirements files are read from inside their source only"))
        return None
    try:
        data = read_capped(real, MAX_BYTES)
    except FileNotFoundError:
        problems.append(RecipeProblem(named_by, named_at, where, f"{path} does not exist in source {source}",
                                      f"check the path (ls {root}), or the source's pin"))
        return None
    except TooLarge:
        problems.append(RecipeProblem(named_by, named_at, where, f"{path} is larger than {MAX_BYTES} bytes: not a "
                                      "requirements file", None))
        return None
    except OSError as exc:  # a FIFO, a device, a folder, unreadable
        problems.append(RecipeProblem(named_by, named_at, where, f"cannot read {path}: {exc.strerror or exc}", None))
        return None
    return data


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each line that says something: comments gone, continuations joined."""
    lines: list[tuple[int, str]] = []
    carried, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not carried:
            start = number
        if raw.endswith("\\"):
            carried += raw[:-1]
            continue
        line = re.sub(r"(^|\s)#.*$", "", carried + raw).strip()
        carried = ""
        if line:
            lines.append((start, line))
    if carried.strip():
        lines.append((start, carried.strip()))
    return lines


def _refusal(line: str) -> tuple[str, str] | None:
    """Why ``line`` is not taken (message, fix), or None for a plain requirement."""
    if line.startswith(("-e", "--editable")):
        return (f"{line!r}: an editable install is refused (it would build code the recipe does not pin)",
                "make it a source of the recipe and a build of its own")
    if line.startswith("-") or re.search(r"\s--?[A-Za-z]", line):  # per-requirement options too (--hash)
        return (f"{line!r}: pip options are refused in a requirements file the recipe reads",
                "give the option in the recipe (an entry's index_url, python.constraints)")
    try:
        requirement = PipRequirement(line)
    except InvalidRequirement:
        return (f"{line!r} is not a requirement (a URL or a path is refused)",
                "write it as NAME, NAME==VERSION or NAME>=VERSION")
    if requirement.url:
        return (f"{line!r}: a requirement from a URL is refused", f"name a version instead: {requirement.name}"
                "==VERSION (from the entry's index_url)")
    return None


def with_requirements_files(recipe: Recipe, workdir: Path) -> Recipe:
    """The recipe whose requirements_file entries are replaced by what they read, for each source that is checked
    out; the others are left out and named in ``python.unread``. ``python.files`` keeps every entry."""
    python = recipe.python
    files = tuple((f"python.{key}[{i}]", e) for key in ("build", "runtime")
                  for i, e in enumerate(getattr(python, key)) if e.requirements_file is not None)
    if not files:
        return recipe
    unread: list[str] = []
    lists: dict[str, list[Requirement]] = {"build": [], "runtime": []}
    for key in ("build", "runtime"):
        for i, entry in enumerate(getattr(python, key)):
            if entry.requirements_file is None:
                lists[key].append(entry)
            elif is_synced(recipe, workdir, entry.requirements_file):
                lists[key] += expanded(read_entry(recipe, workdir, f"python.{key}[{i}]", entry.requirements_file),
                                       entry)
            else:
                unread.append(f"python.{key}[{i}]")
    return replace(recipe, python=replace(python, build=tuple(lists["build"]), runtime=tuple(lists["runtime"]),
                                          files=files, unread=tuple(unread)))


def expanded(read: Read, entry: Requirement) -> list[Requirement]:
    """The entry's requirements as entries of their own (each keeps the entry's index_url)."""
    return [replace(entry, requirement=r, requirements_file=None) for r in read.requirements]


def describe_unread(entry: Requirement) -> str:
    assert entry.requirements_file is not None
    return f"read from {entry.requirements_file.file} of source {entry.requirements_file.source} after sync"
