"""Per-length task arguments (suite `args_at`) on the board: LEADERBOARD.md and the site name them under the task
table and on the model page; the same runs without them give the same board minus exactly those lines.

The runs are real (`longctx-eval run --suite`: two oracles on synthetic retrieval at 2K and 8K, one with
args_at); the copy without per-length arguments is the same run folder with `length_args` null in its run.json.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from longctx_eval.cli import main
from longctx_eval.leaderboard.build import update_leaderboard

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BASE = 'lengths = [2048, 8192], args = { topics = 3, source = "synthetic" }'
SUITE = (
    f"[oracle]\nretrieval = {{ {BASE}, args_at = {{ 8192 = {{ docs_per_length = 2 }} }} }}\n"
    f'["oracle?name=plain"]\nretrieval = {{ {BASE} }}\n'
)
SENTENCE = (
    "Arguments by length (the suite's `args_at` over the task's `args`): "
    "**oracle**: source=synthetic, topics=3; at 8K: docs_per_length=2."
)
HTML_SENTENCE = (
    "<p>Arguments by length (the suite&#x27;s <code>args_at</code> over the task&#x27;s <code>args</code>): "
    "<strong>oracle</strong>: source=synthetic, topics=3; at 8K: docs_per_length=2.</p>\n"
)
ROW = '<tr><th scope="row">args by length</th><td>at 8K: docs_per_length=2</td></tr>'


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two boards with sites: `with` from the runs as they ran, `without` from a copy lacking length_args."""
    tmp = tmp_path_factory.mktemp("length_args")
    suite = tmp / "mine.toml"
    suite.write_text(SUITE)
    assert main(["run", "--suite", str(suite), "--out", str(tmp / "with")]) == 0
    shutil.copytree(tmp / "with", tmp / "without")
    path = tmp / "without" / "oracle" / "run.json"
    run = json.loads(path.read_text())
    assert [t["length_args"] for t in run["tasks"]] == [{"8192": {"docs_per_length": 2}}]
    for task in run["tasks"]:
        task["length_args"] = None
    path.write_text(json.dumps(run))
    for name in ("with", "without"):
        update_leaderboard([tmp / name], tmp / f"board-{name}", now=NOW, site=tmp / f"site-{name}")
    return tmp


def test_the_board_and_the_site_show_per_length_arguments(boards: Path) -> None:
    """Under the retrieval table, the model that ran with args_at, its args and its 8K override ("8K" as
    the tables label 8192); the model page's facts carry them too; the other oracle (no args_at) is not named."""
    markdown = (boards / "board-with" / "LEADERBOARD.md").read_text()
    assert markdown.count(SENTENCE) == 1 and "**plain**: source" not in markdown
    task = (boards / "site-with" / "task-retrieval.html").read_text()
    assert task.count(HTML_SENTENCE) == 1
    assert (boards / "site-with" / "model-oracle.html").read_text().count(ROW) == 1
    assert "args by length" not in (boards / "site-with" / "model-plain.html").read_text()


def test_without_per_length_arguments_nothing_else_changes(boards: Path) -> None:
    """The board of the runs without length_args is the board with them minus the sentence and the row, byte for
    byte, in LEADERBOARD.md and in every HTML page."""
    with_md = (boards / "board-with" / "LEADERBOARD.md").read_text()
    without_md = (boards / "board-without" / "LEADERBOARD.md").read_text()
    assert "Arguments by length" not in without_md
    assert with_md.replace(f"\n{SENTENCE}\n", "", 1) == without_md
    pages = sorted(p.name for p in (boards / "site-with").glob("*.html"))
    assert pages == sorted(p.name for p in (boards / "site-without").glob("*.html")) and "task-retrieval.html" in pages
    for name in pages:
        with_html = (boards / "site-with" / name).read_text().replace(HTML_SENTENCE, "").replace(ROW, "")
        without_html = (boards / "site-without" / name).read_text()
        assert "args by length" not in without_html and "Arguments by length" not in without_html, name
        assert with_html == without_html, name
