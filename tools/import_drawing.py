#!/usr/bin/env python3
"""Draw the package's imports by folder and count what the architecture review counts (stdlib only).

Every import statement counts (module level, inside a function, under TYPE_CHECKING), as in the review's
§1.2. A folder is one room; a module at the package root is a room of its own. An arrow is a distinct
room -> room edge. Floors are the longest-path layering of the room graph once its upward arrows are
taken out; an upward arrow is an edge against that layering, i.e. one closing a cycle between rooms (the
fewest such edges, found exactly for small knots and greedily for big ones). Circles are module-level
import cycles (strongly connected groups of modules).

    python tools/import_drawing.py [--root .] [--package flagtree_cpu_build] [--map tools/stage_layout.map]
                                   [--runtime] [--json] [--why] [--rules]

--map draws the package as if the mapping's moves were made (nothing is touched). --runtime leaves out
imports under TYPE_CHECKING. --why prints the module imports behind each upward arrow. --rules also checks
the stage layout: the kit imports no stage, no module outside stages/ imports a stage (except the layers
above them: cli, pipeline, ... as found), and a stage takes another stage's modules only through its
package or the registry. Exit status 1 when an upward arrow, a circle or a broken rule is found.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

KINDS = ("top", "function", "type")


def read_map(path: Path) -> dict[str, str]:
    mapping = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith(("package ", "export ")):  # move_modules.py's other lines
            continue
        parts = line.replace("->", " ").split()
        if len(parts) != 2:
            raise SystemExit(f"{path}:{number}: expected 'old.module -> new.module', got {raw!r}")
        mapping[parts[0]] = parts[1]
    return mapping


def find_modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """dotted name -> (file, is a package __init__)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = [package, *path.relative_to(root / package).with_suffix("").parts]
        is_init = parts[-1] == "__init__"
        if is_init:
            parts.pop()
        found[".".join(parts)] = (path, is_init)
    return found


def _kind_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    up = node
    while up in parents:
        up = parents[up]
        if isinstance(up, ast.If) and "TYPE_CHECKING" in ast.unparse(up.test):
            return "type"
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return "function"
    return "top"


def module_edges(root: Path, package: str) -> tuple[dict[str, bool], dict[tuple[str, str], dict]]:
    """(modules -> is package, {(importer, imported): {kind: first line}}) for imports inside the package."""
    mods = find_modules(root, package)
    edges: dict[tuple[str, str], dict] = defaultdict(dict)
    for name, (path, is_init) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        here = name if is_init else name.rpartition(".")[0]
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    targets.append(_deepest_known(alias.name, mods))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in mods else _deepest_known(base, mods))
            else:
                continue
            kind = _kind_of(node, parents)
            for target in targets:
                if target and target != name:
                    edges[(name, target)].setdefault(kind, node.lineno)
    return {n: i for n, (_, i) in mods.items()}, dict(edges)


def _deepest_known(dotted: str, mods) -> str | None:
    parts = dotted.split(".")
    while parts:
        if ".".join(parts) in mods:
            return ".".join(parts)
        parts.pop()
    return None


def apply_map(name: str, mapping: dict[str, str]) -> str:
    """A module's name after the moves (a moved package carries its modules along)."""
    best = max((old for old in mapping if name == old or name.startswith(old + ".")), key=len, default=None)
    return name if best is None else mapping[best] + name[len(best):]


def room_of(name: str, is_pkg: bool, package: str) -> str:
    rel = name[len(package):].lstrip(".").split(".") if name != package else []
    folder = rel if is_pkg else rel[:-1]
    if folder:
        return "/".join(folder) + "/"
    return (rel[-1] + ".py") if rel else "__init__.py"


def strongly_connected(nodes, graph) -> list[list[str]]:
    index, low, stack, on, groups = {}, {}, [], set(), []
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    group.append(member)
                    if member == node:
                        break
                groups.append(sorted(group))
    return groups


def _acyclic(nodes, edges) -> bool:
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    return all(len(g) == 1 for g in strongly_connected(nodes, graph))


