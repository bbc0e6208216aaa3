"""Pure metric functions: normalization, containment, retrieval hits, bootstrap intervals, grouping."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from longctx_eval import Hit, Sample, Score, contains_answer, is_empty, mean, normalize, rate, recall_at
from longctx_eval.metrics.aggregate import column_mean, ratio
from longctx_eval.metrics.bootstrap import bootstrap_ci
from longctx_eval.scoring.score import grouped_results


def test_normalize_and_containment():
    assert normalize("  The  Value: 1,234-5!  ") == "the value 1 234 5"
    assert contains_answer("The special number is 4821937.", "4821937")
    assert contains_answer("it is AMBER-falcon", "amber falcon")
    assert not contains_answer("48219370", "4821937")  # on token boundaries only
    assert not contains_answer("anything", "")
    assert is_empty("  ...  ") and is_empty(None) and not is_empty("0")


def test_recall_at_counts_only_chunks_covering_the_whole_span():
    hits = (Hit(0, 50, 0.9), Hit(40, 120, 0.8), Hit(100, 200, 0.7))
    assert recall_at(hits, 45, 60, (1, 2, 3)) == {"recall@1": 0.0, "recall@2": 1.0, "recall@3": 1.0, "mrr": 0.5}
    assert recall_at(hits, 90, 130, (1, 3)) == {"recall@1": 0.0, "recall@3": 0.0, "mrr": 0.0}


def test_bootstrap_ci_brackets_the_mean_and_is_seeded():
    vals = np.array([1.0] * 30 + [0.0] * 10)
    lo, hi = bootstrap_ci(vals, lambda a: float(a.mean()), seed=3)
    assert (lo, hi) == bootstrap_ci(vals.reshape(-1, 1), column_mean, seed=3)  # fast path agrees
    assert lo < 0.75 < hi and lo > 0.5 and hi < 0.95
    assert (lo, hi) == bootstrap_ci(vals, lambda a: float(a.mean()), seed=3)
    assert bootstrap_ci(np.array([1.0]), lambda a: float(a.mean())) == (1.0, 1.0)


@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=60))
def test_ci_always_contains_the_mean(values):
    m = mean("x")
    value, (lo, hi) = m.compute(values)
    assert lo <= value + 1e-9 and value <= hi + 1e-9


def test_grouping_reports_cells_lengths_and_pool_without_sentinels():
    def s(i, length, depth):
        return Sample(str(i), "", "", {}, {"target_tokens": length, "depth": depth})

    scored = [
        (s(0, 100, 0.0), Score({"score": 1.0, "empty": 0.0})),
        (s(1, 100, 1.0), Score({"score": 0.0, "empty": 1.0})),
        (s(2, 200, 0.0), Score({"score": 1.0, "empty": 0.0})),
        (s(3, 200, 1.0), Score({"recall@1": 1.0})),
    ]
    rows = grouped_results(scored, [mean("score"), rate("empty"), mean("recall@1")])
    got = {(r.metric, r.length, r.depth): (r.value, r.n) for r in rows}
    assert got[("score", None, None)] == (pytest.approx(2 / 3, abs=1e-6), 3)
    assert got[("score", 100, None)] == (0.5, 2)
    assert got[("score", 100, 1.0)] == (0.0, 1)
    assert got[("empty_rate", None, None)] == (pytest.approx(1 / 3, abs=1e-6), 3)
    assert got[("recall@1", None, None)] == (1.0, 1)
    assert ("score", 200, 1.0) not in got  # absent, never a -1 placeholder
    assert all(r.value >= 0 for r in rows)


def test_ratio_is_a_micro_average_over_samples():
    m = ratio("num", "den", "recall")
    value, (lo, hi) = m.compute([[1, 2], [3, 4], [0, 0]])
    assert value == pytest.approx(4 / 6)
    assert 0 <= lo <= value <= hi <= 1
    assert m.compute([[0, 0]])[0] == 0.0
