"""One metric over one group of scored samples, as a run-file row (value, n, 95% bootstrap interval)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from longctx_eval.metrics.aggregate import Metric
from longctx_eval.results import MetricResult, SliceValue
from longctx_eval.sample import Score


def metric_row(
    metric: Metric,
    scores: Sequence[Score],
    length: int | None,
    depth: float | None,
    slice_: dict[str, SliceValue] | None = None,
) -> MetricResult | None:
    """The metric over the scores carrying all its fields; None when none does or the value is not finite."""
    vals = [[s.values[f] for f in metric.fields] for s in scores if all(f in s.values for f in metric.fields)]
    if not vals:
        return None  # a metric absent from every sample of a group is omitted, never filled with a sentinel
    value, ci = metric.compute(vals)
    if not all(math.isfinite(v) for v in (value, *ci)):
        return None  # e.g. a perplexity over zero tokens: no number rather than a NaN in the run file
    return MetricResult(
        metric=metric.name,
        length=length,
        depth=depth,
        value=round(value, 6),
        n=len(vals),
        ci95=(round(ci[0], 6), round(ci[1], 6)),
        slice=slice_,
    )