def feedback_arcs(group: list[str], graph) -> list[tuple[str, str]]:
    """The fewest edges whose removal leaves the group without a cycle (exact up to 3 edges, else greedy)."""
    from itertools import combinations
    inside = sorted((a, b) for a in group for b in graph[a] if b in group)
    for size in range(1, min(3, len(inside)) + 1):
        for cut in combinations(inside, size):
            if _acyclic(group, set(inside) - set(cut)):
                return list(cut)
    # greedy (Eades-Lin-Smyth): order the nodes, the edges running backwards are the cut
    left, order_head, order_tail = set(group), [], []
    while left:
        outs = {n: sum(1 for b in graph[n] if b in left) for n in left}
        ins = {n: sum(1 for a in left if n in graph[a]) for n in left}
        sink = next((n for n in sorted(left) if outs[n] == 0), None)
        if sink:
            order_tail.insert(0, sink)
            left.discard(sink)
            continue
        source = next((n for n in sorted(left) if ins[n] == 0), None)
        pick = source or max(sorted(left), key=lambda n: outs[n] - ins[n])
        order_head.append(pick)
        left.discard(pick)
    pos = {n: i for i, n in enumerate(order_head + order_tail)}
    return [(a, b) for a, b in inside if pos[a] > pos[b]]


def drawing(root: Path, package: str, mapping: dict[str, str] | None = None, runtime: bool = False) -> dict:
    mods, edges = module_edges(root, package)
    mapping = mapping or {}
    rename = {m: apply_map(m, mapping) for m in mods}
    # a module becoming a package's __init__ (or a plain module becoming one) keeps its is-package flag
    is_pkg = {rename[m]: p for m, p in mods.items()}
    for new in list(is_pkg):  # new folders made by the moves
        parts = new.split(".")
        for n in range(1, len(parts)):
            is_pkg.setdefault(".".join(parts[:n]), True)
    room = {m: room_of(rename[m], mods[m], package) for m in mods}
    mod_graph = defaultdict(set)
    for (a, b), kinds in edges.items():
        if runtime and set(kinds) == {"type"}:
            continue
        mod_graph[a].add(b)
    circles = [g for g in strongly_connected(mods, mod_graph) if len(g) > 1]
    arrows: dict[tuple[str, str], list[tuple[str, str, int]]] = defaultdict(list)
    for (a, b), kinds in edges.items():
        if runtime and set(kinds) == {"type"}:
            continue
        if room[a] != room[b]:
            arrows[(room[a], room[b])].append((rename[a], rename[b], min(kinds.values())))
    rooms = sorted(set(room.values()))
    rgraph = defaultdict(set)
    for a, b in arrows:
        rgraph[a].add(b)
    knots = [g for g in strongly_connected(rooms, rgraph) if len(g) > 1]
    up = sorted(arc for g in knots for arc in feedback_arcs(g, rgraph))
    down = defaultdict(set)
    for a, b in arrows:
        if (a, b) not in up:
            down[a].add(b)
    floor: dict[str, int] = {}

    def height(r: str, seen=()) -> int:  # longest path to a room that imports nothing (floor 1)
        if r not in floor:
            floor[r] = 1 + max((height(b) for b in down[r]), default=0)
        return floor[r]

    sys.setrecursionlimit(10000)
    for r in rooms:
        height(r)
    # .py files directly in the package folder (its __init__.py and __main__.py included, as the review counts)
    root_modules = sorted(rename[m] for m in mods
                          if (rename[m].count(".") == 1 and not mods[m]) or rename[m] == package)
    return {
        "modules": len(mods), "root_modules": len(root_modules),
        "module_edges": sum(1 for (a, b), k in edges.items() if not (runtime and set(k) == {"type"})),
        "rooms": len(rooms), "floors": max(floor.values(), default=0), "arrows": len(arrows),
        "upward_arrows": [{"from": a, "to": b, "imports": arrows[(a, b)]} for a, b in up],
        "room_knots": knots, "circles": circles, "floor_of": floor,
        "arrows_list": {f"{a} -> {b}": v for (a, b), v in sorted(arrows.items())},
        "rename": rename,
    }


def stage_rule_breaks(d: dict, package: str, kit: str, stages: str) -> list[str]:
    """Imports against the stage layout, by module: kit -> stage, core -> stage, stage A -> B's insides."""
    kit_prefix, st_prefix = f"{package}.{kit}", f"{package}.{stages}"
    above = _above_stages(d, package, st_prefix)
    breaks = []
    for _key, imports in d["arrows_list"].items():
        for a, b, line in imports:
            if not (b == st_prefix or b.startswith(st_prefix + ".")):
                continue
            if a == kit_prefix or a.startswith(kit_prefix + "."):
                breaks.append(f"kit imports a stage: {a} -> {b} (line {line})")
            elif not a.startswith(st_prefix + "."):
                if a not in above:
                    breaks.append(f"core module imports a stage: {a} -> {b} (line {line})")
            else:
                sa, sb = _stage_of(a, st_prefix), _stage_of(b, st_prefix)
                if sa and sb and sa != sb and b != f"{st_prefix}.{sb}":
                    breaks.append(f"stage {sa} reaches into stage {sb}: {a} -> {b} (line {line})")
    return sorted(set(breaks))


