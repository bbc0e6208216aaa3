"""A task's contrasts computed: a metric on two slices of the samples, their difference and its interval."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.metrics.aggregate import Metric
from longctx_eval.metrics.bootstrap import BLOCK, N_RESAMPLES, reduce_counts, replicates, resample_counts
from longctx_eval.metrics.cluster_stats import cluster_codes
from longctx_eval.metrics.contrast import Contrast
from longctx_eval.results import ContrastResult
from longctx_eval.sample import cluster_of
from longctx_eval.scoring.slicing import Scored, evaluated, length_of, same_value


def contrast_results(
    scored: Scored,
    contrasts: Sequence[Contrast],
    metrics: Mapping[str, Metric],
    *,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> list[ContrastResult]:
    """Each contrast pooled over lengths, then per length; omitted where either side has no sample.

    The interval is the 2.5/97.5 percentiles of (metric on a resample of side a) - (metric on a resample of
    side b): each side resampled on its own with a seeded generator when no two samples share a cluster, else
    the clusters of both sides together (a haystack holding samples of both sides is drawn for both), then the
    samples within each drawn cluster (`sample.cluster_of`).
    """
    pool = evaluated(scored)
    lengths = sorted({length_of(s) for s, _ in pool})
    out = []
    for ci, c in enumerate(contrasts):
        metric = metrics.get(c.metric)
        if metric is None:
            raise TaskDefinitionError(
                f"contrast {c.name!r} names metric {c.metric!r}; the task's metrics are {sorted(metrics)}"
            )
        for li, length in enumerate([None, *lengths]):
            members = [
                [
                    (s, sc)
                    for s, sc in pool
                    if (length is None or length_of(s) == length)
                    and same_value(s.metadata.get(c.key), wanted)
                    and all(f in sc.values for f in metric.fields)
                ]
                for wanted in (c.a, c.b)
            ]
            sides = [
                np.array([[sc.values[f] for f in metric.fields] for _, sc in side], dtype=np.float64).reshape(
                    -1, len(metric.fields)
                )
                for side in members
            ]
            if any(side.shape[0] == 0 for side in sides):
                continue
            clusters = [[cluster_of(s) for s, _ in side] for side in members]
            va, vb = (float(metric.reduce(side)) for side in sides)
            codes = cluster_codes([*clusters[0], *clusters[1]], sides[0].shape[0] + sides[1].shape[0])
            if codes is None:
                ra, rb = (
                    replicates(side, metric.reduce, np.random.default_rng([seed, ci, li, k]), n_resamples)
                    for k, side in enumerate(sides)
                )
                lo, hi = np.quantile(ra - rb, [0.025, 0.975])
            else:
                ra, rb, both = _joint_replicates(
                    sides, metric, codes, np.random.default_rng([seed, ci, li]), n_resamples
                )
                lo, hi = np.quantile((ra - rb)[both], [0.025, 0.975]) if both.any() else (math.nan, math.nan)
            if not all(math.isfinite(v) for v in (va, vb, lo, hi)):
                continue
            out.append(
                ContrastResult(
                    name=c.name,
                    metric=c.metric,
                    key=c.key,
                    a=c.a,
                    b=c.b,
                    length=length,
                    value_a=round(va, 6),
                    n_a=sides[0].shape[0],
                    value_b=round(vb, 6),
                    n_b=sides[1].shape[0],
                    clusters_a=len(set(clusters[0])),
                    clusters_b=len(set(clusters[1])),
                    difference=round(va - vb, 6),
                    ci95=(round(float(lo), 6), round(float(hi), 6)),
                )
            )
    return out


def _joint_replicates(
    sides: Sequence[np.ndarray], metric: Metric, codes: np.ndarray, rng: np.random.Generator, n_resamples: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The metric on each side of `n_resamples` two-stage resamples of both sides' samples together (`codes`:
    the cluster of each row of side a, then of side b), and which resamples drew a sample of both sides."""
    na = sides[0].shape[0]
    out = np.full((2, n_resamples), np.nan)
    both = np.ones(n_resamples, dtype=bool)
    for start in range(0, n_resamples, BLOCK):
        b = min(BLOCK, n_resamples - start)
        counts = resample_counts(codes, rng, b)
        for k, (side, part) in enumerate(((sides[0], counts[:, :na]), (sides[1], counts[:, na:]))):
            drawn = part.sum(axis=1) > 0
            both[start : start + b] &= drawn
            if drawn.any():
                out[k, start : start + b][drawn] = reduce_counts(side, metric.reduce, part[drawn])
    return out[0], out[1], both
