"""One metric over one group of scored samples, as a run-file row (value, n, clusters, n_eff, 95% bootstrap
interval over clusters and the samples within them)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from longctx_eval.metrics.aggregate import Metric
from longctx_eval.metrics.cluster_stats import cluster_codes, effective_n
from longctx_eval.results import MetricResult, SliceValue
from longctx_eval.sample import Score


def metric_row(
    metric: Metric,
    scores: Sequence[Score],
    length: int | None,
    depth: float | None,
    slice_: dict[str, SliceValue] | None = None,
    clusters: Sequence[str] | None = None,
) -> MetricResult | None:
    """The metric over the scores carrying all its fields; None when none does or the value is not finite.
    `clusters` names each score's cluster (None: each its own), for the interval, the count and n_eff."""
    keep = [i for i, s in enumerate(scores) if all(f in s.values for f in metric.fields)]
    if not keep:
        return None  # a metric absent from every sample of a group is omitted, never filled with a sentinel
    vals = [[scores[i].values[f] for f in metric.fields] for i in keep]
    names = [str(i) for i in keep] if clusters is None else [str(clusters[i]) for i in keep]
    value, ci = metric.compute(vals, clusters=names)
    if not all(math.isfinite(v) for v in (value, *ci)):
        return None  # e.g. a perplexity over zero tokens: no number rather than a NaN in the run file
    codes = cluster_codes(names, len(names))
    n_eff = None
    if codes is not None and len(metric.fields) == 1 and int(codes.max()) >= 1:  # one cluster: no ICC to estimate
        n_eff = round(effective_n(np.array([v[0] for v in vals]), codes), 2)
    return MetricResult(
        metric=metric.name,
        length=length,
        depth=depth,
        value=round(value, 6),
        n=len(vals),
        clusters=len(set(names)),
        n_eff=n_eff,
        ci95=(round(ci[0], 6), round(ci[1], 6)),
        slice=slice_,
    )
