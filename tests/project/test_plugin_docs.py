"""docs/plugins.md's worked examples are real: copied from docs/examples/, discovered, validated and run.

The code blocks in the document must equal the files under docs/examples/ byte for byte (each block is
preceded by `<!-- example: docs/examples/NAME.py -->`), so the document and the tested code cannot drift.
Everything goes through the command line, as a task author would use it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "plugins.md"
EXAMPLES = REPO / "docs" / "examples"
BLOCK = re.compile(r"<!-- example: (docs/examples/[\w.]+) -->\n```python\n(.*?)```", re.S)
CLI = "import sys; from longctx_eval.cli import main; sys.exit(main(sys.argv[1:]))"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`longctx-eval ARGS` in a fresh interpreter, offline."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", CLI, *args], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )


def _ok(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run.stdout + run.stderr  # progress and reports go to stderr


def _pooled(run_file: Path, task: str) -> dict[str, float]:
    """The pooled (all lengths, all depths) value of every metric of `task`, in the order the run lists them."""
    run = json.loads(run_file.read_text())
    result = next(t for t in run["tasks"] if t["name"] == task)
    return {r["metric"]: r["value"] for r in result["results"] if r["length"] is None and r["depth"] is None}


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> Path:
    """A user's plugin folder: the example files copied as they are, helpers included."""
    folder = tmp_path_factory.mktemp("my_tasks")
    for path in EXAMPLES.glob("*.py"):
        shutil.copy(path, folder / path.name)
    return folder


def test_the_document_shows_every_example_file_verbatim():
    blocks = BLOCK.findall(DOC.read_text())
    shown = {name: code for name, code in blocks}
    assert len(shown) == len(blocks), "an example file is shown twice"
    files = {f"docs/examples/{p.name}": p.read_text() for p in EXAMPLES.glob("*.py")}
    assert set(shown) == set(files), f"shown: {sorted(shown)}; files: {sorted(files)}"
    for name, code in shown.items():
        assert code == files[name], f"the block for {name} in docs/plugins.md differs from the file"


def test_the_examples_are_listed(plugins):
    out = _ok(cli("tasks", "--include-path", str(plugins)))
    assert "kv_lookup" in out and "two_needles" in out


@pytest.mark.parametrize("name", ["kv_lookup", "two_needles"])
def test_validate_task_passes(plugins, name):
    out = _ok(cli("validate-task", name, "--include-path", str(plugins)))
    assert "oracle scores 100%" in out


def test_the_oracle_scores_one_on_both_examples(plugins, tmp_path):
    _ok(
        cli(
            "run",
            "--model",
            "oracle",
            "--tasks",
            "kv_lookup,two_needles",
            "--include-path",
            str(plugins),
            "--out",
            str(tmp_path),
        )
    )
    run_file = tmp_path / "oracle" / "run.json"
    assert run_file.is_file()
    kv, two = _pooled(run_file, "kv_lookup"), _pooled(run_file, "two_needles")
    assert next(iter(kv.items())) == ("score", 1.0)  # the first metric is the primary one
    assert next(iter(two.items())) == ("both", 1.0)
    assert two["needle_recall"] == 1.0 and two["empty_rate"] == 0.0


def test_a_retriever_runs_the_retrieval_example(plugins, tmp_path):
    args = ["--tasks", "two_needles", "--lengths", "512", "--include-path", str(plugins), "--out", str(tmp_path)]
    _ok(cli("run", "--model", "bm25", *args))
    run_file = tmp_path / "bm25" / "run.json"
    run = json.loads(run_file.read_text())
    (result,) = [t for t in run["tasks"] if t["name"] == "two_needles"]
    assert result["capability"] == "retrieve"
    pooled = _pooled(run_file, "two_needles")
    assert "both" in pooled and "needle_recall" in pooled  # the primary metric comes from hits too
    assert "empty_rate" not in pooled  # only generated answers carry `empty`
    assert not result.get("warnings")


def test_a_task_argument_reaches_the_factory(plugins, tmp_path):
    args = ["--tasks", "two_needles", "--lengths", "512", "--include-path", str(plugins), "--out", str(tmp_path)]
    _ok(cli("run", "--model", "oracle", *args, "--task-arg", "two_needles.per_length=1"))
    run = json.loads((tmp_path / "oracle" / "run.json").read_text())
    (result,) = [t for t in run["tasks"] if t["name"] == "two_needles"]
    assert result["n_samples"] == 1 and result["args"] == {"per_length": 1}
