"""The import graph of the packages, by a static count: modules, edges, cycles and edges running back up.

Every .py file is parsed, nothing is imported. An edge is one importing module -> one imported module of the
scanned packages (`import a.b`, `from a import b` where a.b is a module, imports inside functions too, and
`importlib.import_module("a.b")` string literals), counted once per pair. A *room* is a folder: a module's
room is the package it sits in, and a package's `__init__.py` (its facade) is a room of its own. A *cycle* is
a strongly connected set of two or more modules; an edge *runs back up* when it joins two rooms that reach
each other (directly or around a circle of rooms), so zero means the folders form one order that every
import follows.

Usage: python tools/import_graph.py [--json] [ROOT]   (ROOT defaults to the repository holding this file)
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

PACKAGES = ("longctx_eval", "data_builders")
IMPORT_CALLS = {"import_module", "__import__"}


@dataclass(frozen=True)
class GraphCounts:
    """The numbers the closing note of a restructuring reports."""

    rooms: int
    modules: int
    lines: int
    edges: int
    cycles: int
    modules_in_cycles: int
    room_cycles: int
    back_edges: int


def module_name(path: Path, root: Path) -> str:
    """The dotted name of a file under root (a package's __init__.py is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str, level: int, name: str, is_package: bool) -> str:
    """The absolute module of `from <level dots><module>` written in `name` ("" when it climbs too high)."""
    if level == 0:
        return module
    base = name.split(".") if is_package else name.split(".")[:-1]
    if level - 1 >= len(base):
        return ""
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _written_imports(tree: ast.AST, name: str, is_package: bool) -> Iterable[tuple[str, tuple[str, ...]]]:
    """(module, names imported from it) for every import-like statement or call in a parsed file."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, name, is_package)
            yield base, tuple(a.name for a in node.names)
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            first = node.args[0]
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            if fn in IMPORT_CALLS and literal and not first.value.startswith("."):
                yield first.value, ()


def scan(root: Path, packages: tuple[str, ...] = PACKAGES) -> tuple[dict[str, Path], set[tuple[str, str]]]:
    """The modules of the packages under root (name -> file) and their import edges (importer, imported)."""
    files: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files[module_name(path, root)] = path
    edges: set[tuple[str, str]] = set()
    for name, path in files.items():
        tree = ast.parse(path.read_bytes(), filename=str(path))
        for target, names in _written_imports(tree, name, path.name == "__init__.py"):
            hits = [f"{target}.{n}" for n in names if f"{target}.{n}" in files]
            if target in files and (not names or len(hits) < len(names)):
                hits.append(target)
            edges.update((name, hit) for hit in hits if hit != name)
    return files, edges


def room_of(module: str, files: dict[str, Path]) -> str:
    """The folder a module sits in; a package's facade (__init__.py) is its own room."""
    if files[module].name == "__init__.py":
        return module + "/__init__"
    return module.rpartition(".")[0] or module


def components(nodes: Iterable[str], edges: set[tuple[str, str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan's algorithm, iterative)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for start in succ:
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = set()
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.add(top)
                        if top == node:
                            break
                    out.append(comp)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(succ[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def back_edges(files: dict[str, Path], edges: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """Module edges joining two different rooms that reach each other (they close a circle of folders)."""
    rooms = {m: room_of(m, files) for m in files}
    room_edges = {(rooms[a], rooms[b]) for a, b in edges if rooms[a] != rooms[b]}
    comp_of = {r: i for i, comp in enumerate(components(set(rooms.values()), room_edges)) for r in comp}
    return sorted((a, b) for a, b in edges if rooms[a] != rooms[b] and comp_of[rooms[a]] == comp_of[rooms[b]])


def count(root: Path, packages: tuple[str, ...] = PACKAGES) -> GraphCounts:
    """All the counts of the graph under root."""
    files, edges = scan(root, packages)
    cycles = [c for c in components(files, edges) if len(c) > 1]
    rooms = {room_of(m, files) for m in files}
    room_edges = {(room_of(a, files), room_of(b, files)) for a, b in edges}
    room_cycles = [c for c in components(rooms, {e for e in room_edges if e[0] != e[1]}) if len(c) > 1]
    return GraphCounts(
        rooms=len({r for r in rooms if not r.endswith("/__init__")}),
        modules=len(files),
        lines=sum(len(p.read_bytes().splitlines()) for p in files.values()),
        edges=len(edges),
        cycles=len(cycles),
        modules_in_cycles=sum(len(c) for c in cycles),
        room_cycles=len(room_cycles),
        back_edges=len(back_edges(files, edges)),
    )


def main(argv: list[str] | None = None) -> int:
    """Print the counts per package and for all of them together."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parser.add_argument("--back-edges", action="store_true", help="list the edges running back up")
    args = parser.parse_args(argv)
    groups = {p: (p,) for p in PACKAGES} | {"all": PACKAGES}
    counts = {label: count(args.root, pkgs) for label, pkgs in groups.items()}
    if args.json:
        print(json.dumps({k: asdict(v) for k, v in counts.items()}, indent=1))
    else:
        fields = list(asdict(counts["all"]))
        print("| package | " + " | ".join(fields) + " |")
        print("|---" * (len(fields) + 1) + "|")
        for label, c in counts.items():
            print(f"| {label} | " + " | ".join(str(v) for v in asdict(c).values()) + " |")
    if args.back_edges:
        files, edges = scan(args.root)
        for a, b in back_edges(files, edges):
            print(f"{a} -> {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
