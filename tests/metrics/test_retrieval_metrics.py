"""Retrieval metric functions against hand-computed values: recall curve, MRR, nDCG@10, KL in bits, score@k."""

from __future__ import annotations

import math

import numpy as np
import pytest

from longctx_eval import Hit
from longctx_eval.metrics.retrieval import (
    covering_ranks,
    kl_bits,
    ndcg_at,
    ranking_scores,
    recall_curve,
    reciprocal_rank,
)

A, B = (100, 120), (500, 530)  # two gold spans


def _hit(start: int, end: int, score: float = 0.0) -> Hit:
    return Hit(start, end, score)


def test_recall_curve_is_the_share_of_spans_covered_whole_within_k():
    hits = [_hit(0, 90), _hit(90, 130), _hit(110, 140), _hit(480, 540)]  # rank 3 overlaps A but does not cover it
    ranks = covering_ranks(hits, [A, B])
    assert ranks == [2, 4]
    assert recall_curve(ranks, (1, 2, 3, 4, 100)) == {
        "recall@1": 0.0,
        "recall@2": 0.5,
        "recall@3": 0.5,
        "recall@4": 1.0,
        "recall@100": 1.0,
    }
    assert covering_ranks(hits[:3], [A, B]) == [2, None]


def test_mrr_is_the_first_rank_covering_any_span():
    assert reciprocal_rank([_hit(0, 90), _hit(480, 540), _hit(90, 130)], [A, B]) == 0.5
    assert reciprocal_rank([_hit(0, 90)], [A, B]) == 0.0


def test_ndcg_at_10_binary_gains_and_ideal_from_the_span_count():
    hits = [_hit(0, 90), _hit(90, 130), _hit(200, 300), _hit(480, 540)]  # new spans at ranks 2 and 4
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3)
    assert ndcg_at(hits, [A, B]) == pytest.approx(dcg / ideal)
    # A second (overlapping) chunk covering the same span gains nothing: nDCG stays <= 1.
    dup = [_hit(90, 130), _hit(95, 125), _hit(480, 540)]
    assert ndcg_at(dup, [A, B]) == pytest.approx((1 + 1 / math.log2(4)) / ideal)
    assert ndcg_at([_hit(90, 130), _hit(480, 540)], [A, B]) == pytest.approx(1.0)
    # A span found below rank 10 does not count.
    late = [_hit(0, 10)] * 10 + [_hit(90, 130)]
    assert ndcg_at(late, [A]) == 0.0


def test_kl_bits_against_a_hand_computed_softmax():
    hits = [_hit(0, 90, 2.0), _hit(90, 130, 1.0), _hit(200, 300, 0.0)]  # only rank 2 relevant
    q2 = math.exp(1) / (math.exp(2) + math.exp(1) + 1)
    assert kl_bits(hits, [A], 1.0) == pytest.approx(-math.log2(q2))  # P = (0, 1, 0)
    t = float(np.std([2.0, 1.0, 0.0]))  # population std: sqrt(2/3)
    e = [math.exp(s / t) for s in (2.0, 1.0, 0.0)]
    assert kl_bits(hits, [A], None) == pytest.approx(-math.log2(e[1] / sum(e)))
    # Two relevant hits: P = (1/2, 1/2, 0); KL = sum P log2(P / Q).
    two = [_hit(90, 130, 2.0), _hit(480, 540, 1.0), _hit(0, 90, 0.0)]
    z = math.exp(2) + math.exp(1) + 1
    expected = 0.5 * math.log2(0.5 / (math.exp(2) / z)) + 0.5 * math.log2(0.5 / (math.exp(1) / z))
    assert kl_bits(two, [A, B], 1.0) == pytest.approx(expected)


def test_kl_is_zero_for_a_perfect_flat_ranking_and_absent_when_nothing_relevant_came_back():
    assert kl_bits([_hit(90, 130, 1.0), _hit(480, 540, 1.0)], [A, B], 1.0) == pytest.approx(0.0)
    assert kl_bits([_hit(90, 130, 5.0), _hit(480, 540, 5.0)], [A, B], None) == pytest.approx(0.0)  # std 0: uniform
    assert kl_bits([_hit(0, 90, 1.0)], [A], 1.0) is None
    # Large scores do not overflow: computed in log space.
    assert kl_bits([_hit(90, 130, 1e4), _hit(0, 90, -1e4)], [A], 1.0) == pytest.approx(0.0)
    assert math.isfinite(kl_bits([_hit(0, 90, 1e4), _hit(90, 130, -1e4)], [A], 1.0))


def test_ranking_scores_fields():
    hits = [_hit(0, 90, 0.9), _hit(90, 130, 0.8), _hit(480, 540, 0.1)]
    got = ranking_scores(hits, [A, B], range(1, 101))
    assert got["recall@1"] == 0.0 and got["recall@2"] == 0.5 and got["recall@3"] == 1.0 and got["recall@100"] == 1.0
    assert got["mrr"] == 0.5
    assert [got[f"score@{k}"] for k in (1, 2, 3)] == [0.9, 0.8, 0.1]
    assert "score@4" not in got  # only ranks that were returned
    assert {"kl_bits", "kl_bits_std", "ndcg@10"} <= set(got)
    wrong = ranking_scores([_hit(0, 90, 1.0)], [A, B], range(1, 101))
    assert wrong["recall@100"] == 0.0 and wrong["mrr"] == 0.0 and wrong["ndcg@10"] == 0.0
    assert "kl_bits" not in wrong
    empty = ranking_scores((), [A], (1, 5))
    assert empty == {"recall@1": 0.0, "recall@5": 0.0, "mrr": 0.0, "ndcg@10": 0.0}
