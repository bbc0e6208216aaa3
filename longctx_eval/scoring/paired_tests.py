"""Paired significance tests of two systems scored on the same samples, and Holm's correction across them.

- Pairs that share a cluster (a haystack, a document) are not independent: the test is then a sign-flip
  permutation test of the per-cluster summed differences (under the null each cluster's sum is symmetric
  about 0), whatever the scores; the tests below apply only where every cluster is a single pair.
- Binary scores (every per-sample value of both systems in {0, 1}): McNemar's exact test, a two-sided
  binomial test of the discordant pairs (A right and B wrong vs the reverse) against p = 1/2.
- Any other score: a two-sided sign-flip permutation test of the mean paired difference (under the null the
  sign of each pair's difference is exchangeable), Monte Carlo with a seeded generator and the +1 correction
  (Phipson & Smyth 2010), exact when there are at most `EXACT_FLIPS_UP_TO` nonzero differences.
- Holm's step-down adjustment controls the family-wise error rate across the cells compared, under any
  dependence between them.

Every function here takes arrays and is vectorised, so simulations of thousands of pairs run in milliseconds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from scipy.stats import binom

from longctx_eval.metrics.cluster_stats import cluster_codes

MCNEMAR = "mcnemar-exact"
SIGN_FLIP = "sign-flip"
CLUSTER_SIGN_FLIP = "cluster-sign-flip"
CLUSTER_SWAP = "cluster-swap permutation"
"""The test of a metric with no per-sample difference (`scoring/paired_aggregate.py`)."""
TESTS = {
    MCNEMAR: "McNemar's exact test (two-sided binomial test of the discordant pairs, p = 1/2)",
    SIGN_FLIP: "sign-flip permutation test of the mean paired difference (two-sided)",
    CLUSTER_SIGN_FLIP: "sign-flip permutation test of the per-cluster summed differences (two-sided; pairs "
    "sharing a haystack or document are one unit)",
    CLUSTER_SWAP: "permutation test of a metric computed over the samples together (CoNLL F1): A's and B's rows "
    "swapped cluster by cluster at random, the metric recomputed (two-sided; scoring/paired_aggregate.py)",
}
"""The tests by name, with the sentence that explains each (shown by `compare` and on the leaderboard)."""

N_FLIPS = 10_000
"""Monte Carlo sign-flip resamples."""
EXACT_FLIPS_UP_TO = 14
"""With at most this many nonzero differences every one of the 2^n sign patterns is enumerated."""
_BLOCK_CELLS = 4_000_000
"""Sign-flip matrix entries drawn per block, so memory stays bounded at any n."""


def is_binary(*values: np.ndarray) -> bool:
    """Whether every value of every array is 0 or 1 (McNemar applies)."""
    return all(bool(np.isin(np.asarray(v, dtype=np.float64), (0.0, 1.0)).all()) for v in values)


def mcnemar_exact(a_only: np.ndarray | int, b_only: np.ndarray | int) -> np.ndarray | float:
    """McNemar's exact two-sided p-value from the discordant counts (A right only, B right only).

    p = min(1, 2 * P[X <= min(b, c)]), X ~ Binomial(b + c, 1/2): the same as scipy's `binomtest(b, b + c)`
    two-sided at p = 1/2 (the distribution is symmetric). No discordant pair gives p = 1. Broadcasts.
    """
    b = np.asarray(a_only, dtype=np.int64)
    c = np.asarray(b_only, dtype=np.int64)
    n = b + c
    p = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(b, c), n, 0.5))
    p = np.where(n == 0, 1.0, p)
    return float(p) if p.ndim == 0 else p


def discordant(a: np.ndarray, b: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Counts of pairs where only A scored 1 and where only B did, along `axis` (binary arrays)."""
    a1, b1 = np.asarray(a) > 0.5, np.asarray(b) > 0.5
    return (a1 & ~b1).sum(axis=axis), (~a1 & b1).sum(axis=axis)


def sign_flip(diff: np.ndarray, *, n_flips: int = N_FLIPS, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p-value of mean(diff) = 0.

    Exact (all 2^k patterns of the k nonzero differences) for k <= EXACT_FLIPS_UP_TO, else Monte Carlo:
    (1 + #{|flipped sum| >= |observed sum|}) / (1 + n_flips), seeded. All differences 0 gives p = 1.
    """
    d = np.asarray(diff, dtype=np.float64)
    d = d[d != 0.0]
    k = d.size
    if k == 0:
        return 1.0
    observed = abs(d.sum())
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))  # float sums of equal magnitude must compare equal
    if k <= EXACT_FLIPS_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=k)))
        return float((np.abs(signs @ d) >= observed - tol).mean())
    rng = np.random.default_rng(seed)
    hits = 0
    block = max(1, _BLOCK_CELLS // k)
    for start in range(0, n_flips, block):
        m = min(block, n_flips - start)
        signs = rng.integers(0, 2, size=(m, k), dtype=np.int8) * 2 - 1
        hits += int((np.abs(signs @ d) >= observed - tol).sum())
    return (1 + hits) / (1 + n_flips)


def cluster_sums(diff: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The paired differences summed per cluster (`codes`: 0..G-1 per pair)."""
    return np.bincount(np.asarray(codes, dtype=np.int64), weights=np.asarray(diff, dtype=np.float64))


def paired_test(
    a: np.ndarray,
    b: np.ndarray,
    *,
    seed: int = 0,
    clusters: Sequence[str] | None = None,
    n_flips: int = N_FLIPS,
) -> tuple[str, float]:
    """(test name, two-sided p-value) for paired scores: where pairs share clusters (`clusters`, one name per
    pair) the sign-flip test of the per-cluster summed differences; else McNemar's exact test when both are
    binary, else the sign-flip permutation test of the mean difference."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    codes = cluster_codes(clusters, a.size)
    if codes is not None:
        return CLUSTER_SIGN_FLIP, sign_flip(cluster_sums(a - b, codes), n_flips=n_flips, seed=seed)
    if is_binary(a, b):
        only_a, only_b = discordant(a, b)
        return MCNEMAR, float(mcnemar_exact(int(only_a), int(only_b)))
    return SIGN_FLIP, sign_flip(a - b, n_flips=n_flips, seed=seed)


def holm(p_values: np.ndarray | list[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the input order: the i-th smallest p times (m - i + 1),
    made non-decreasing in that order and capped at 1. Reject where adjusted p < alpha."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted
