"""Bootstrap intervals of many column means at once (seeded); one metric's replicates are
`metrics.bootstrap.replicates`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from longctx_eval.metrics.bootstrap import BLOCK, N_RESAMPLES, resample_counts, unanimous_binary, unanimous_bounds
from longctx_eval.metrics.cluster_stats import cluster_codes


def column_means_ci(
    values: np.ndarray,
    *,
    level: float = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    clusters: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per column of `values` (samples x columns, NaN = the sample lacks that field): mean, n and a percentile
    bootstrap interval, resampling samples (rows) jointly for every column; with `clusters` (one name per row)
    clusters first, then rows within each drawn cluster (`metrics.bootstrap.resample_counts`).

    One resample is a row of counts; column sums are then a matrix product, so 100 columns cost about as much
    as one. Columns no sample carries get NaN; a column whose carrying rows all lie in one cluster gets its
    mean as both bounds (no interval: `has_interval`); a column of all 0 or all 1 gets the exact bound over its
    clusters (`metrics.bootstrap.unanimous_bounds`), where the bootstrap has no width.
    """
    arr = np.asarray(values, dtype=np.float64)
    carried = np.isfinite(arr)
    filled = np.where(carried, arr, 0.0)
    n_col = carried.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = filled.sum(axis=0) / n_col
    lo, hi = means.copy(), means.copy()
    n = arr.shape[0]
    if n < 2:
        return means, n_col, lo, hi
    codes = cluster_codes(clusters, n)
    rng = np.random.default_rng(seed)
    stats = np.empty((n_resamples, arr.shape[1]))
    weights = carried.astype(np.float64)
    complete = bool(carried.all())
    for start in range(0, n_resamples, BLOCK):
        b = min(BLOCK, n_resamples - start)
        if codes is None:
            idx = rng.integers(0, n, size=(b, n))
            counts = np.bincount((idx + n * np.arange(b)[:, None]).ravel(), minlength=b * n).reshape(b, n)
            counts = counts.astype(np.float64)
            total = float(n)
        else:
            counts = resample_counts(codes, rng, b)
            total = counts.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            # every row carries every column: the denominator is the resample's size, one product is enough
            stats[start : start + b] = (counts @ filled) / (total if complete else counts @ weights)
    alpha = (1.0 - level) / 2.0
    some = n_col > 0
    if codes is not None:  # a column carried within one cluster only has no interval
        spread = np.array([np.unique(codes[carried[:, j]]).size for j in range(arr.shape[1])])
        some &= spread >= 2
    if some.any():
        q = np.nanquantile(stats[:, some], [alpha, 1.0 - alpha], axis=0)
        lo[some], hi[some] = q[0], q[1]
    for j in np.flatnonzero(some):  # all 0 or all 1: the exact bound over its independent units, not [x, x]
        column = arr[carried[:, j], j]
        if unanimous_binary(column):
            units = int(n_col[j]) if codes is None else int(np.unique(codes[carried[:, j]]).size)
            lo[j], hi[j] = unanimous_bounds(float(column[0]), units, level)
    return means, n_col, lo, hi
