"""Coreference on the board: a coreference system and a language model that score the same documents share one
board (both report CoNLL F1), each row saying how it answered; the read-out within and across windows and by
antecedent distance is a table with n and intervals. Real runs: SmolLM2-135M by likelihood and coref:baseline
counting lengths in SmolLM2's tokenizer, on two synthetic narratives at 1K."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.leaderboard.grid import task_names
from longctx_eval.results import RunResult

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--tasks", "coref_synthetic", "--lengths", "1024", "--limit", "2", "--seed", "0"]


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from longctx_eval.cli import main

    tmp = tmp_path_factory.mktemp("coref-board")
    models = "smollm2-135m,coref:baseline?tokenizer=smollm2-135m"
    assert main(["run", "--model", models, *RUN, "--out", str(tmp / "runs")]) == 0
    update_leaderboard([tmp / "runs"], tmp / "board", site=tmp / "site")
    return tmp


def test_a_coreference_system_and_a_language_model_share_a_board(board: Path) -> None:
    entries = [RunResult.model_validate_json(p.read_text()) for p in sorted((board / "runs").glob("*/run.json"))]
    assert {t.capability for e in entries for t in e.tasks} == {"coref", "loglikelihood"}
    assert task_names(entries) == ["coref_synthetic"]
    md = (board / "board" / "LEADERBOARD.md").read_text()
    section = md.split("## coref_synthetic (v2)", 1)[1].split("\n## ", 1)[0]
    assert "**coref-baseline** a coreference system's clusters over the gold mentions" in section
    assert "**smollm2-135m** the candidate antecedent it gave the highest likelihood (`mode=choice`)" in section
    for head in ("| model | L | CoNLL F1 | LEA | Span-EM | link recall |", "Span-EM intra", "Span-EM &lt;128"):
        assert head in section, head
    rows = [line for line in section.splitlines() if line.startswith("| **")]
    assert any(r.startswith("| **coref-baseline** | 1K |") for r in rows)
    assert any(r.startswith("| **smollm2-135m** | all |") and "n=2" in r for r in rows)
    site = (board / "site" / "task-coref_synthetic.html").read_text()
    assert "Span-EM intra" in site and "How each model answered" in site
    # the two rows read the very same documents: the baseline counted lengths in SmolLM2's tokenizer
    shas = [
        {
            json.loads(line)["context_sha256"]
            for line in (board / "runs" / m / "samples" / "coref_synthetic.jsonl").open()
        }
        for m in ("smollm2-135m", "coref-baseline")
    ]
    assert shas[0] == shas[1] and len(shas[0]) == 2


def test_a_model_that_ran_a_task_two_ways_keeps_one_board_per_capability() -> None:
    """The committed default board: SmolLM2 ran coref_synthetic by likelihood and by generation, so the
    coreference system and each of its modes keep their own boards (one row per model on a board)."""
    data = json.loads((ROOT / "leaderboards" / "leaderboard.json").read_text())
    entries = [RunResult.model_validate(e) for e in data["entries"]]
    names = task_names(entries)
    assert [n for n in names if n.startswith("coref_synthetic")] == [
        "coref_synthetic (coref)",
        "coref_synthetic (generate)",
        "coref_synthetic (loglikelihood)",
    ]
    assert "needle (generate)" in names and "needle (retrieve)" in names  # other metrics: never one board


def test_compare_pairs_the_two_on_conll_f1_recomputed_on_each_side(board: Path, capsys) -> None:
    """CoNLL F1 is summed over a cell's documents, so no per-sample difference exists: `compare` recomputes it on
    each side over the shared documents (and tests by swapping each document's two sides), where it had refused."""
    from longctx_eval.cli import main

    runs = board / "runs"
    assert main(["compare", str(runs / "coref-baseline"), str(runs / "smollm2-135m"), "--task", "coref_synthetic"]) == 0
    out = capsys.readouterr().out
    assert "conll_f1 · cluster-swap permutation · 2 pairs" in out and "0 refused" in out


def test_the_comparison_page_counts_documents_where_conll_f1_favours_a_side(board: Path) -> None:
    """CoNLL F1 exists per document set, not per sample: the page's 'better' columns count clusters, and say so."""
    import re

    pages = [
        p for p in (board / "site").rglob("*.html") if "coref_synthetic" in p.read_text() and " vs " in p.read_text()
    ]
    page = next(p.read_text() for p in pages if 'class="sortable compare"' in p.read_text())
    table = page.split('class="sortable compare"', 1)[1].split("</tbody>", 1)[0]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", table)]
    better = [c[6:8] for c in cells if len(c) > 8 and c[8] == "cluster-swap permutation"]
    assert better and all(re.fullmatch(r"\d+ clusters?", x) for row in better for x in row), better
    assert "clusters where one scored higher on that cluster alone" in page
