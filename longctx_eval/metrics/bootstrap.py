"""Percentile bootstrap confidence intervals over samples, seeded so equal scores give equal intervals."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

N_RESAMPLES = 2000
MIN_N_FOR_INTERVAL = 5
"""Fewer samples (or pairs) than this show their value with no interval: every renderer and `compare` use it."""


def has_interval(n: int) -> bool:
    """Whether `n` samples (or pairs) are enough to show an interval."""
    return n >= MIN_N_FOR_INTERVAL


def no_interval_text(n: int) -> str:
    """What is shown instead of an interval over `n` samples: 'n=2, no interval (n < 5)'."""
    return f"n={n}, no interval (n < {MIN_N_FOR_INTERVAL})"


def replicates(
    values: np.ndarray, reduce: Callable[[np.ndarray], float], rng: np.random.Generator, n_resamples: int = N_RESAMPLES
) -> np.ndarray:
    """`reduce` of `n_resamples` resamples (with replacement) of the rows of `values` (n_samples x n_fields); the
    one home of the resampling (intervals, contrasts, effective lengths), vectorised for `column_mean`."""
    n = values.shape[0]
    idx = rng.integers(0, n, size=(n_resamples, n))
    if getattr(reduce, "__name__", "") == "column_mean":
        return values[idx, 0].mean(axis=1)
    return np.array([reduce(values[row]) for row in idx], dtype=np.float64)


def bootstrap_ci(
    values: np.ndarray,
    reduce: Callable[[np.ndarray], float],
    *,
    level: float = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """A `level` percentile-bootstrap interval of `reduce(values)`, resampling rows; degenerate for n < 2."""
    arr = values if values.ndim == 2 else values.reshape(-1, 1)
    n = arr.shape[0]
    if n == 0:
        return (0.0, 0.0)
    if n == 1:
        v = float(reduce(arr))
        return (v, v)
    stats = replicates(arr, reduce, np.random.default_rng(seed), n_resamples)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))
