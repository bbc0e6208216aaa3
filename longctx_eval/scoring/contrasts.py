"""A task's contrasts computed: a metric on two slices of the samples, their difference and its interval."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.metrics.aggregate import Metric
from longctx_eval.metrics.bootstrap import N_RESAMPLES, replicates
from longctx_eval.metrics.contrast import Contrast
from longctx_eval.results import ContrastResult
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
    side b), each side resampled on its own with a seeded generator.
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
            sides = [
                np.array(
                    [
                        [sc.values[f] for f in metric.fields]
                        for s, sc in pool
                        if (length is None or length_of(s) == length)
                        and same_value(s.metadata.get(c.key), wanted)
                        and all(f in sc.values for f in metric.fields)
                    ],
                    dtype=np.float64,
                ).reshape(-1, len(metric.fields))
                for wanted in (c.a, c.b)
            ]
            if any(side.shape[0] == 0 for side in sides):
                continue
            va, vb = (float(metric.reduce(side)) for side in sides)
            ra, rb = (
                replicates(side, metric.reduce, np.random.default_rng([seed, ci, li, k]), n_resamples)
                for k, side in enumerate(sides)
            )
            lo, hi = np.quantile(ra - rb, [0.025, 0.975])
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
                    difference=round(va - vb, 6),
                    ci95=(round(float(lo), 6), round(float(hi), 6)),
                )
            )
    return out
