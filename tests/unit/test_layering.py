"""The package's layering, as executable rules: each external effect in one module, the CLI on top,
no import cycles.

Every module of ``flagtree_cpu_build`` is parsed with ``ast`` — nothing is imported — and every
import statement counts, at module level or inside a function (a lazy import is still a
dependency). A rule that fails names the file, the line and the rule; the last tests run the same
checkers on small packages made to break the rules, so this file cannot pass by checking nothing.

git is an effect without an import of its own: it is argv handed to a process. So git argv has a
checker of its own (``git_argv_violations``): outside the git modules, no list or tuple that starts
with the git program, and no call of the git runners (``run_git``, ``git_result``, ``git_succeeds``).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "flagtree_cpu_build"
# the CLI layer: cli.py, or the cli/ package it becomes, and `python -m flagtree_cpu_build`
CLI = ("cli.py", "cli/", "__main__.py")


@dataclass(frozen=True)
class Rule:
    name: str
    libraries: tuple[str, ...]  # top-level import names (and dotted names) the rule is about
    allowed: tuple[str, ...]  # paths inside the package: a file, or a folder ending in "/"


RULES = (
    Rule("typer/click only in the CLI", ("typer", "click"), CLI),
    Rule("rich only in ui.py, progress.py and the CLI", ("rich",), ("ui.py", "progress.py", *CLI)),
    Rule("HTTP only in download.py", ("requests", "urllib3", "httpx", "http.client", "urllib.request"),
         ("download.py",)),
    Rule("GitPython only in gitcmd.py", ("git", "gitdb"), ("gitcmd.py",)),
    Rule("processes only in proc.py", ("subprocess", "multiprocessing", "pty", "os.system", "os.popen", "os.exec*",
                                       "os.spawn*", "os.posix_spawn*", "os.fork*", "asyncio.create_subprocess_*"),
         ("proc.py",)),
    Rule("no core module imports the CLI", (f"{PACKAGE}.cli",), CLI),
)
# the git modules: queries (gitcmd), changes (gitops), running one git (gitrun, which only they import)
GIT_MODULES = ("gitcmd.py", "gitops.py", "gitrun.py")
RULES += (Rule("gitrun only in the git modules", (f"{PACKAGE}.gitrun",), GIT_MODULES),)
GIT_RUNNERS = ("run_git", "git_result", "git_succeeds")
GIT_ARGV = "git argv only in the git modules"


@dataclass(frozen=True)
class Import:
    file: str  # relative to the folder holding the package
    line: int
    names: tuple[str, ...]  # absolute dotted names this statement uses (a module, or module.attribute)
    type_only: bool  # under `if TYPE_CHECKING:`: a dependency of the type checker, not of a run
    from_module: str | None = None  # `from X import a, b`: X (the names are X.a, X.b)


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}: {self.detail}"


# --- reading the package -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. flagtree_cpu_build.recipe.schema
    path: Path
    rel: str  # path inside the package, e.g. recipe/schema.py
    file: str  # path from the folder holding the package, as messages name it
    is_package: bool  # an __init__.py


def modules(root: Path, package: str) -> dict[str, Module]:
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root / package).as_posix()
        parts = [package, *rel.removesuffix(".py").split("/")]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = Module(".".join(parts), path, rel, f"{package}/{rel}", is_package)
    return found


def imports(module: Module) -> Iterator[Import]:
    return iter(_imports(module, module.path.read_text(encoding="utf-8")))


@functools.cache  # every rule walks every module: parse each text once per process
def _imports(module: Module, text: str) -> tuple[Import, ...]:
    return tuple(_walk_imports(module, ast.parse(text, str(module.path))))


def _walk_imports(module: Module, tree: ast.Module) -> Iterator[Import]:
    type_only_lines = _type_checking_lines(tree)
    here = module.name if module.is_package else module.name.rpartition(".")[0]
    file = module.file
    for node in ast.walk(tree):
        base = None
        if isinstance(node, ast.Import):
            names = tuple(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = tuple(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in _ATTRIBUTES:
            names = (f"{node.value.id}.{node.attr}",)  # os.system(...) needs no import of its own
        else:
            continue
        yield Import(file, node.lineno, names, node.lineno in type_only_lines, base)


_ATTRIBUTES = ("os", "asyncio")  # modules whose functions start processes without a further import


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _matches(name: str, library: str) -> bool:
    if library.endswith("*"):
        return name.startswith(library[:-1]) and "." not in name[len(library) - 1:]
    return name == library or name.startswith(library + ".")


def _allowed(rel: str, allowed: tuple[str, ...]) -> bool:
    return any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in allowed)


# --- the checks ------------------------------------------------------------------------------------------


def rule_violations(root: Path, package: str, rule: Rule) -> list[Violation]:
    found = []
    for module in modules(root, package).values():
        if _allowed(module.rel, rule.allowed):
            continue
        for imp in imports(module):
            names = (*imp.names, *([imp.from_module] if imp.from_module else []))
            used = sorted({lib for name in names for lib in rule.libraries if _matches(name, lib)})
            if used:
                found.append(Violation(imp.file, imp.line, rule.name, f"uses {', '.join(used)}"))
    return sorted(set(found), key=lambda v: (v.file, v.line))


def dependency_graph(root: Path, package: str) -> dict[str, dict[str, Import]]:
    """Module -> the package modules it imports when run, each with the statement that does it.

    ``from .recipe import X`` is an edge to ``recipe``'s ``__init__`` (to ``recipe.X`` when X is a module).
    Importing ``a.b.c`` from outside ``a.b`` also runs ``a.b``'s ``__init__``: an edge to it too; a module
    inside ``a.b`` importing its sibling module is not (``a.b`` is already being imported), but one taking a
    name from ``a.b``'s ``__init__`` is."""
    known = modules(root, package)
    graph: dict[str, dict[str, Import]] = {name: {} for name in known}
    for name, module in known.items():
        for imp in imports(module):
            if imp.type_only:
                continue
            for target in imp.names:
                if imp.from_module is not None and target not in known:
                    target = imp.from_module  # a name defined in that module (or a package's __init__)
                for dep in _runtime_targets(target, name, known):
                    if dep != name:
                        graph[name].setdefault(dep, imp)
    return graph


