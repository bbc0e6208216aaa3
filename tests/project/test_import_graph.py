"""tools/import_graph.py counts modules, edges, cycles and edges running back up as its docstring says."""

from __future__ import annotations

from pathlib import Path

from import_graph_tool import import_graph as _graph  # tests/ is on sys.path

REPO = Path(__file__).resolve().parents[2]


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_counts_on_a_made_up_tree(tmp_path):
    g = _graph()
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.core import A\n",
            "pkg/core.py": "import json\nfrom pkg import other\n",
            "pkg/other.py": "def f():\n    from pkg.core import A\n",  # core <-> other: one cycle, one room
            "pkg/run/__init__.py": "",
            "pkg/run/go.py": "import importlib\nfrom pkg.core import A\nimportlib.import_module('pkg.sub.x')\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/x.py": "from pkg.run import go\n",  # run <-> sub: two edges run back up
        },
    )
    files, edges = g.scan(tmp_path, ("pkg",))
    assert edges == {
        ("pkg", "pkg.core"),
        ("pkg.core", "pkg.other"),
        ("pkg.other", "pkg.core"),
        ("pkg.run.go", "pkg.core"),
        ("pkg.run.go", "pkg.sub.x"),
        ("pkg.sub.x", "pkg.run.go"),
    }
    assert g.back_edges(files, edges) == [("pkg.run.go", "pkg.sub.x"), ("pkg.sub.x", "pkg.run.go")]
    c = g.count(tmp_path, ("pkg",))
    assert (c.modules, c.edges, c.cycles, c.modules_in_cycles, c.rooms, c.room_cycles, c.back_edges) == (
        7,
        6,
        2,
        4,
        3,
        1,
        2,
    )


def test_it_runs_on_this_repository(capsys):
    assert _graph().main([str(REPO)]) == 0
    out = capsys.readouterr().out
    assert "| longctx_eval |" in out and "| data_builders |" in out
