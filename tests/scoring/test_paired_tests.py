"""The paired tests of `compare` (`scoring/paired_tests.py`): McNemar's exact test against scipy's binomial
test, Holm against a hand-worked example, the sign-flip test against exact enumeration, and on simulated
paired runs the power at a 10-point effect and the false-positive rate at none (vectorised: 500 simulations
in well under a second)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom, binomtest

from longctx_eval.scoring.paired_tests import (
    MCNEMAR,
    SIGN_FLIP,
    discordant,
    holm,
    is_binary,
    mcnemar_exact,
    paired_test,
    sign_flip,
)

N_SIMS = 500
N_PAIRS = 200
SHARED = 0.7


@pytest.mark.parametrize(
    ("b", "c"), [(0, 0), (1, 0), (0, 5), (3, 7), (7, 3), (10, 10), (12, 30), (1, 40), (60, 95), (250, 203)]
)
def test_mcnemar_exact_is_scipy_binomtest_on_discordant_pairs(b: int, c: int) -> None:
    expected = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_mcnemar_exact_broadcasts_over_simulations() -> None:
    rng = np.random.default_rng(1)
    b, c = rng.integers(0, 60, size=50), rng.integers(0, 60, size=50)
    got = mcnemar_exact(b, c)
    want = [1.0 if x + y == 0 else binomtest(int(x), int(x + y), 0.5).pvalue for x, y in zip(b, c, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_holm_hand_example() -> None:
    """p = (0.01, 0.04, 0.03, 0.005), m = 4. Sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06,
    0.04*1 = 0.04 -> running max 0.06. Back in input order: 0.03, 0.06, 0.06, 0.02."""
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm([0.5, 0.9]), [1.0, 1.0])  # capped at 1
    np.testing.assert_allclose(holm([0.02]), [0.02])  # one test: unadjusted
    assert holm([]).size == 0


def test_holm_ties_and_rejections_match_the_step_down_rule() -> None:
    """Rejecting where adjusted p < alpha is Holm's procedure: stop at the first sorted p above alpha/(m-i)."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        p = np.round(rng.uniform(0, 0.08, size=rng.integers(1, 9)), 3)
        order = np.argsort(p, kind="stable")
        reject = np.zeros(p.size, bool)
        for i, j in enumerate(order):
            if p[j] >= 0.05 / (p.size - i):
                break
            reject[j] = True
        np.testing.assert_array_equal(holm(p) < 0.05, reject)


def test_sign_flip_exact_matches_enumeration_and_monte_carlo_agrees() -> None:
    d = np.array([0.5, 0.25, 0.75, -0.25, 0.5, 0.0, 1.0, 0.25])
    nz = d[d != 0]
    sums = [abs(sum(s * x for s, x in zip(signs, nz, strict=True))) for signs in itertools.product((1, -1), repeat=7)]
    want = sum(v >= abs(nz.sum()) - 1e-12 for v in sums) / len(sums)
    assert sign_flip(d) == pytest.approx(want)
    rng = np.random.default_rng(3)
    big = rng.normal(0.1, 1.0, size=120)
    p = sign_flip(big, seed=5)
    assert p == sign_flip(big, seed=5)  # seeded
    # the normal approximation of the permutation distribution (variance sum d^2)
    z = abs(big.sum()) / math.sqrt((big**2).sum())
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)), abs=0.02)
    assert sign_flip(np.zeros(10)) == 1.0


def test_paired_test_picks_mcnemar_for_binary_scores_only() -> None:
    a = np.array([1, 1, 1, 0, 1, 1, 0, 1, 1, 1], float)
    b = np.array([0, 1, 0, 0, 0, 1, 0, 0, 1, 0], float)
    name, p = paired_test(a, b)
    assert name == MCNEMAR and p == pytest.approx(binomtest(5, 5, 0.5).pvalue)
    assert is_binary(a, b) and not is_binary(a, b * 0.5)
    name, _ = paired_test(a * 0.9, b)
    assert name == SIGN_FLIP


