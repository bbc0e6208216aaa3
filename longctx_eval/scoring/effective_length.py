"""Effective length: the longest evaluated length up to which a score stays at or above a threshold.

Absolute (RULER): the threshold is fixed, 0.856 by default (RULER's 85.6 on a 0-1 scale). Relative (NoLiMa):
the threshold is a fraction (0.85 by default) of the model's own score at its shortest evaluated length. The
score must hold at *every* evaluated length up to the effective length, so a dip in the middle stops it
there. 0 means the score was below the threshold already at the shortest evaluated length (and, for the
relative kind, a model scoring 0 there has effective length 0). The interval resamples within each length
(its clusters, then the samples within them), recomputes the effective length, and takes the 2.5/97.5
percentiles of the replicates (observed lengths, never interpolated ones); `min_n` and `min_clusters` say
whether it may be shown (`metrics.bootstrap.has_interval` at the thinnest length).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from longctx_eval.errors import ConfigError
from longctx_eval.metrics.aggregate import Metric
from longctx_eval.metrics.bootstrap import N_RESAMPLES, replicates
from longctx_eval.metrics.cluster_stats import cluster_count
from longctx_eval.results import Coverage, EffectiveLength

DEFAULT_THRESHOLD = 0.856
DEFAULT_FRACTION = 0.85
TOLERANCE = 1e-9
"""A score this close below the threshold counts as reaching it (17/20 against 0.85 x 1.0 is not a miss)."""


def check_fraction(value: float, where: str) -> float:
    """A threshold or fraction on the 0-1 scale; a percentage (85.6) is an error that says what to give."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where} {value!r}: expected a fraction in (0, 1], e.g. 0.856 for 85.6%")
    if 1 < value <= 100:
        raise ConfigError(f"{where} {value:g}: expected a fraction in (0, 1]; give {value / 100:g} for {value:g}%")
    if not 0 < value <= 1:
        raise ConfigError(f"{where} {value:g}: expected a fraction in (0, 1], e.g. 0.856 for 85.6%")
    return float(value)


@dataclass(frozen=True)
class EffectiveLengthConfig:
    """The thresholds effective lengths are computed with (`--effective-threshold`, `--effective-relative`)."""

    threshold: float = DEFAULT_THRESHOLD
    """Absolute: the score (0-1) to stay at or above."""
    fraction: float = DEFAULT_FRACTION
    """Relative: the share of the model's own score at its shortest evaluated length to stay at or above."""

    def __post_init__(self) -> None:
        check_fraction(self.threshold, "--effective-threshold")
        check_fraction(self.fraction, "--effective-relative")


def longest_holding(scores: np.ndarray, thresholds: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
    """Per row of `scores` (rows x lengths, lengths ascending): the longest length up to which every score is at
    or above that row's threshold; 0 when the first already falls short (or the threshold is not positive)."""
    thr = np.asarray(thresholds, dtype=np.float64).reshape(-1, 1)
    ok = (scores >= thr - TOLERANCE) & (thr > 0)
    held = np.logical_and.accumulate(ok, axis=1).sum(axis=1)
    table = np.array([0, *lengths], dtype=np.int64)
    return table[held]


def effective_lengths(
    per_length: Mapping[int, np.ndarray],
    metric: Metric,
    config: EffectiveLengthConfig,
    coverage: Sequence[Coverage] = (),
    *,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    clusters: Mapping[int, Sequence[str]] | None = None,
) -> list[EffectiveLength]:
    """Absolute and relative effective length of `metric` from each length's (samples x fields) score array.

    Empty when fewer than two lengths were evaluated or the metric is not a 0-1 score at every length.
    `coverage` says which longer planned lengths were over the model's window (`limited_by_window`);
    `clusters` names each length's samples' clusters (None: each sample its own).
    """
    clusters = clusters or {}
    lengths = sorted(n for n, arr in per_length.items() if arr.shape[0] > 0)
    if len(lengths) < 2:
        return []
    values = np.array([float(metric.reduce(per_length[n])) for n in lengths])
    if not (np.isfinite(values).all() and values.min() >= 0.0 and values.max() <= 1.0):
        return []
    reps = np.stack(
        [
            replicates(per_length[n], metric.reduce, np.random.default_rng([seed, i]), n_resamples, clusters.get(n))
            for i, n in enumerate(lengths)
        ],
        axis=1,
    )
    min_n = min(per_length[n].shape[0] for n in lengths)
    min_clusters = min(cluster_count(clusters.get(n), per_length[n].shape[0]) for n in lengths)
    over = sorted({c.length for c in coverage if c.depth is None and c.evaluated == 0 and c.over_length > 0})
    base = float(values[0])
    kinds: list[tuple[Literal["absolute", "relative"], float, np.ndarray, dict[str, Any]]] = [
        ("absolute", config.threshold, np.full(reps.shape[0], config.threshold), {}),
        (
            "relative",
            config.fraction * base,
            config.fraction * reps[:, 0],
            {"fraction": config.fraction, "base_length": lengths[0], "base_value": round(base, 6)},
        ),
    ]
    out = []
    for kind, threshold, rep_thresholds, extra in kinds:
        value = int(longest_holding(values[None, :], np.array([threshold]), lengths)[0])
        spread = longest_holding(reps, rep_thresholds, lengths)
        lo, hi = np.quantile(spread, [0.025, 0.975], method="inverted_cdf")
        out.append(
            EffectiveLength(
                kind=kind,
                metric=metric.name,
                threshold=round(threshold, 6),
                value=value,
                ci95=(int(lo), int(hi)),
                min_n=min_n,
                min_clusters=min_clusters,
                lengths=lengths,
                limited_by_window=value == lengths[-1] and any(n > value for n in over),
                over_window_lengths=over,
                **extra,
            )
        )
    return out
