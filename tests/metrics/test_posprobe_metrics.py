"""Position metrics against hand-computed attention rows, plus their invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from longctx_eval.metrics import posprobe as pm


@pytest.mark.parametrize("n", [1, 2, 5, 128, 2048])
def test_uniform_row_has_log2_n_bits(n):
    assert pm.entropy_bits(np.full(n, 1.0 / n)) == pytest.approx(math.log2(n), abs=1e-12)


def test_one_hot_row_has_zero_bits_and_zero_entries_are_ignored():
    row = np.zeros(64)
    row[17] = 1.0
    assert pm.entropy_bits(row) == 0.0
    # hand-computed: (1/2, 1/4, 1/4, 0) -> 0.5*1 + 2*0.25*2 = 1.5 bits
    assert pm.entropy_bits(np.array([0.5, 0.25, 0.25, 0.0])) == pytest.approx(1.5)


def test_entropy_is_per_row_over_the_last_axis():
    rows = np.array([[[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]]])
    assert pm.entropy_bits(rows).tolist() == [[1.0, 2.0]]


def test_normalized_entropy_divides_by_the_uniform_entropy_up_to_the_query():
    rows = np.array([[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]])
    assert pm.normalized_entropy(rows, [1, 3, 0]).tolist() == [1.0, 1.0, 0.0]


def test_npb_of_a_perfect_head_is_zero_with_full_hit_rate():
    assert pm.npb_terms([10, 11, 12], [10, 11, 12], 128) == {"npb": 0.0, "npb_signed": 0.0, "hit": 1.0}


def test_npb_hand_computed_signs_and_hits():
    # |+6|, |-2|, 0 over L=8: npb = 8/24, signed = 4/24, hit = 1/3
    t = pm.npb_terms([16, 8, 12], [10, 10, 12], 24)
    assert t["npb"] == pytest.approx((6 + 2 + 0) / 24 / 3)
    assert t["npb_signed"] == pytest.approx((6 - 2 + 0) / 24 / 3)
    assert t["hit"] == pytest.approx(1 / 3)


def test_npb_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="must match"):
        pm.npb_terms([1, 2], [1], 10)


def test_argmax_ties_go_to_the_smaller_position():
    assert pm.argmax_first(np.array([0.1, 0.4, 0.4, 0.1])) == 1


def test_needle_and_sink_mass():
    rows = np.array([[0.5, 0.25, 0.25], [0.2, 0.1, 0.7]])
    assert pm.mass_at(rows, [1, 2]).tolist() == [0.25, 0.7]
    assert pm.sink_mass(rows) == pytest.approx(0.35)


def test_retrieval_scores_and_head_selection_rule():
    targets = np.array([[5, 6], [9, 10]])  # 2 needles x 2 steps
    argmax = np.zeros((2, 3, 2, 2), dtype=int)
    argmax[0, 1] = targets  # a perfect head
    argmax[1, 2] = [[5, 0], [9, 0]]  # half right
    scores = pm.retrieval_scores(argmax, targets)
    assert scores[0, 1] == 1.0 and scores[1, 2] == 0.5 and scores[0, 0] == 0.0
    assert pm.select_heads(scores, 0.5, 4) == [(0, 1), (1, 2)]
    assert pm.select_heads(scores, 0.5, 1) == [(0, 1)]
    assert pm.select_heads(scores, 0.9, 4) == [(0, 1)]
    assert pm.select_heads(np.zeros((2, 2)), 0.5, 4) == [(0, 0)]  # none qualifies: the single best (first) head


def test_head_mean_rows_averages_the_chosen_heads():
    rows = np.zeros((2, 2, 1, 4))
    rows[0, 1, 0] = [1, 0, 0, 0]
    rows[1, 0, 0] = [0, 0, 1, 0]
    assert pm.head_mean_rows(rows, [(0, 1), (1, 0)]).tolist() == [[0.5, 0.0, 0.5, 0.0]]


def test_rho_of_uniform_dilution_is_one_and_undefined_at_the_reference():
    assert pm.rho(math.log2(2048), math.log2(128), 2048, 128) == pytest.approx(1.0)
    assert pm.rho(3.0, 3.0, 1024, 128) == 0.0
    with pytest.raises(ValueError, match="undefined"):
        pm.rho(1.0, 1.0, 128, 128)


def test_answer_terms_hand_computed():
    # a tiny-rope-like needle at 16x: step 1 restarts the question (30 nats), steps 2..5 are near the answer
    t = pm.answer_terms([30.0, 1.0, 2.0, 0.5, 0.5])
    assert t["answer_nll_sum"] == pytest.approx(34.0)
    assert t["answer_nll_clipped_sum"] == pytest.approx(math.log(10) + 4.0)  # only step 1 exceeds ln 10 = 2.303
    assert t["answer_tokens"] == 5.0
    assert t["answer_ppl"] == pytest.approx(math.exp(34.0 / 5))
    assert (t["answer_nll_rest_sum"], t["answer_rest_tokens"]) == (pytest.approx(4.0), 4.0)
    assert [t[f"answer_nll_k{k}"] for k in range(1, 6)] == [30.0, 1.0, 2.0, 0.5, 0.5]
    assert "answer_nll_k6" not in t


def test_answer_terms_caps_the_per_step_breakdown_and_rejects_bad_input():
    t = pm.answer_terms([0.1] * (pm.MAX_STEPS + 3))
    assert f"answer_nll_k{pm.MAX_STEPS}" in t and f"answer_nll_k{pm.MAX_STEPS + 1}" not in t
    assert t["answer_tokens"] == pm.MAX_STEPS + 3  # the pooled sums keep every step
    for bad in ([], [1.0, float("nan")], [[1.0]]):
        with pytest.raises(ValueError, match="finite per-step NLLs"):
            pm.answer_terms(bad)


def test_pooled_median_and_clipped_answer_perplexity_differ_as_documented():
    """Two needles: one found (NLL 0.1 per step), one lost with 20-nat overconfident steps. Pooled exp(mean)
    is dominated by the lost one; the median of two is their mean perplexity; clipping caps each step at ln 10."""
    good, bad = pm.answer_terms([0.1] * 5), pm.answer_terms([20.0] * 5)
    pooled = pm.ppl_reduce(np.array([[x["answer_nll_sum"], x["answer_tokens"]] for x in (good, bad)]))
    assert pooled == pytest.approx(math.exp((0.5 + 100) / 10))
    median = pm.median_reduce(np.array([[good["answer_ppl"]], [bad["answer_ppl"]]]))
    assert median == pytest.approx((math.exp(0.1) + math.exp(20.0)) / 2)
    clipped = pm.ppl_reduce(np.array([[x["answer_nll_clipped_sum"], x["answer_tokens"]] for x in (good, bad)]))
    assert clipped == pytest.approx(math.exp((0.5 + 5 * math.log(10)) / 10))  # = sqrt(10 e^0.1) ~ 3.3
    three = np.array([[1.0], [50.0], [7.0]])
    assert pm.median_reduce(three) == 7.0
    assert math.isnan(pm.median_reduce(np.zeros((0, 1))))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(0.0, 60.0), min_size=1, max_size=6), min_size=1, max_size=8))
def test_clipped_perplexity_never_exceeds_ten_or_the_pooled_one(needles):
    terms = [pm.answer_terms(n) for n in needles]
    pooled = pm.ppl_reduce(np.array([[t["answer_nll_sum"], t["answer_tokens"]] for t in terms]))
    clipped = pm.ppl_reduce(np.array([[t["answer_nll_clipped_sum"], t["answer_tokens"]] for t in terms]))
    assert clipped <= min(pooled, 10.0) * (1 + 1e-12)
    per = [t["answer_ppl"] for t in terms]
    assert min(per) <= pm.median_reduce(np.array(per)[:, None]) <= max(per)


def test_perplexity_pools_tokens():
    assert pm.perplexity(0.0, 5) == 1.0
    assert pm.perplexity(2 * math.log(4.0), 2) == pytest.approx(4.0)
    a = np.array([[math.log(2.0), 1.0], [3 * math.log(2.0), 1.0]])
    assert pm.ppl_reduce(a) == pytest.approx(4.0)  # exp((ln2 + 3 ln2) / 2)


rows_strategy = st.integers(2, 64).flatmap(
    lambda n: st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=n, max_size=n).filter(lambda v: sum(v) > 1e-6)
)


@settings(max_examples=60, deadline=None)
@given(rows_strategy, st.randoms(use_true_random=False))
def test_entropy_bounds_and_permutation_invariance(values, rnd):
    p = np.asarray(values) / np.sum(values)
    h = pm.entropy_bits(p)
    assert -1e-9 <= h <= math.log2(len(p)) + 1e-9
    perm = list(range(len(p)))
    rnd.shuffle(perm)
    assert pm.entropy_bits(p[perm]) == pytest.approx(h, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(8, 4096).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(0, n - 1), min_size=2, max_size=10))
    )
)
def test_npb_lies_in_unit_interval_and_bounds_its_signed_form(case):
    length, pos = case
    targets = list(reversed(pos))
    t = pm.npb_terms(pos, targets, length)
    assert 0.0 <= t["npb"] < 1.0
    assert abs(t["npb_signed"]) <= t["npb"] + 1e-12
    assert (t["hit"] == 1.0) == (t["npb"] == 0.0)
