"""Percentile bootstrap confidence intervals, seeded so equal scores give equal intervals.

Samples that share a cluster (a haystack, a document: `sample.cluster_of`) are not independent: the intervals
then resample in two stages, clusters with replacement and then, within each drawn cluster, its samples with
replacement. When every cluster is a single sample this is the plain bootstrap over samples, draw for draw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from longctx_eval.metrics.cluster_stats import DEFAULT_NOUN, cluster_codes, count_text

N_RESAMPLES = 2000
MIN_N_FOR_INTERVAL = 5
"""Fewer samples (or pairs) than this show their value with no interval: every renderer and `compare` use it."""
MIN_CLUSTERS_FOR_INTERVAL = 2
"""Samples from fewer clusters than this show no interval either: one haystack says nothing of the next."""
BLOCK = 250
"""Resamples drawn per block by the two-stage resampling, so memory stays at BLOCK x n_samples counts."""


def has_interval(n: int, clusters: int | None = None) -> bool:
    """Whether `n` samples (or pairs) from `clusters` clusters (None: each its own) are enough to show an interval."""
    return n >= MIN_N_FOR_INTERVAL and (clusters is None or clusters >= MIN_CLUSTERS_FOR_INTERVAL)


def interval_gap(n: int, clusters: int | None = None, noun: str = DEFAULT_NOUN) -> str | None:
    """Why `n` samples from `clusters` clusters show no interval ('n < 5', '< 2 haystacks'), or None when they do."""
    if n < MIN_N_FOR_INTERVAL:
        return f"n < {MIN_N_FOR_INTERVAL}"
    if clusters is not None and clusters < MIN_CLUSTERS_FOR_INTERVAL:
        return f"< {MIN_CLUSTERS_FOR_INTERVAL} {noun}"
    return None


def no_interval_text(n: int, clusters: int | None = None, noun: str = DEFAULT_NOUN) -> str:
    """What is shown instead of an interval: 'n=2, no interval (n < 5)' or 'n=66 over 1 haystack, no interval
    (< 2 haystacks)'."""
    if n < MIN_N_FOR_INTERVAL or clusters is None:
        return f"n={n}, no interval ({interval_gap(n, clusters, noun)})"
    return f"n={n} over {count_text(clusters, noun)}, no interval ({interval_gap(n, clusters, noun)})"


def unanimous_bounds(value: float, units: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a 0/1 rate observed as all 0 or all 1 over `units` independent units
    (its clusters): the percentile bootstrap of such values has no width and would show the rate as certain."""
    edge = ((1.0 - level) / 2.0) ** (1.0 / units)
    return (edge, 1.0) if value >= 0.5 else (0.0, 1.0 - edge)


def unanimous_binary(column: np.ndarray) -> bool:
    """Whether every value is 0 or every value is 1 (a rate the percentile bootstrap cannot give a width)."""
    return column.size > 0 and bool(np.all(column == column[0])) and float(column[0]) in (0.0, 1.0)


def unanimous_ratio(arr: np.ndarray) -> float | None:
    """0.0 or 1.0 where a ratio of summed successes over summed trials (`column_ratio`: Span-EM, link recall) is
    unanimous, every row with trials scoring none of them or all of them; None otherwise."""
    if arr.ndim != 2 or arr.shape[1] != 2:
        return None
    trials = arr[:, 1] > 0
    if not trials.any():
        return None
    num, den = arr[trials, 0], arr[trials, 1]
    if bool(np.all(num == 0)):
        return 0.0
    return 1.0 if bool(np.all(num == den)) else None


def resample_counts(codes: np.ndarray, rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    """(n_resamples x n) counts of each sample in two-stage resamples: the G clusters drawn with replacement,
    then each drawn cluster's m samples drawn with replacement among its own (vectorised: one draw per slot)."""
    codes = np.asarray(codes, dtype=np.int64)
    n = codes.size
    n_groups = int(codes.max()) + 1
    sizes = np.bincount(codes, minlength=n_groups)
    members = np.argsort(codes, kind="stable")  # the rows of cluster g are members[starts[g] : starts[g] + sizes[g]]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    drawn = rng.integers(0, n_groups, size=(n_resamples, n_groups)).ravel()
    per = sizes[drawn]
    base = np.repeat(np.repeat(np.arange(n_resamples) * n, n_groups), per)  # each slot's resample, times n
    offset = np.repeat(starts[drawn], per)
    within = (rng.random(offset.size) * np.repeat(per, per)).astype(np.int64)
    slot = offset + within
    picked = slot if bool((members == np.arange(n)).all()) else members[slot]
    return np.bincount(base + picked, minlength=n_resamples * n).reshape(n_resamples, n).astype(np.float64)


def reduce_counts(values: np.ndarray, reduce: Callable[[np.ndarray], float], counts: np.ndarray) -> np.ndarray:
    """`reduce` of each resample given as a row of per-sample counts (column means as one matrix product)."""
    if getattr(reduce, "__name__", "") == "column_mean":
        return (counts @ values[:, 0]) / counts.sum(axis=1)
    index = np.arange(values.shape[0])
    return np.array([reduce(values[np.repeat(index, row.astype(np.int64))]) for row in counts], dtype=np.float64)


def replicates(
    values: np.ndarray,
    reduce: Callable[[np.ndarray], float],
    rng: np.random.Generator,
    n_resamples: int = N_RESAMPLES,
    clusters: Sequence[str] | None = None,
) -> np.ndarray:
    """`reduce` of `n_resamples` resamples (with replacement) of the rows of `values` (n_samples x n_fields); the
    one home of the resampling (intervals, contrasts, effective lengths), vectorised for `column_mean`.
    `clusters` (one name per row) makes it two-stage; all distinct (or None), it is the plain bootstrap."""
    n = values.shape[0]
    codes = cluster_codes(clusters, n)
    if codes is None:
        idx = rng.integers(0, n, size=(n_resamples, n))
        if getattr(reduce, "__name__", "") == "column_mean":
            return values[idx, 0].mean(axis=1)
        return np.array([reduce(values[row]) for row in idx], dtype=np.float64)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, BLOCK):
        b = min(BLOCK, n_resamples - start)
        out[start : start + b] = reduce_counts(values, reduce, resample_counts(codes, rng, b))
    return out


def bootstrap_ci(
    values: np.ndarray,
    reduce: Callable[[np.ndarray], float],
    *,
    level: float = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    clusters: Sequence[str] | None = None,
) -> tuple[float, float]:
    """A `level` percentile-bootstrap interval of `reduce(values)`, resampling rows (clusters, then rows within
    them, when `clusters` names each row's); degenerate (the value twice) for n < 2 or a single cluster."""
    arr = values if values.ndim == 2 else values.reshape(-1, 1)
    n = arr.shape[0]
    if n == 0:
        return (0.0, 0.0)
    units = n if clusters is None else len(set(map(str, clusters)))
    if n == 1 or units == 1:
        v = float(reduce(arr))
        return (v, v)
    if getattr(reduce, "__name__", "") == "column_mean" and unanimous_binary(arr[:, 0]):
        return unanimous_bounds(float(arr[0, 0]), units, level)
    if getattr(reduce, "__name__", "") == "column_ratio" and (edge := unanimous_ratio(arr)) is not None:
        kept = arr[:, 1] > 0  # the units that had any trial: a document with no such link says nothing
        units = int(kept.sum()) if clusters is None else len({str(c) for c, k in zip(clusters, kept, strict=True) if k})
        return unanimous_bounds(edge, units, level) if units > 1 else (edge, edge)
    stats = replicates(arr, reduce, np.random.default_rng(seed), n_resamples, clusters)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))