def _runtime_targets(target: str, importer: str, known: dict[str, Module]) -> list[str]:
    if target not in known:
        return []
    deps = [target]
    parts = target.split(".")
    for n in range(2, len(parts)):  # the enclosing packages, below the top one
        parent = ".".join(parts[:n])
        if parent in known and not (importer == parent or importer.startswith(parent + ".")):
            deps.append(parent)
    return deps


def import_cycles(root: Path, package: str) -> list[list[tuple[str, Import]]]:
    """Each cycle as its edges (module, the import statement leading to the next module), one per strongly
    connected group of modules."""
    graph = dependency_graph(root, package)
    cycles = []
    for group in _strongly_connected(graph):
        if len(group) > 1:
            cycles.append(_one_cycle(graph, group))
    return cycles


def _strongly_connected(graph: dict[str, dict[str, Import]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively (a deep package must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def _one_cycle(graph: dict[str, dict[str, Import]], group: set[str]) -> list[tuple[str, Import]]:
    """The shortest way from the group's first module back to itself, staying inside the group."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in came_from:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child in group and child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    path = [start]
    while len(path) == 1 or path[-1] != start:
        path.append(came_from[path[-1]])
    path.reverse()  # start -> ... -> start
    return [(a, graph[a][b]) for a, b in zip(path, path[1:], strict=False)]


def describe_cycle(cycle: list[tuple[str, Import]]) -> str:
    names = " -> ".join([*(module for module, _ in cycle), cycle[0][0]])
    edges = "; ".join(f"{imp.file}:{imp.line}" for _, imp in cycle)
    return f"import cycle: {names} (imports at {edges})"


def git_argv_violations(root: Path, package: str) -> list[Violation]:
    """Git argv outside ``GIT_MODULES``: a list or tuple literal whose first element is the git program
    (``"git"``, a path ending in ``/git``, ``shutil.which("git")``) where it can be argv — passed to a call,
    built from variables, or carrying an option; not a subscript (``Literal["git", ...]``) or a constant of
    plain words (``("git", "artifact", "wheel")``, the kinds of a bundle member) — and any call of a git
    runner, however it was imported."""
    found = []
    for module in modules(root, package).values():
        if _allowed(module.rel, GIT_MODULES):
            continue
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        subscripted = {id(node.slice) for node in ast.walk(tree) if isinstance(node, ast.Subscript)}
        passed = {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call)
                  for arg in (*node.args, *(k.value for k in node.keywords))}
        for node in ast.walk(tree):
            if isinstance(node, (ast.List, ast.Tuple)) and node.elts and _is_git_program(node.elts[0]) \
                    and id(node) not in subscripted and (id(node) in passed or _argv_like(node.elts[1:])):
                found.append(Violation(module.file, node.lineno, GIT_ARGV, f"argv {ast.unparse(node)[:60]}"))
            elif isinstance(node, ast.Call) and _called_name(node.func) in GIT_RUNNERS:
                found.append(Violation(module.file, node.lineno, GIT_ARGV, f"calls {_called_name(node.func)}"))
    return sorted(set(found), key=lambda v: (v.file, v.line))


def _is_git_program(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value == "git" or node.value.endswith("/git")
    return isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value == "git" for a in node.args)


def _argv_like(rest: list[ast.expr]) -> bool:
    """Built from values (a variable, ``*args``, an f-string), or carrying an option: not a table of words."""
    return any(not (isinstance(e, ast.Constant) and isinstance(e.value, str)) or e.value.startswith("-")
               for e in rest)


def _called_name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


# --- the package's rules -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_effects_and_frameworks_stay_in_their_modules(rule: Rule) -> None:
    violations = rule_violations(REPO_ROOT, PACKAGE, rule)
    assert not violations, "\n".join(map(str, violations))


def test_git_argv_stays_in_the_git_modules() -> None:
    violations = git_argv_violations(REPO_ROOT, PACKAGE)
    assert not violations, "\n".join(map(str, violations))


def test_no_import_cycles() -> None:
    cycles = import_cycles(REPO_ROOT, PACKAGE)
    assert not cycles, "\n".join(describe_cycle(c) for c in cycles)


def test_the_checker_sees_the_whole_package() -> None:
    found = modules(REPO_ROOT, PACKAGE)
    assert f"{PACKAGE}.download" in found and f"{PACKAGE}.proc" in found
    graph = dependency_graph(REPO_ROOT, PACKAGE)
    assert f"{PACKAGE}.atomic" in graph[f"{PACKAGE}.state"]  # an import of a sibling is an edge


# --- the checker itself ----------------------------------------------------------------------------------


def test_checker_reports_a_forbidden_import_and_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "download.py": "import requests\n",
        "status.py": "from __future__ import annotations\n\n\ndef size():\n    import requests\n    return requests\n",
        "a.py": "from . import b\n",
        "b.py": "from .sub import thing\n",
        "sub/__init__.py": "from ..a import x\nthing = 1\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n",
        "runner.py": "import os\n\nos.system('true')\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    http = next(r for r in RULES if r.name.startswith("HTTP"))
    assert [str(v) for v in rule_violations(tmp_path, "pkg", http)] == [
        "pkg/status.py:5: HTTP only in download.py: uses requests"]
    processes = next(r for r in RULES if r.name.startswith("processes"))
    assert [str(v) for v in rule_violations(tmp_path, "pkg", processes)] == [
        "pkg/runner.py:3: processes only in proc.py: uses os.system"]
    cycles = import_cycles(tmp_path, "pkg")
    assert [describe_cycle(c) for c in cycles] == [
        "import cycle: pkg.a -> pkg.b -> pkg.sub -> pkg.a (imports at pkg/a.py:1; pkg/b.py:1; pkg/sub/__init__.py:1)"]


def test_checker_reports_git_argv_outside_the_git_modules(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "bundle").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "gitcmd.py": "from .proc import start\n\n\ndef run_git(args):\n    return start(['git', *args])\n",
        "gitops.py": "from .gitcmd import run_git\n\n\ndef clone(url):\n    run_git(['clone', url])\n",
        "proc.py": "def start(argv):\n    return argv\n",
        "sources.py": "from .gitcmd import run_git\n\nrun_git(['fetch', 'origin'])\n",
        "patches.py": "from . import gitcmd\n\ngitcmd.git_result(['apply', '--check'])\n",
        "build.py": "from .proc import start\n\nstart(['git', 'status'])\n",
        "stamp.py": "import shutil\n\nARGV = (shutil.which('git'), '-C', 'x', 'rev-parse', 'HEAD')\n",
        "pins.py": "def tip(url):\n    argv = ['/usr/bin/git', 'ls-remote', url]\n    return argv\n",
        "bundle/kinds.py": "from typing import Literal\n\nKind = Literal['git', 'wheel']\nKINDS = ('git', 'wheel')\n",
        "bundle/__init__.py": "",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    assert [str(v) for v in git_argv_violations(tmp_path, "pkg")] == [
        f"pkg/build.py:3: {GIT_ARGV}: argv ['git', 'status']",
        f"pkg/patches.py:3: {GIT_ARGV}: calls git_result",
        f"pkg/pins.py:2: {GIT_ARGV}: argv ['/usr/bin/git', 'ls-remote', url]",
        f"pkg/sources.py:3: {GIT_ARGV}: calls run_git",
        f"pkg/stamp.py:3: {GIT_ARGV}: argv (shutil.which('git'), '-C', 'x', 'rev-parse', 'HEAD')",
    ]
