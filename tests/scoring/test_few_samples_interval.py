"""Issue 38: fewer than MIN_N_FOR_INTERVAL samples or pairs show their value with no interval on every surface."""

from __future__ import annotations

from longctx_eval.leaderboard.comparison_page import BoardComparison, compare_page
from longctx_eval.leaderboard.site_html import Links, page_html
from longctx_eval.metrics.bootstrap import MIN_N_FOR_INTERVAL, has_interval
from longctx_eval.results import MetricResult
from longctx_eval.scoring.comparison import holm_rows
from longctx_eval.scoring.labels import format_cell, summary_value
from longctx_eval.scoring.paired_scores import SampleScore, join, paired_differences


def _row(n: int) -> MetricResult:
    return MetricResult(metric="score", length=None, value=0.5, n=n, ci95=(0.0, 0.0) if n < 5 else (0.3, 0.7))


def _scores(values: list[float]) -> dict[tuple[str, str], SampleScore]:
    return {(f"s{i}", "ctx"): SampleScore(length=1024, scores={"score": v}) for i, v in enumerate(values)}


def test_one_threshold():
    assert MIN_N_FOR_INTERVAL == 5 and not has_interval(4) and has_interval(5)


def test_console_and_board_cells_at_n2():
    assert summary_value(_row(2)) == "score=0.500 n=2, no interval (n < 5)"
    assert format_cell(_row(2)) == "0.50 n=2, no interval (n < 5)"
    assert format_cell(_row(2), "n=2/5") == "0.50 n=2/5, no interval (n < 5)"
    assert "[0.00, 0.00]" not in summary_value(_row(4)) + format_cell(_row(4))
    assert summary_value(_row(5)) == "score=0.500 [0.30, 0.70]"
    assert format_cell(_row(5)) == "0.50 [0.30, 0.70] n=5"


def test_compare_with_one_pair_has_no_interval():
    a, b = _scores([1.0]), _scores([0.0])
    rows = paired_differences(a, b, "score")
    assert rows and all(r.ci95 is None and not r.significant for r in rows)
    assert rows[-1].interval_text() == "n=1, no interval (n < 5)"
    five = paired_differences(_scores([1.0, 1.0, 0.0, 1.0, 1.0]), _scores([0.0] * 5), "score")
    assert five[-1].ci95 is not None and five[-1].interval_text().startswith("[")
    board = BoardComparison("score", join(a, b, "score"), rows, holm_rows([rows])[0])
    page = page_html(compare_page("A", "B", {"needle": board}), Links({}, {}, {}, {}))
    assert "[-1" not in page and "[+1" not in page and "no interval" in page and "n &lt; 5" in page


def test_pairs_that_all_agree_bound_the_difference_on_both_sides() -> None:
    """20 pairs on 4 haystacks, both right every time: the difference is 0, its interval is symmetric (B could be
    ahead as well as A), the exact bound over the 4 clusters, never [0, x]."""
    from longctx_eval.metrics.bootstrap import unanimous_bounds
    from longctx_eval.scoring.paired_scores import SampleScore, paired_differences

    def scores() -> dict[tuple[str, str], SampleScore]:
        return {(f"s{i}", "ctx"): SampleScore(1024, {"recall@1": 1.0}, cluster=f"h{i % 4}") for i in range(20)}

    pooled = paired_differences(scores(), scores(), "recall@1")[-1]
    edge = unanimous_bounds(0.0, 4)[1]
    assert pooled.difference == 0.0 and pooled.ci95 == (-edge, edge) and 0.5 < edge < 0.7


def test_a_unanimous_ratio_of_sums_gets_the_exact_bound_over_the_units_with_trials() -> None:
    """Span-EM across windows, 0 of every document's cross-window anaphors right in all 100 documents that have one:
    the bootstrap of a summed ratio has no width there ([0, 0] said the rate was certainly 0); it now gets the exact
    bound over those documents, as a unanimous 0/1 rate does. Documents without such an anaphor say nothing."""
    import numpy as np

    from longctx_eval.metrics.aggregate import column_ratio
    from longctx_eval.metrics.bootstrap import bootstrap_ci, unanimous_bounds

    rng = np.random.default_rng(0)
    trials = rng.integers(1, 6, size=100)
    zeros = np.column_stack([np.zeros(100), trials])
    with_empty = np.vstack([zeros, np.zeros((20, 2))])  # 20 documents with no cross-window anaphor
    names = [f"d{i}" for i in range(120)]
    assert bootstrap_ci(with_empty, column_ratio, clusters=names) == unanimous_bounds(0.0, 100)
    assert bootstrap_ci(np.column_stack([trials, trials]), column_ratio) == unanimous_bounds(1.0, 100)
    mixed = np.column_stack([np.minimum(trials, 1), trials])  # some right, some not: the bootstrap's own interval
    lo, hi = bootstrap_ci(mixed, column_ratio)
    assert 0.0 < lo < hi < 1.0
