"""benchmarks/ imports in no circle and reaches the core only through public names (tools/import_graph.py's scan)."""

from __future__ import annotations

import ast

from import_graph_tool import import_graph as _graph  # tests/ is on sys.path

from tests.conftest import REPO


def test_benchmarks_import_in_no_circle() -> None:
    g = _graph()
    files, edges = g.scan(REPO, ("benchmarks",))
    assert len(files) > 20 and edges  # the package was scanned
    circles = [sorted(c) for c in g.components(files, edges) if len(c) > 1]
    assert circles == [], f"benchmarks/ modules importing in a circle: {circles}"


CORE = {"longctx_eval", "data_builders"}


def test_benchmarks_import_no_private_name_of_the_core() -> None:
    private = []
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            core = isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in CORE
            if core:
                private += [f"{path.name}:{node.lineno} {node.module}.{a.name}" for a in node.names if a.name[0] == "_"]
    assert private == [], f"benchmarks/ imports private names of the core: {private}"
