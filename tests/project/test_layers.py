"""The package layers form one chain and no import runs back up: longctx_eval <- data_builders <- tasks.

Every .py file of the three layers is parsed (nothing is imported): `import` statements at any depth (inside
functions too), `importlib.import_module("...")` / `__import__("...")` string literals, and the lazy module
strings of the one Registry (`Registry(modules=(...))`, `.register(name, "module:attr")`) count as imports.
Rules: longctx_eval imports neither data_builders nor tasks; data_builders does not import tasks; nothing
imports a top-level `tasks` package (a plugin imports its private helpers relatively: `from ._coref import X`);
and the model-spec parser (longctx_eval/models/spec.py) is a leaf that reaches no adapter module. Inside the
packages the folders form one order too (tools/import_graph.py): no module cycle, and no import runs back up
between folders, except the one circle listed in KNOWN_FOLDER_CIRCLES.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("longctx_eval", "data_builders", "tasks")  # each may import only itself and the layers before it
ADAPTERS = tuple(
    f"longctx_eval.models.{name}"
    for name in (
        "hf.adapter",
        "retrieval.dense",
        "retrieval.bm25",
        "retrieval.hybrid",
        "rag.adapter",
        "coref_baseline",
        "posprobe.forward",
        "openai.adapter",
        "openai.client",
    )
)
SPEC = "longctx_eval.models.spec"
KNOWN_FOLDER_CIRCLES = [
    # task.py declares metrics with metrics/aggregate, contrast and curves; metrics/coref and retrieval raise the
    # core's errors and read its Sample records. Moving the three declarations to the top would close it.
    {"longctx_eval", "longctx_eval.metrics"},
]
IMPORT_CALLS = {"import_module", "__import__"}


@dataclass(frozen=True)
class Edge:
    """One import found in a file: the absolute module it names and how it was written."""

    path: Path
    line: int
    target: str  # absolute dotted module name ("" when a relative import climbs above its top-level package)
    relative: bool
    toplevel: bool  # at module level (runs on import), not inside a function
    how: str  # "import", "import_module" or "registry"
    names: tuple[str, ...] = ()  # `from target import a, b`: a and b may be modules too

    def modules(self) -> list[str]:
        """The target and, for `from target import a`, target.a (which may be a submodule)."""
        return [self.target, *(f"{self.target}.{n}" for n in self.names if n != "*")]

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"


def _import_graph():
    """tools/import_graph.py (not a package): its module naming and relative-import resolution, one home for both."""
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "tools" / "import_graph.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


_GRAPH = _import_graph()
module_name = _GRAPH.module_name
_resolve = _GRAPH._absolute


def _string_target(text: str, name: str, is_package: bool, package: str | None) -> tuple[str, bool]:
    """A module named by a string ("pkg.mod", "pkg.mod:attr" or ".mod"): (absolute name, was relative)."""
    module = text.partition(":")[0]
    if not module.startswith("."):
        return module, False
    level = len(module) - len(module.lstrip("."))
    if package is not None:
        return _resolve(module.lstrip("."), level, package, True), True
    return _resolve(module.lstrip("."), level, name, is_package), True


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _registry_strings(call: ast.Call, fn: str) -> Iterator[ast.Constant]:
    """Module strings a Registry would import: `modules=(...)`, and `register(name, "module:attr")`."""
    if fn == "Registry":
        for kw in call.keywords:
            if kw.arg == "modules" and isinstance(kw.value, ast.Tuple | ast.List):
                yield from (e for e in kw.value.elts if _str(e) is not None)  # type: ignore[misc]
    elif fn == "register" and len(call.args) >= 2 and (text := _str(call.args[1])) and ":" in text:
        yield call.args[1]  # type: ignore[misc]


class _Finder(ast.NodeVisitor):
    """Collects every import-like edge of one module, noting whether it sits inside a function."""

    def __init__(self, path: Path, name: str, is_package: bool) -> None:
        self.path, self.name, self.is_package = path, name, is_package
        self.depth = 0
        self.edges: list[Edge] = []

    def _add(self, line: int, target: str, relative: bool, how: str, names: tuple[str, ...] = ()) -> None:
        self.edges.append(Edge(self.path, line, target, relative, self.depth == 0, how, names))

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node.lineno, alias.name, False, "import")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _resolve(node.module or "", node.level, self.name, self.is_package)
        self._add(node.lineno, base, node.level > 0, "import", tuple(a.name for a in node.names))

    def visit_Call(self, node: ast.Call) -> None:
        fn = _call_name(node.func)
        if fn in IMPORT_CALLS and node.args and (text := _str(node.args[0])) is not None:
            package = next((_str(kw.value) for kw in node.keywords if kw.arg == "package"), None)
            if package is None and len(node.args) > 1:
                package = _str(node.args[1])
            target, relative = _string_target(text, self.name, self.is_package, package)
            self._add(node.lineno, target, relative, "import_module")
        for const in _registry_strings(node, fn):
            target, relative = _string_target(const.value, self.name, self.is_package, None)
            self._add(const.lineno, target, relative, "registry")
        self.generic_visit(node)


def scan(root: Path, layers: tuple[str, ...] = LAYERS) -> list[Edge]:
    """Every import-like edge of every .py file under root/<layer> for each layer."""
    edges: list[Edge] = []
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            tree = ast.parse(path.read_bytes(), filename=str(path))
            finder = _Finder(path, module_name(path, root), path.name == "__init__.py")
            finder.visit(tree)
            edges += finder.edges
    return edges


def _layer_of(path: Path, root: Path) -> str:
    return path.relative_to(root).parts[0]


def back_edges(edges: list[Edge], root: Path) -> list[str]:
    """Imports that run from a layer to a later one (or climb above their top-level package)."""
    bad = []
    for e in edges:
        mine = LAYERS.index(_layer_of(e.path, root))
        if not e.target:
            bad.append(f"{e.where(root)}: relative import climbs above its top-level package")
            continue
        top = e.target.split(".")[0]
        if top in LAYERS and LAYERS.index(top) > mine:
            bad.append(f"{e.where(root)}: {e.target} ({e.how}): {LAYERS[mine]} may not import {top}")
    return bad


def toplevel_tasks_imports(edges: list[Edge], root: Path) -> list[str]:
    """Absolute imports of a package called `tasks` (the distribution installs none)."""
    return [
        f"{e.where(root)}: {e.how} of the top-level package {e.target!r}; import a plugin helper relatively "
        f"(from .{e.target.split('.')[-1]} import ...)"
        for e in edges
        if not e.relative and e.target.split(".")[0] == "tasks"
    ]


def _show(bad: list[str]) -> str:
    print("\n".join(bad))
    return f"{len(bad)} import(s) break the layer rule:\n" + "\n".join(bad)


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return scan(REPO)


def test_the_scan_sees_the_packages(edges):
    files = {e.path for e in edges}
    for layer in LAYERS:
        assert any(_layer_of(p, REPO) == layer for p in files), f"no imports found under {layer}/"
    assert any(e.target.startswith("longctx_eval") for e in edges if _layer_of(e.path, REPO) == "data_builders")


def test_core_imports_no_later_layer(edges):
    bad = [b for b in back_edges(edges, REPO) if b.startswith("longctx_eval/")]
    assert not bad, _show(bad)


def test_data_builders_import_no_tasks(edges):
    bad = [b for b in back_edges(edges, REPO) if b.startswith("data_builders/")]
    assert not bad, _show(bad)


def test_plugins_stay_inside_their_folder(edges):
    bad = [b for b in back_edges(edges, REPO) if b.startswith("tasks/")]
    assert not bad, _show(bad)


def test_nothing_imports_a_top_level_tasks_package(edges):
    bad = toplevel_tasks_imports(edges, REPO)
    assert not bad, _show(bad)


def _spec_reach(edges: list[Edge]) -> dict[str, list[str]]:
    """Modules the spec parser reaches: all its own imports, then module-level imports of longctx_eval modules,
    each with the chain that reaches it (parent packages run their __init__ too)."""
    by_module: dict[str, list[Edge]] = {}
    for e in edges:
        by_module.setdefault(module_name(e.path, REPO), []).append(e)
    chains: dict[str, list[str]] = {SPEC: [SPEC]}
    todo = [SPEC]
    while todo:
        current = todo.pop()
        names = [current.rsplit(".", i)[0] for i in range(current.count(".") + 1)]  # itself and its parents
        for name in names:
            for e in by_module.get(name, []):
                if e.how == "registry" or not e.target.startswith("longctx_eval"):
                    continue
                if not (e.toplevel or name == SPEC):  # a function's import runs only when it is called
                    continue
                for target in e.modules():
                    if target in by_module and target not in chains:
                        chains[target] = [*chains[current], f"{target} ({e.where(REPO)})"]
                        todo.append(target)
    return chains


def test_spec_parser_imports_no_adapter(edges):
    reach = _spec_reach(edges)
    bad = [" -> ".join(chain) for module, chain in sorted(reach.items()) if module in ADAPTERS]
    direct = [
        f"{e.where(REPO)}: {e.how}s {e.target}"
        for e in edges
        if module_name(e.path, REPO) == SPEC
        and any(m == a or m.startswith(a + ".") for m in e.modules() for a in ADAPTERS)
    ]
    assert not bad and not direct, _show(direct + bad)


def test_parsing_a_spec_loads_no_adapter_and_no_torch():
    code = (
        "import sys\n"
        "from longctx_eval.models.spec import parse_spec\n"
        "for raw in ('bm25', 'oracle', 'bm25?name=x', 'openai:m@http://127.0.0.1:9/v1?max_in_flight=4'):\n"
        "    parse_spec(raw)\n"
        f"print(sorted(m for m in sys.modules if m in {ADAPTERS!r} or m.partition('.')[0] in ('torch', 'openai')))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]", f"parsing specs loaded {run.stdout.strip()}"


def _import_graph():
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", REPO / "tools" / "import_graph.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


def test_no_module_cycle_and_no_import_back_up_between_folders():
    graph = _import_graph()
    files, edges = graph.scan(REPO)
    cycles = [sorted(c) for c in graph.components(files, edges) if len(c) > 1]
    assert not cycles, f"module cycles: {cycles}"
    rooms = {m: graph.room_of(m, files) for m in files}
    room_edges = {(rooms[a], rooms[b]) for a, b in edges if rooms[a] != rooms[b]}
    circles = [c for c in graph.components(set(rooms.values()), room_edges) if len(c) > 1]
    new = [sorted(c) for c in circles if c not in KNOWN_FOLDER_CIRCLES]
    back = [f"{a} -> {b}" for a, b in graph.back_edges(files, edges) if any(rooms[a] in c for c in map(set, new))]
    assert not new, "folders importing each other (directly or around a circle):\n" + "\n".join(back)


# --- the checker itself, on a small made-up tree --------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_every_kind_of_back_edge(tmp_path):
    _tree(
        tmp_path,
        {
            "longctx_eval/__init__.py": "",
            "longctx_eval/a.py": "def f():\n    from data_builders import x\n",
            "longctx_eval/b.py": "import importlib\nimportlib.import_module('tasks.needle')\n",
            "longctx_eval/c.py": "R = Registry('k', modules=('data_builders.dataset.registry',))\n"
            "R.register('n', 'tasks.x:f')\n",
            "longctx_eval/d.py": "from . import e\nfrom .models import spec\nimport numpy\n",
            "data_builders/__init__.py": "from longctx_eval import a\n",
            "data_builders/m.py": "from tasks._coref import Kit\n",
            "tasks/needle.py": "from ._coref import Kit\nfrom data_builders import assemble\nfrom ... import up\n",
        },
    )
    found = scan(tmp_path)
    back = back_edges(found, tmp_path)
    assert back == [
        "longctx_eval/a.py:2: data_builders (import): longctx_eval may not import data_builders",
        "longctx_eval/b.py:2: tasks.needle (import_module): longctx_eval may not import tasks",
        "longctx_eval/c.py:1: data_builders.dataset.registry (registry): longctx_eval may not import data_builders",
        "longctx_eval/c.py:2: tasks.x (registry): longctx_eval may not import tasks",
        "data_builders/m.py:1: tasks._coref (import): data_builders may not import tasks",
        "tasks/needle.py:3: relative import climbs above its top-level package",
    ]
    tops = toplevel_tasks_imports(found, tmp_path)
    assert [t.split(":")[0] + ":" + t.split(":")[1] for t in tops] == [
        "longctx_eval/b.py:2",
        "longctx_eval/c.py:2",
        "data_builders/m.py:1",
    ]
    relative = [e for e in found if e.path.name == "needle.py" and e.relative and e.target]
    assert [e.target for e in relative] == ["tasks._coref"]
    assert {m for e in found if e.path.name == "d.py" for m in e.modules()} == {
        "longctx_eval",
        "longctx_eval.e",
        "longctx_eval.models",
        "longctx_eval.models.spec",
        "numpy",
    }


OPTIONAL_IMPORTS = ("vllm", "lm_eval", "inspect_ai", "llama_cpp", "flash_attn", "selenium")
"""Top-level packages of extras the product imports lazily: where one is not installed, a test folder of that name
would be found instead (pytest puts test folders on sys.path: prepend mode, no __init__.py)."""


def test_no_test_folder_shadows_an_optional_package() -> None:
    """`tests/models/vllm/` made `import vllm` find an empty namespace package where vLLM is not installed, so the
    missing-extra test skipped; the folder is `vllm_kind/`. (Names of installed dependencies, such as `openai`,
    cannot be shadowed: a regular package wins over a namespace folder.)"""
    folders = {p.name for p in (REPO / "tests").rglob("*") if p.is_dir()}
    assert not folders & set(OPTIONAL_IMPORTS)
