#!/usr/bin/env python3
"""Move modules of a Python package to new dotted names and rewrite every reference in the repository.

usage: python tools/move_modules.py MAPFILE [--root DIR] [--dry-run] [--no-ruff] [--report FILE]
                                    [--exclude PREFIX ...] [--rel-paths FILE ...]

MAPFILE holds one move per line, ``old.dotted.module -> new.dotted.module`` (``#`` starts a comment), plus:
  ``package new.dotted.package: One line saying what it holds.``  the docstring of an ``__init__.py`` made
                                                                  for a new folder;
  ``export new.dotted.package: name[, name...] from module``     the package's ``__init__`` re-exports
      these names of its module ``module``; an import of such a name from another top-level subpackage of
      the package's parent (another stage) is rewritten to take it from the package instead.
A package mapped to a module moves its ``__init__.py`` there; each of its other modules needs its own line.

What it does, in order (nothing is touched before every check passed; --dry-run stops after the report):
1. checks: every old module is a tracked file, no new name exists yet, no folder is left half-mapped;
2. computes the new text of every tracked file (outside --exclude):
   - Python: import statements at any depth (module level, in functions, under TYPE_CHECKING), relative
     ones recomputed from the file's new place and kept relative, absolute ones kept absolute, a module
     bound under the same name as before (``from .stages.sources import sync as sources``); dotted names
     ``pkg.old.X`` anywhere in the text (strings: monkeypatch/mock targets, ``python -m``; comments);
     paths ``pkg/old.py``; in the --rel-paths files (the layering rules) strings equal to a package-relative
     path (``"sources.py"``, ``"plans/"``);
   - other text files (Markdown, Makefile, YAML, shell...): dotted names and ``pkg/...`` paths;
   - pyproject.toml ``packages = [...]`` lists (a hand-kept package list) get the new packages;
3. ``git mv`` (through a temporary folder, so ``stages.py`` can make way for ``stages/``), writes the texts,
   makes the ``__init__.py`` files (``git add``), removes emptied folders;
4. sorts the touched imports with ``ruff check --select I --fix`` (unless --no-ruff);
5. reports every file changed (with the statements rewritten) and what it could not rewrite: a dynamic
   import, a moved module using ``__file__``, a line now over 120 characters, a short module name in the
   prose of a Markdown file, a path to a folder that dissolved. Exit 0: done; 1: refused (nothing
   changed); 2: done, with items to check by hand.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

LINE_LENGTH = 120
TEXT_SUFFIXES = {".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".sh", ".json", ".in", ""}
NEVER_TEXT = ("pyproject.toml", "setup.py", "setup.cfg")  # package names there may be data packages


# --- the plan ---------------------------------------------------------------------------------------------


@dataclass
class Plan:
    moves: dict[str, str] = field(default_factory=dict)
    package_docs: dict[str, str] = field(default_factory=dict)
    exports: dict[str, dict[str, str]] = field(default_factory=dict)  # package -> name -> module (leaf)

    @property
    def top(self) -> str:
        return next(iter(self.moves)).split(".")[0]


def read_plan(path: Path) -> Plan:
    plan = Plan()
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{number}"
        if line.startswith("package "):
            name, _, doc = line[len("package "):].partition(":")
            plan.package_docs[name.strip()] = doc.strip()
        elif line.startswith("export "):
            m = re.fullmatch(r"export\s+([\w.]+)\s*:\s*([\w,\s]+?)\s+from\s+(\w+)", line)
            if not m:
                raise SystemExit(f"{where}: expected 'export pkg.name: a, b from module', got {raw!r}")
            for name in re.split(r"[,\s]+", m[2].strip()):
                plan.exports.setdefault(m[1], {})[name] = m[3]
        else:
            parts = line.replace("->", " ").split()
            if len(parts) != 2 or not all(re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", p) for p in parts):
                raise SystemExit(f"{where}: expected 'old.module -> new.module', got {raw!r}")
            if parts[0] in plan.moves:
                raise SystemExit(f"{where}: {parts[0]} is mapped twice")
            plan.moves[parts[0]] = parts[1]
    if not plan.moves:
        raise SystemExit(f"{path}: no moves")
    if len({m.split(".")[0] for m in [*plan.moves, *plan.moves.values()]}) != 1:
        raise SystemExit(f"{path}: every name must be inside one top-level package")
    if len(set(plan.moves.values())) != len(plan.moves):
        raise SystemExit(f"{path}: two modules are mapped to the same new name (merging is not supported)")
    return plan


def move_name(name: str, moves: dict[str, str]) -> str:
    """A dotted name after the moves: the longest moved module prefix is replaced."""
    best = max((old for old in moves if name == old or name.startswith(old + ".")), key=len, default=None)
    return name if best is None else moves[best] + name[len(best):]


# --- the repository -----------------------------------------------------------------------------------------


def git(root: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if check and done.returncode:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def find_modules(root: Path, top: str) -> dict[str, tuple[str, bool]]:
    """dotted name -> (file path relative to root, is a package __init__)."""
    found = {}
    for path in sorted((root / top).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root)
        parts = list(rel.with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        if is_init:
            parts.pop()
        found[".".join(parts)] = (rel.as_posix(), is_init)
    return found


def module_file(name: str, is_package: bool) -> str:
    return "/".join(name.split(".")) + ("/__init__.py" if is_package else ".py")


@dataclass
class Report:
    changed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    by_hand: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    ruff: str = ""


# --- rewriting one Python file ---------------------------------------------------------------------------


class Text:
    """Edits by (line, column) spans of the original text, applied at once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for line in text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))
        self.lines = text.splitlines(keepends=True)
        self.edits: list[tuple[int, int, str]] = []

    def offset(self, line: int, col_bytes: int) -> int:
        src = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(src.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def covered(self, start: int, end: int) -> bool:
        return any(s <= start and end <= e for s, e, _ in self.edits)

    def result(self) -> str:
        out = self.text
        for start, end, new in sorted(self.edits, reverse=True):
            out = out[:start] + new + out[end:]
        return out


class PyRewriter:
    def __init__(self, mover: Mover, rel: str, text: str) -> None:
        self.m, self.rel, self.src = mover, rel, text
        self.text = Text(text)
        own = mover.module_of_file.get(rel)  # (dotted name, is_init) when inside the package
        self.old_name = own[0] if own else None
        self.is_init = bool(own and own[1])
        self.new_name = move_name(self.old_name, mover.plan.moves) if self.old_name else None
        self.notes: list[str] = []

    def package_of(self, name: str | None) -> list[str]:
        if name is None:
            return []
        return name.split(".") if self.is_init else name.split(".")[:-1]

    def run(self) -> str:
        try:
            tree = ast.parse(self.src, self.rel)
        except SyntaxError as exc:
            self.m.report.by_hand.append(f"{self.rel}:{exc.lineno}: not Python 3 syntax, only dotted names rewritten")
            tree = None
        if tree is not None:
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    self.import_from(node)
                elif isinstance(node, ast.Import):
                    self.import_plain(node)
                elif isinstance(node, ast.Call):
                    self.dynamic(node)
            if self.rel in self.m.rel_path_files:
                self.rel_path_strings(tree)
            if self.old_name and self.new_name != self.old_name and any(
                    isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(tree)):
                self.m.report.by_hand.append(f"{self.rel}: uses __file__ and moves to another folder: check its paths")
        self.m.dotted_and_paths(self.text, self.rel, self.m.report)
        return self.text.result()

    # from X import a, b
    def import_from(self, node: ast.ImportFrom) -> None:
        m = self.m
        if node.level:
            if self.old_name is None:
                return  # a relative import in another package (tests/): not ours
            anchor = self.package_of(self.old_name)
            anchor = anchor[:len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        else:
            base = node.module or ""
        if not (base == m.top or base.startswith(m.top + ".")):
            return
        groups: dict[str, list[str]] = {}
        changed = bool(node.level) and self.new_name != self.old_name
        for alias in node.names:
            full = f"{base}.{alias.name}"
            if full in m.old_modules:  # a module: keep the name it was bound to
                new_full = move_name(full, m.plan.moves)
                new_base, _, leaf = new_full.rpartition(".")
                bound = alias.asname or alias.name
                text = leaf if bound == leaf else f"{leaf} as {bound}"
                changed |= new_full != full
            else:
                if base not in m.old_modules:
                    self.m.report.by_hand.append(f"{self.rel}:{node.lineno}: imports from {base}, not a module "
                                                 "of the package: left as it is")
                    return
                new_base = self.exported(move_name(base, m.plan.moves), alias.name)
                changed |= new_base != base
                text = alias.name if not alias.asname else f"{alias.name} as {alias.asname}"
            groups.setdefault(new_base, []).append(text)
        if not changed:
            return
        statements = [self.render_from(new_base, names, bool(node.level)) for new_base, names in groups.items()]
        self.replace(node, statements)

    def exported(self, new_base: str, name: str) -> str:
        """A name another stage takes from a stage's module: taken from that stage's package instead."""
        for package, names in self.m.plan.exports.items():
            if names.get(name) and new_base == f"{package}.{names[name]}":
                mine = self.new_name or ""
                if not (mine == package or mine.startswith(package + ".")):
                    return package
        return new_base

    def render_from(self, new_base: str, names: list[str], relative: bool) -> str:
        if relative and self.new_name is not None:
            here = self.package_of(self.new_name)
            target = new_base.split(".")
            common = 0
            while common < min(len(here), len(target)) and here[common] == target[common]:
                common += 1
            module = "." * (len(here) - common + 1) + ".".join(target[common:])
        else:
            module = new_base
        return f"from {module} import {', '.join(names)}"

    def replace(self, node: ast.stmt, statements: list[str]) -> None:
        start, end = self.text.span(node)
        line = self.text.lines[node.lineno - 1]
        prefix = line[:len(line.encode("utf-8")[:node.col_offset].decode("utf-8", "replace"))]
        joiner = "\n" + prefix if not prefix.strip() else "; "
        indent = len(prefix) if not prefix.strip() else 0
        wrapped = [self.wrap(s, indent) for s in statements]
        new = joiner.join(wrapped)
        self.text.edits.append((start, end, new))
        old = self.src[start:end]
        if "#" in old:
            self.m.report.by_hand.append(f"{self.rel}:{node.lineno}: a comment inside this import was dropped")
        self.m.report.changed[self.rel].append(f"{node.lineno}: {' '.join(old.split())} => {' | '.join(statements)}")

    @staticmethod
    def wrap(statement: str, indent: int) -> str:
        if indent + len(statement) <= LINE_LENGTH:
            return statement
        head, _, names = statement.partition(" import ")
        pad = " " * (indent + 4)
        return f"{head} import (\n" + "".join(f"{pad}{n.strip()},\n" for n in names.split(",")) + " " * indent + ")"

    # import X.Y [as Z]
    def import_plain(self, node: ast.Import) -> None:
        m = self.m
        new_names, changed = [], False
        for alias in node.names:
            name = alias.name
            new = move_name(name, m.plan.moves) if (name == m.top or name.startswith(m.top + ".")) else name
            changed |= new != name
            new_names.append(new if not alias.asname else f"{new} as {alias.asname}")
        if changed:
            self.replace(node, [f"import {', '.join(new_names)}"])
            # `import pkg.old` binds pkg: its uses `pkg.old.f` are dotted names, rewritten in the text pass

    # importlib.import_module(<not a constant>), __import__(...)
    def dynamic(self, node: ast.Call) -> None:
        func = ast.unparse(node.func)
        if func.split(".")[-1] not in ("import_module", "__import__", "find_spec", "resolve_name"):
            return
        if node.args and isinstance(node.args[0], ast.Constant):
            value = node.args[0].value
            if isinstance(value, str) and value.startswith("."):
                self.m.report.by_hand.append(f"{self.rel}:{node.lineno}: relative dynamic import {value!r}: "
                                             "check it from the module's new place")
            return
        self.m.report.by_hand.append(f"{self.rel}:{node.lineno}: dynamic import {ast.unparse(node)[:80]}: "
                                     "its module name is computed, not rewritten (check it names no moved module)")

    def rel_path_strings(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in self.m.rel_paths:
                new = self.m.rel_paths[node.value]
                start, end = self.text.span(node)
                if new is None:
                    self.m.report.by_hand.append(f"{self.rel}:{node.lineno}: {node.value!r} names a folder that "
                                                 "dissolves: left as it is")
                    continue
                if self.text.covered(start, end):
                    continue
                self.text.edits.append((start, end, self.src[start:end].replace(node.value, new, 1)))
                self.m.report.changed[self.rel].append(f"{node.lineno}: {node.value!r} => {new!r}")


# --- the mover ------------------------------------------------------------------------------------------------


class Mover:
    def __init__(self, root: Path, plan: Plan, excludes: list[str], rel_path_files: list[str]) -> None:
        self.root, self.plan, self.top = root, plan, plan.top
        self.report = Report()
        self.excludes = excludes
        self.allow_dirty = False
        self.rel_path_files = set(rel_path_files)
        found = find_modules(root, self.top)
        self.old_modules = set(found)
        self.module_of_file = {rel: (name, is_init) for name, (rel, is_init) in found.items()}
        self.found = found
        self.new_files: dict[str, str] = {}  # old file -> new file
        self.rel_paths: dict[str, str | None] = {}
        self.dotted = re.compile(rf"(?<![\w.]){re.escape(self.top)}((?:\.[A-Za-z_]\w*)+)")
        self.pathre = re.compile(rf"(?<![\w.-]){re.escape(self.top)}/(\w+(?:/\w+)*)(\.py\b|/)?")
        self._defs: dict[str, set[str]] = {}

    # 1. checks
    def check(self) -> list[str]:
        problems = []
        moves = self.plan.moves
        tracked = set(git(self.root, "ls-files", "-z", self.top).split("\0"))
        present = [old for old in moves if old in self.found]
        if not present and all(new in self.found for new in moves.values()):
            raise SystemExit("already applied: none of the old modules exists and every new one does; nothing done")
        for old, new in moves.items():
            if old not in self.found:
                problems.append(f"{old}: no such module (moved or removed by another change?)")
                continue
            rel, is_init = self.found[old]
            if rel not in tracked:
                problems.append(f"{old}: {rel} is not tracked by git")
            new_rel = module_file(new, False)
            leaving = {self.found[o][0] for o in moves if o in self.found}
            if ((self.root / new_rel).exists() and new_rel not in leaving) or (self.root / new_rel[:-3]).is_dir():
                problems.append(f"{new}: {new_rel} or a folder {new_rel[:-3]}/ exists already")
            for n in range(2, new.count(".") + 1):  # a new folder must not be shadowed by a module staying
                folder_module = module_file(".".join(new.split(".")[:n]), False)
                if (self.root / folder_module).exists() and folder_module not in leaving:
                    problems.append(f"{new}: its folder would sit beside {folder_module}, which stays")
            self.new_files[rel] = new_rel
        tracked_dirs = {str(Path(t).parent) for t in tracked if t}
        for folder in sorted({Path(r).parent for r in self.new_files.values()}):
            while folder.as_posix() != self.top and folder.parts:
                if (self.root / folder).exists() and str(folder) not in tracked_dirs and not any(
                        d.startswith(str(folder) + "/") for d in tracked_dirs):
                    problems.append(f"{folder}/ exists but git tracks nothing in it (left by an earlier run, hidden "
                                    "by .gitignore?): remove it first")
                folder = folder.parent
        # a moved package's other modules must be mapped: they cannot follow a package turned module
        for old in self.found:
            parent = next((p for p in moves if old.startswith(p + ".") and self.found.get(p, ("", False))[1]), None)
            if parent and old not in moves:
                problems.append(f"{old}: its package {parent} becomes the module {moves[parent]}; map it too")
        dirty = [line[3:] for line in git(self.root, "status", "--porcelain", "--untracked-files=no").splitlines()
                 if not any(line[3:].startswith(e.rstrip("/") + "/") or line[3:] == e for e in self.excludes)]
        if dirty and not self.allow_dirty:
            problems.append(f"uncommitted changes in {', '.join(dirty[:5])}{' ...' if len(dirty) > 5 else ''}: "
                            "commit them first (then `git reset --hard` undoes a run), or pass --allow-dirty")
        for package in self.plan.exports:
            if not any(new.startswith(package + ".") for new in moves.values()):
                problems.append(f"export {package}: no module moves into that package")
        return problems

    def fill_paths(self) -> None:
        """Package-relative paths (as the layering rules name them) old -> new; None: a folder that dissolves."""
        prefix = self.top + "/"
        for old_rel, new_rel in self.new_files.items():
            a, b = old_rel[len(prefix):], new_rel[len(prefix):]
            self.rel_paths[a] = b
        moved = set(self.rel_paths)
        for a in sorted(moved):
            if a.endswith("/__init__.py"):  # a package turned module: does its folder keep anything?
                folder = a[:-len("__init__.py")]
                inside = (x[len(prefix):] for x in self.module_of_file)
                still = any(r.startswith(folder) and r not in moved for r in inside)
                self.rel_paths[folder] = None if not still else folder
                self.rel_paths[folder.rstrip("/")] = self.rel_paths[folder] and folder.rstrip("/")

    # 2. texts
    def dotted_and_paths(self, text: Text, rel: str, report: Report) -> None:
        for match in self.dotted.finditer(text.text):
            name = self.top + match[1]
            new = move_name(name, self.plan.moves)
            if new == name or text.covered(match.start(), match.end()):
                continue
            text.edits.append((match.start(), match.end(), new))
            report.changed[rel].append(f"{self._line(text, match.start())}: {name} => {new}")
        for match in self.pathre.finditer(text.text):
            inner, tail = match[1], match[2] or ""
            key = inner + (".py" if tail == ".py" else "/")
            if key not in self.rel_paths and tail != ".py" and inner + ".py" in self.rel_paths:
                key = inner + ".py"
            if key not in self.rel_paths or text.covered(match.start(), match.end()):
                continue
            new = self.rel_paths[key]
            if new is None:
                report.by_hand.append(f"{rel}:{self._line(text, match.start())}: {match[0]} names a folder that "
                                      "dissolves: left as it is")
                continue
            if key.endswith(".py") and tail != ".py":
                new = new[:-3]  # a module named as a path without .py
            replacement = f"{self.top}/{new.rstrip('/')}" + ("/" if tail == "/" else "")
            if key.endswith(".py") and tail == ".py":
                replacement = f"{self.top}/{new}"
            text.edits.append((match.start(), match.end(), replacement))
            report.changed[rel].append(f"{self._line(text, match.start())}: {match[0]} => {replacement}")

    @staticmethod
    def _line(text: Text, offset: int) -> int:
        import bisect
        return bisect.bisect_right(text.starts, offset)

    def prose_mentions(self, rel: str, text: str) -> None:
        """Markdown naming a moved module by its short name (`sources`, `plans/`, `registry.STAGES`)."""
        short = {}
        for old in self.plan.moves:
            if old in self.found:
                short[old[len(self.top) + 1:]] = old
        names = "|".join(sorted((re.escape(s.replace(".", "/")) for s in short), key=len, reverse=True))
        if not names:
            return
        token = re.compile(rf"`({names})(\.py|/|\.[A-Za-z_]\w*)?`")
        packages = {s for s, old in short.items() if self.found[old][1]}
        for number, line in enumerate(text.splitlines(), 1):
            qualified, bare = [], []
            for match in token.finditer(line):
                attr, old = match[2] or "", short[match[1].replace("/", ".")]
                if attr.startswith(".") and attr != ".py" and not self._defines(old, attr[1:]):
                    continue  # `build.env` is a recipe key, not the build module
                if attr == "/" and match[1].replace("/", ".") not in packages:
                    continue  # `patches/` is a data folder, not the patches module
                (qualified if attr else bare).append(f"{match[0]} (now {move_name(old, self.plan.moves)})")
            if qualified or len(bare) > 3:  # `fetch`, `build` alone are commands' names more often than modules'
                self.report.by_hand.append(f"{rel}:{number}: prose names moved modules by short name: "
                                           + ", ".join(qualified + bare))

    def _defines(self, module: str, name: str) -> bool:
        if module not in self._defs:
            tree = ast.parse((self.root / self.found[module][0]).read_text(encoding="utf-8"))
            names = set()
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
            self._defs[module] = names
        return name in self._defs[module]

    def new_texts(self) -> dict[str, str]:
        out = {}
        files = [f for f in git(self.root, "ls-files", "-z").split("\0") if f]
        for rel in files:
            if any(rel == e or rel.startswith(e.rstrip("/") + "/") for e in self.excludes):
                continue
            path = self.root / rel
            if path.is_symlink() or not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if rel.endswith(".py") and Path(rel).name not in NEVER_TEXT:
                new = PyRewriter(self, rel, text).run()
            elif Path(rel).name == "pyproject.toml":
                new = self.pyproject(rel, text)
            elif Path(rel).name in NEVER_TEXT or Path(rel).suffix not in TEXT_SUFFIXES:
                continue
            else:
                t = Text(text)
                self.dotted_and_paths(t, rel, self.report)
                new = t.result()
                if rel.endswith(".md"):
                    self.prose_mentions(rel, new)
            if new != text:
                out[rel] = new
        return out

    def pyproject(self, rel: str, text: str) -> str:
        """A hand-kept ``packages = [...]`` gets the new packages and loses the dissolved ones."""
        m = re.search(r"^packages\s*=\s*\[([^\]]*)\]", text, re.M)
        if not m or self.top not in m[1]:
            return text
        listed = re.findall(r"[\"']([\w.]+)[\"']", m[1])
        after = sorted(self.packages_after())
        # a code package that is gone leaves; data packages (no __init__.py: recipes, patches) stay
        keep = [p for p in listed if not (p in self.found and self.found[p][1] and p not in after)]
        new_list = keep + [p for p in after if p not in keep]
        body = ", ".join(f'"{p}"' for p in new_list)
        self.report.changed[rel].append(f"packages: {listed} => {new_list}")
        return text[:m.start(1)] + body + text[m.end(1):]

    def packages_after(self) -> set[str]:
        packages = set()
        for name, (_rel, is_init) in self.found.items():
            new = move_name(name, self.plan.moves)
            parts = new.split(".") if is_init and new == name else new.split(".")[:-1]
            for n in range(1, len(parts) + 1):
                packages.add(".".join(parts[:n]))
        return packages

    # 3. moves
    def apply(self, texts: dict[str, str]) -> None:
        staging = self.root / ".move_modules_tmp"
        if staging.exists():
            raise SystemExit(f"{staging} exists: a previous run was interrupted; inspect and remove it")
        staging.mkdir()
        staged = {}
        for n, (old_rel, new_rel) in enumerate(sorted(self.new_files.items())):
            tmp = f".move_modules_tmp/{n}.py"
            git(self.root, "mv", old_rel, tmp)
            staged[tmp] = (old_rel, new_rel)
        for tmp, (old_rel, new_rel) in staged.items():
            (self.root / new_rel).parent.mkdir(parents=True, exist_ok=True)
            git(self.root, "mv", tmp, new_rel)
            self.report.moved.append((old_rel, new_rel))
        staging.rmdir()
        for rel, text in texts.items():
            target = self.new_files.get(rel, rel)
            (self.root / target).write_text(text, encoding="utf-8")
        self.make_inits()
        self.unignore()
        for old_rel in self.new_files:
            self.prune(Path(old_rel).parent)
        git(self.root, "add", "-f", "-A", "--", *sorted(set(self.new_files.values()) | set(self.report.created)),
            *[t for t in texts if t not in self.new_files])

    def unignore(self) -> None:
        """A new folder a .gitignore pattern hides (``build/`` hides ``stages/build/``) is re-included, or the
        next module made there would silently stay out of git."""
        folders = sorted({Path(r).parent.as_posix() for r in self.new_files.values()})
        ignored = [f for f in folders if subprocess.run(["git", "check-ignore", "-q", f"{f}/__init__.py"],
                                                         cwd=self.root).returncode == 0]
        if not ignored:
            return
        gitignore = self.root / ".gitignore"
        text = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
        lines = [f"!/{f}/" for f in ignored if f"!/{f}/" not in text.splitlines()]
        if lines:
            comment = "# stage packages whose names other patterns above ignore (tools/move_modules.py)"
            text += ("" if text.endswith("\n") or not text else "\n") + "\n".join([comment, *lines]) + "\n"
            gitignore.write_text(text, encoding="utf-8")
            git(self.root, "add", ".gitignore")
            self.report.changed[".gitignore"].extend(f"added {line}" for line in lines)
            self.report.by_hand.append(f".gitignore: {', '.join(ignored)} matched an ignore pattern; re-included")

    def make_inits(self) -> None:
        for new_rel in sorted(set(self.new_files.values())):
            folder = Path(new_rel).parent
            while folder.parts and folder != Path(self.top).parent and folder.as_posix() != ".":
                init = self.root / folder / "__init__.py"
                if folder.as_posix() == self.top:
                    break
                if not init.exists():
                    dotted = ".".join(folder.parts)
                    doc = self.plan.package_docs.get(dotted) or self._default_doc(dotted)
                    init.write_text(self.docstring(doc) + self.export_lines(dotted), encoding="utf-8")
                    self.report.created.append((folder / "__init__.py").as_posix())
                folder = folder.parent

    @staticmethod
    def docstring(doc: str) -> str:
        import textwrap
        lines = textwrap.wrap(f'"""{doc}"""', LINE_LENGTH)
        return "\n".join(lines) + "\n"

    def export_lines(self, package: str) -> str:
        names = self.plan.exports.get(package)
        if not names:
            return ""
        by_module = defaultdict(list)
        for name, module in names.items():
            by_module[module].append(name)
        lines = [f"\nfrom .{module} import {', '.join(sorted(n))}\n" for module, n in sorted(by_module.items())]
        return "".join(lines) + "\n__all__ = [" + ", ".join(f'"{n}"' for n in sorted(names)) + "]\n"

    def _default_doc(self, dotted: str) -> str:
        members = sorted(new.rpartition(".")[2] for new in self.plan.moves.values() if new.rpartition(".")[0] == dotted)
        return f"The {dotted.rpartition('.')[2]} package: {', '.join(members) or 'its subpackages'}."

    def prune(self, folder: Path) -> None:
        path = self.root / folder
        if not path.is_dir() or folder.as_posix() == self.top:
            return
        rest = [p for p in path.iterdir() if p.name != "__pycache__"]
        if not rest:
            shutil.rmtree(path)
            self.report.removed_dirs.append(folder.as_posix())

    # 4. after
    def ruff(self, files: list[str]) -> None:
        near = [self.root / ".venv/bin/ruff", Path(sys.executable).parent / "ruff"]
        ruff = shutil.which("ruff") or next((str(p) for p in near if p.exists()), None)
        py = [f for f in files if f.endswith(".py") and (self.root / f).exists()]
        if not ruff or not py:
            self.report.ruff = "ruff not found: imports not re-sorted" if not ruff else ""
            return
        done = subprocess.run([ruff, "check", "--select", "I", "--fix", "--quiet", *py], cwd=self.root,
                              capture_output=True, text=True)
        self.report.ruff = (done.stdout + done.stderr).strip() or "imports sorted (ruff --select I --fix)"

    def long_lines(self, files: list[str]) -> None:
        for rel in files:
            path = self.root / rel
            if not rel.endswith(".py") or not path.exists():
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if len(line) > LINE_LENGTH and any(n in line for n in self.plan.moves.values()):
                    self.report.by_hand.append(f"{rel}:{number}: {len(line)} characters after the rewrite")

    def leftovers(self) -> None:
        """References to old names still in the tree (outside the excluded files)."""
        now = set(find_modules(self.root, self.top))
        gone = set(self.plan.moves) - now
        for rel in git(self.root, "ls-files", "-z").split("\0"):
            if not rel or any(rel == e or rel.startswith(e.rstrip("/") + "/") for e in self.excludes):
                continue
            if Path(rel).name in NEVER_TEXT or not (self.root / rel).is_file():
                continue
            try:
                text = (self.root / rel).read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for match in self.dotted.finditer(text):
                name = self.top + match[1]
                if any(name == g or name.startswith(g + ".") for g in gone) and \
                        not any(name == n or name.startswith(n + ".") for n in now):
                    line = text.count("\n", 0, match.start()) + 1
                    self.report.by_hand.append(f"{rel}:{line}: still names {name}")


def print_report(report: Report, out) -> None:
    print(f"moved {len(report.moved)} modules:", file=out)
    for a, b in report.moved:
        print(f"  {a} -> {b}", file=out)
    if report.created:
        print(f"created {len(report.created)} __init__.py: {', '.join(report.created)}", file=out)
    if report.removed_dirs:
        print(f"removed emptied folders: {', '.join(report.removed_dirs)}", file=out)
    total = sum(len(v) for v in report.changed.values())
    print(f"rewrote {total} references in {len(report.changed)} files:", file=out)
    for rel in sorted(report.changed):
        print(f"  {rel} ({len(report.changed[rel])})", file=out)
        for change in report.changed[rel]:
            print(f"      {change}", file=out)
    if report.ruff:
        print(f"ruff: {report.ruff}", file=out)
    print(f"to check by hand: {len(report.by_hand)}", file=out)
    for item in sorted(set(report.by_hand)):
        print(f"  {item}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1].removeprefix("usage: "),
                                 description="Move modules and rewrite every reference to them.")
    ap.add_argument("mapfile", type=Path)
    ap.add_argument("--root", type=Path, help="the repository (default: the git top of the current folder)")
    ap.add_argument("--dry-run", action="store_true", help="report what would change; touch nothing")
    ap.add_argument("--allow-dirty", action="store_true", help="run over uncommitted changes")
    ap.add_argument("--no-ruff", action="store_true", help="do not re-sort the touched imports with ruff")
    ap.add_argument("--report", type=Path, help="also write the report to this file")
    ap.add_argument("--exclude", action="append", default=["tools"],
                    help="a file or folder left alone (default: tools/, where this tool and its map live)")
    ap.add_argument("--rel-paths", action="append", default=["tests/unit/test_layering.py"],
                    help="a file whose strings name package-relative paths (the layering rules)")
    args = ap.parse_args(argv)
    root = (args.root or Path(git(Path.cwd(), "rev-parse", "--show-toplevel").strip())).resolve()
    plan = read_plan(args.mapfile.resolve())
    mover = Mover(root, plan, args.exclude, args.rel_paths)
    mover.allow_dirty = args.allow_dirty
    problems = mover.check()
    if problems:
        print("refused, nothing changed:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    mover.fill_paths()
    texts = mover.new_texts()
    if not args.dry_run:
        mover.apply(texts)
        touched = sorted({mover.new_files.get(r, r) for r in texts} | set(mover.report.created))
        if not args.no_ruff:
            mover.ruff(touched)
        git(root, "add", "-f", "--", *[t for t in touched if (root / t).exists()])
        mover.long_lines(touched)
        mover.leftovers()
    print_report(mover.report, sys.stdout)
    if args.report:
        with args.report.open("w", encoding="utf-8") as fh:
            print_report(mover.report, fh)
    return 2 if mover.report.by_hand else 0


if __name__ == "__main__":
    sys.exit(main())