def _simulated_p_values(p_a: float, p_b: float, seed: int) -> np.ndarray:
    """McNemar p-values of N_SIMS simulated paired runs of N_PAIRS binary samples.

    System X is right on a sample when its difficulty u < p_X. On SHARED of the samples both systems see the
    same difficulty (two systems on one item mostly agree: that is what pairing buys), on the rest each draws
    its own. At p = 0.5 vs 0.6 that makes about 22% of pairs discordant (0.7 * 0.1 + 0.3 * 0.5); McNemar's
    power depends on that share (at 30% discordant it is about 70%, at 20% about 88%)."""
    rng = np.random.default_rng(seed)
    u = rng.random((N_SIMS, N_PAIRS))
    noise = rng.random((N_SIMS, N_PAIRS))
    shared = noise < SHARED
    ua = np.where(shared, u, rng.random((N_SIMS, N_PAIRS)))
    ub = np.where(shared, u, rng.random((N_SIMS, N_PAIRS)))
    a, b = (ua < p_a).astype(float), (ub < p_b).astype(float)
    only_a, only_b = discordant(a, b, axis=1)
    return np.asarray(mcnemar_exact(only_a, only_b))


def test_power_detects_a_ten_point_difference_at_n200() -> None:
    """Accuracy 0.6 vs 0.5 on 200 paired samples: p < 0.05 in at least 80% of 500 simulated pairs."""
    p = _simulated_p_values(0.6, 0.5, seed=11)
    power = float((p < 0.05).mean())
    assert power >= 0.80, power


@pytest.mark.parametrize("rate", [0.5, 0.8])
def test_false_positive_rate_at_no_difference(rate: float) -> None:
    """Both systems at the same accuracy: the share of p < 0.05 is within 5% +- 3 binomial SEs of 500 sims
    (McNemar's exact test is conservative, so it sits at or below 5%)."""
    p = _simulated_p_values(rate, rate, seed=12)
    fpr = float((p < 0.05).mean())
    se = math.sqrt(0.05 * 0.95 / N_SIMS)
    assert fpr <= 0.05 + 3 * se, fpr
    # The exact test is conservative: its true size here, computed exactly, is below 5%, and the simulated
    # rate must match it within 3 SE (so the test is neither inert nor anti-conservative).
    size = _exact_size((1 - SHARED) * 2 * rate * (1 - rate))
    assert size <= 0.05
    assert abs(fpr - size) <= 3 * math.sqrt(size * (1 - size) / N_SIMS), (fpr, size)


def _exact_size(discordant_share: float) -> float:
    """P(McNemar p < 0.05) under the null when each pair is discordant with this probability."""
    total = 0.0
    for m in range(N_PAIRS + 1):
        k = np.arange(m + 1)
        reject = np.asarray(mcnemar_exact(k, m - k)) < 0.05
        total += binom.pmf(m, N_PAIRS, discordant_share) * binom.pmf(k, m, 0.5)[reject].sum()
    return float(total)


def test_sign_flip_power_and_size_on_continuous_scores() -> None:
    """The non-binary test: scores in [0, 1] (an MRR-like value), a 0.1 mean shift at n=200 detected in >= 80%
    of 200 simulations, and at no shift p < 0.05 in 5% +- 3 SE."""
    rng = np.random.default_rng(21)
    sims = 200
    base = rng.random((sims, N_PAIRS))

    def noisy(shift: float) -> np.ndarray:
        return np.clip(base + shift + rng.normal(0, 0.25, base.shape), 0, 1)

    a, b, c = noisy(0.1), noisy(0.0), noisy(0.0)  # b and c are exchangeable: the null holds exactly
    power = np.mean([sign_flip(a[i] - b[i], n_flips=2000, seed=i) < 0.05 for i in range(sims)])
    size = np.mean([sign_flip(c[i] - b[i], n_flips=2000, seed=i) < 0.05 for i in range(sims)])
    assert power >= 0.80, power
    assert abs(size - 0.05) <= 3 * math.sqrt(0.05 * 0.95 / sims), size
