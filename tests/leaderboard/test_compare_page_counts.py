"""The site's comparison page says what `longctx-eval compare` says: pairs, refused and unpaired ids, the test
each length used, and no interval from fewer than MIN_N_FOR_INTERVAL pairs."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.leaderboard.comparison_page import pair_interval
from longctx_eval.metrics.bootstrap import MIN_N_FOR_INTERVAL
from longctx_eval.scoring.comparison import compare_runs
from longctx_eval.scoring.paired_scores import REFUSED_CONTEXT, PairedDifference
from longctx_eval.scoring.paired_tests import TESTS

RUN = ["--tasks", "retrieval", "--lengths", "2048,8192", "--seed", "3"]
RUN += ["--task-arg", "retrieval.topics=3", "--task-arg", "retrieval.source=synthetic"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bm25 on retrieval (2K, 8K), and a copy named bm25-moved whose 8K samples claim other haystacks (refused)
    and which lacks one 2K score (unpaired), laid out as a board with its site."""
    from longctx_eval.cli import main

    tmp = tmp_path_factory.mktemp("compare-counts")
    runs = tmp / "runs"
    assert main(["run", "--model", "bm25", *RUN, "--out", str(runs)]) == 0
    moved = runs / "bm25-moved"
    shutil.copytree(runs / "bm25", moved)
    run = json.loads((moved / "run.json").read_text())
    run["model"]["name"] = "bm25-moved"
    (moved / "run.json").write_text(json.dumps(run))
    samples = [json.loads(line) for line in (moved / "samples" / "retrieval.jsonl").read_text().splitlines()]
    for rec in samples:
        if rec["id"].startswith("L8192-"):
            rec["context_sha256"] = "0" * 64
    (moved / "samples" / "retrieval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in samples))
    scores = (moved / "scores" / "retrieval.jsonl").read_text().splitlines()
    dropped = next(i for i, line in enumerate(scores) if json.loads(line)["id"].startswith("L2048-"))
    (moved / "scores" / "retrieval.jsonl").write_text("".join(s + "\n" for i, s in enumerate(scores) if i != dropped))
    update_leaderboard([runs], tmp / "board", site=tmp / "site")
    return tmp


def test_the_page_counts_refused_and_unpaired_ids_as_compare_does(folders: Path) -> None:
    expected = compare_runs(folders / "runs" / "bm25", folders / "runs" / "bm25-moved").tasks[0]
    j = expected.joined
    assert (len(j.pairs), j.refused, j.only_a, j.only_b) == (8, {REFUSED_CONTEXT: 9}, 1, 0)
    page = html.unescape((folders / "site" / "compare-bm25--bm25-moved.html").read_text())
    text = re.sub(r"<[^>]+>", "", page)
    assert (
        f"8 pairs; 9 refused: {REFUSED_CONTEXT}; unpaired: 1 only in bm25, 0 only in bm25-moved." in text
    )  # compare prints: "8 pairs ...; 9 refused: <why>; unpaired: 1 only in A, 0 only in B"
    table = page.split('class="sortable compare"', 1)[1]  # the task's table, under the page's summary
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1].split("</tbody>", 1)[0])
    tests = [re.findall(r"<td[^>]*>(.*?)</td>", r)[8] for r in rows]
    assert tests == [row.test for row in expected.rows]  # the test each length used, row by row
    assert all(f"{t} = {TESTS[t]}" in text for t in set(tests))  # and what it is


def test_no_interval_is_shown_from_fewer_than_five_pairs() -> None:
    few = PairedDifference(2048, MIN_N_FOR_INTERVAL - 1, 0.5, 0.25, 0.25, (0.0, 0.5), 1, 0, "sign-flip", 0.5, 4)
    assert "[" not in pair_interval(few) and "no interval" in pair_interval(few)
    enough = PairedDifference(2048, MIN_N_FOR_INTERVAL, 0.5, 0.25, 0.25, (0.0, 0.5), 1, 0, "sign-flip", 0.5, 5)
    assert pair_interval(enough) == "[+0.000, +0.500]"
