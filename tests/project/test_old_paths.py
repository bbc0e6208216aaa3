"""Module paths that moved in 0.2 keep importing one release (longctx_eval/old_paths.py), with a warning."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TABLES = ("longctx_eval/old_paths.py", "data_builders/old_paths.py")


def _table(rel: str) -> dict[str, str]:
    tree = ast.parse((REPO / rel).read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "MOVED")
    return ast.literal_eval(node.value)


def _file(module: str) -> Path | None:
    base = REPO / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@pytest.mark.parametrize("rel", TABLES)
def test_every_old_name_is_gone_and_every_new_name_is_a_module(rel):
    table = _table(rel)
    assert table, f"{rel} lists no moved module"
    assert not [old for old in table if _file(old) is not None], "an old name still has its file"
    assert not [new for new in table.values() if _file(new) is None], "a new name has no file"
    assert not set(table) & set(table.values()), "a new name is itself an old one"


def test_an_old_path_imports_the_new_module_with_a_deprecation_warning():
    from longctx_eval.run_folder import naming
    from longctx_eval.run_folder.predictions import PredictionStore

    with pytest.warns(DeprecationWarning, match=r"longctx_eval.run_dir moved to longctx_eval.run_folder.naming"):
        old = importlib.import_module("longctx_eval.run_dir")
    assert old is naming
    with pytest.warns(DeprecationWarning, match=r"data_builders.needle_grid moved to data_builders.needle.grid"):
        from data_builders.needle_grid import needle_cells  # noqa: F401
    with pytest.warns(DeprecationWarning, match="longctx_eval.predictions moved"):
        from longctx_eval.predictions import PredictionStore as Old
    assert Old is PredictionStore


def test_an_old_module_that_is_now_a_package_forwards_its_names():
    from longctx_eval.scoring.score import score_run_dir

    with pytest.warns(DeprecationWarning, match=r"longctx_eval.scoring.score_run_dir moved to"):
        from longctx_eval.scoring import score_run_dir as old
    assert old is score_run_dir
    with pytest.raises(ImportError):
        from longctx_eval.scoring import no_such_name  # noqa: F401


def test_python_dash_m_runs_an_old_module_path():
    run = subprocess.run(
        [sys.executable, "-m", "data_builders.fetch_prose", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--offline" in run.stdout
