"""Every retrieval metric a run computed is on the board and the site: one table, the same columns in both."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.leaderboard.markdown_escape import md_plain
from longctx_eval.leaderboard.retrieval_table import column_title, metric_order
from longctx_eval.results import MetricResult
from longctx_eval.scoring.labels import format_cell

RUN = ["--tasks", "retrieval", "--lengths", "2048,8192", "--seed", "3"]
RUN += ["--task-arg", "retrieval.topics=3", "--task-arg", "retrieval.source=synthetic"]
TITLE = "Every retrieval metric"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real bm25 run on retrieval (2K, 8K: 9 queries each) laid out as LEADERBOARD.md and a site."""
    from longctx_eval.cli import main

    tmp = tmp_path_factory.mktemp("retrieval-table")
    assert main(["run", "--model", "bm25", *RUN, "--out", str(tmp / "runs")]) == 0
    update_leaderboard([tmp / "runs"], tmp / "board", site=tmp / "site")
    return tmp


def _markdown_table(text: str) -> list[list[str]]:
    lines = text.split(TITLE, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([md_plain(c.strip()) for c in line.strip().strip("|").split("|")])
    return [rows[0], *rows[2:]]


def _html_table(text: str) -> list[list[str]]:
    table = text.split(TITLE, 1)[1].split("<table", 1)[1].split("</table>", 1)[0]
    head = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    body = table.split("<tbody>", 1)[1]
    rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in body.split("<tr")[1:]]
    return [head, *rows]


def test_board_and_site_show_every_retrieval_metric_with_n_and_interval(board: Path) -> None:
    import html

    run = json.loads((board / "runs" / "bm25" / "run.json").read_text())
    task = next(t for t in run["tasks"] if t["name"] == "retrieval")
    computed = sorted({r["metric"] for r in task["results"] if metric_order(r["metric"])}, key=metric_order)
    assert {"mrr", "ndcg@10", "recall@1", "recall@100"} <= set(computed)

    md = _markdown_table((board / "board" / "LEADERBOARD.md").read_text())
    page = _html_table((board / "site" / "task-retrieval.html").read_text())
    page = [[html.unescape(c) for c in row] for row in page]
    assert md[0] == page[0] == ["model", "L", *(column_title(m) for m in computed)]
    assert md[0][2:4] == ["MRR", "nDCG@10"]
    assert md[1:] == page[1:]  # the same cells, row for row

    rows = {(r["metric"], r["length"]): r for r in task["results"] if r["depth"] is None}
    by_length = {row[1]: row for row in md[1:]}
    assert list(by_length) == ["2K", "8K", "all"]
    for label, length in (("2K", 2048), ("8K", 8192), ("all", None)):
        for metric, cell in zip(computed, by_length[label][2:], strict=True):
            expected = format_cell(MetricResult.model_validate(rows[(metric, length)]))
            assert cell == expected + " (low n)"  # 9 or 18 queries: fewer than the board's 30
            assert f"n={rows[(metric, length)]['n']}" in cell
