"""Paired differences of a metric computed over the samples together (CoNLL F1, a summed ratio): the metric is
recomputed on each side over the same pairs and resamples; the test swaps each cluster's two sides."""

from __future__ import annotations

import numpy as np

from longctx_eval.metrics.aggregate import Metric, column_mean, column_ratio
from longctx_eval.scoring.paired_aggregate import aggregate_differences
from longctx_eval.scoring.paired_scores import SampleScore, paired_differences
from longctx_eval.scoring.paired_tests import CLUSTER_SWAP


def _runs(seed: int, shift: float) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    a, b = {}, {}
    for i in range(60):
        length, cluster = 1024 if i < 30 else 4096, f"d{i // 3}"
        hits, links = int(rng.integers(0, 6)), 6
        a[(f"s{i}", "c")] = SampleScore(length, {"n": hits, "d": links, "v": hits / links}, cluster=cluster)
        other = max(0, min(links, hits - round(shift * links)))
        b[(f"s{i}", "c")] = SampleScore(length, {"n": other, "d": links, "v": other / links}, cluster=cluster)
    return a, b


def test_a_summed_ratio_is_recomputed_on_each_side_and_tested_by_swapping_clusters() -> None:
    a, b = _runs(0, 0.5)
    metric = Metric("span_em", ("n", "d"), column_ratio)
    rows = aggregate_differences(a, b, metric, sorted(a))
    assert [r.length for r in rows] == [1024, 4096, None] and rows[-1].n == 60 and rows[-1].clusters == 20
    pooled = rows[-1]
    ra = sum(s.scores["n"] for s in a.values()) / 360
    rb = sum(s.scores["n"] for s in b.values()) / 360
    assert abs(pooled.mean_a - ra) < 1e-12 and abs(pooled.difference - (ra - rb)) < 1e-12
    assert pooled.test == CLUSTER_SWAP and pooled.p_value < 0.01 and pooled.ci95 is not None and pooled.ci95[0] > 0


def test_no_difference_is_not_significant_and_a_mean_agrees_with_the_per_sample_path() -> None:
    a, _ = _runs(1, 0.0)
    same = aggregate_differences(a, a, Metric("span_em", ("n", "d"), column_ratio), sorted(a))[-1]
    assert same.difference == 0.0 and same.p_value == 1.0 and same.ci95 == (0.0, 0.0)
    a, b = _runs(2, 0.2)
    mean = aggregate_differences(a, b, Metric("v", ("v",), column_mean), sorted(a))[-1]
    plain = paired_differences(a, b, "v", pairs=sorted(a))[-1]
    assert abs(mean.difference - plain.difference) < 1e-12 and mean.ci95 is not None and plain.ci95 is not None
    assert abs(mean.ci95[0] - plain.ci95[0]) < 0.02 and abs(mean.ci95[1] - plain.ci95[1]) < 0.02