def _stage_of(name: str, st_prefix: str) -> str | None:
    """stages.build.plan -> build; stages.build (the package) -> build; stages.registry -> None."""
    rest = name[len(st_prefix) + 1:].split(".")
    return None if rest == ["registry"] else rest[0]


def _above_stages(d: dict, package: str, st_prefix: str) -> set[str]:
    """Modules outside stages/ that nothing in stages/ (or below) reaches: the orchestration layers on top."""
    graph = defaultdict(set)
    for imports in d["arrows_list"].values():
        for a, b, _ in imports:
            graph[a].add(b)
    below = set()
    todo = [m for m in d["rename"].values() if m.startswith(st_prefix + ".") or m == st_prefix]
    while todo:
        m = todo.pop()
        for b in graph[m]:
            if b not in below:
                below.add(b)
                todo.append(b)
    return {m for m in d["rename"].values() if m not in below and not m.startswith(st_prefix)}


def suggestions(d: dict, package: str, stages: str) -> list[str]:
    """Root modules that only one stage imports (candidates to move into it): a line for the map, maybe."""
    st_prefix = f"{package}.{stages}"
    importers = defaultdict(set)
    for imports in d["arrows_list"].values():
        for a, b, _ in imports:
            importers[b].add(a)
    out = []
    for module in sorted(d["rename"].values()):
        if module.count(".") != 1 or module.endswith(("__main__", "__init__")):
            continue
        users = importers.get(module, set())
        owners = {_stage_of(u, st_prefix) if u.startswith(st_prefix + ".") else "(outside the stages)" for u in users}
        if len(owners) == 1 and None not in owners and "(outside the stages)" not in owners:
            out.append(f"{module} is imported only by the {owners.pop()} stage ({', '.join(sorted(users))})")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("."))
    ap.add_argument("--package", default="flagtree_cpu_build")
    ap.add_argument("--map", type=Path)
    ap.add_argument("--runtime", action="store_true", help="leave out imports under TYPE_CHECKING")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--why", action="store_true", help="the module imports behind each upward arrow")
    ap.add_argument("--rules", action="store_true", help="check the stage layout too")
    ap.add_argument("--kit", default="stagekit")
    ap.add_argument("--stages", default="stages")
    ap.add_argument("--suggest", action="store_true", help="root modules only one stage imports")
    ap.add_argument("--floors", action="store_true", help="list the rooms floor by floor")
    args = ap.parse_args(argv)
    mapping = read_map(args.map) if args.map else None
    d = drawing(args.root, args.package, mapping, args.runtime)
    breaks = stage_rule_breaks(d, args.package, args.kit, args.stages) if args.rules else []
    summary = {k: d[k] for k in ("modules", "root_modules", "module_edges", "rooms", "floors", "arrows")}
    summary["upward_arrows"] = len(d["upward_arrows"])
    summary["room_knots"] = len(d["room_knots"])
    summary["circles"] = len(d["circles"])
    if args.json:
        print(json.dumps({**summary, "upward": d["upward_arrows"], "circles_list": d["circles"],
                          "rule_breaks": breaks}, indent=1))
    else:
        print(f"{summary['modules']} modules, {summary['root_modules']} at the package root, "
              f"{summary['module_edges']} module edges")
        print(f"{summary['rooms']} rooms on {summary['floors']} floors, {summary['arrows']} arrows, "
              f"{summary['upward_arrows']} upward, {summary['circles']} circles (module cycles)")
        for arc in d["upward_arrows"]:
            print(f"  up: {arc['from']} -> {arc['to']}")
            if args.why:
                for a, b, line in arc["imports"]:
                    print(f"      {a} -> {b} (line {line})")
        for c in d["circles"]:
            print("  circle: " + " -> ".join(c))
        if args.floors:
            by = defaultdict(list)
            for r, f in d["floor_of"].items():
                by[f].append(r)
            for f in sorted(by, reverse=True):
                print(f"  floor {f}: {' '.join(sorted(by[f]))}")
        for b in breaks:
            print("  rule: " + b)
        for line in suggestions(d, args.package, args.stages) if args.suggest else []:
            print("  suggest: " + line)
    return 1 if (d["upward_arrows"] or d["circles"] or breaks) else 0


if __name__ == "__main__":
    sys.exit(main())
