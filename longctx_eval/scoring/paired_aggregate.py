"""Paired differences of a metric computed over a cell's samples together (CoNLL F1 summed over documents,
Span-EM as summed hits over summed links), where no per-sample difference exists.

On the pairs both runs scored (`paired_scores.join`, the same ids and designs), the difference is the metric of A's
rows minus the metric of B's rows. Its interval resamples the pairs' clusters and the pairs within them, the same
draw for both sides (`metrics/bootstrap.resample_counts`), and recomputes both; its test swaps A's and B's rows
cluster by cluster at random (under no difference a cluster's two sides are exchangeable), seeded, two-sided:
`cluster-swap permutation`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from longctx_eval.errors import LongctxError
from longctx_eval.metrics.aggregate import Metric
from longctx_eval.metrics.bootstrap import N_RESAMPLES, has_interval, resample_counts
from longctx_eval.metrics.cluster_stats import cluster_codes
from longctx_eval.results import TaskResult
from longctx_eval.scoring.paired_scores import (
    Join,
    PairedDifference,
    PairKey,
    SampleScore,
    join,
    length_groups,
    paired_differences,
)
from longctx_eval.scoring.paired_tests import CLUSTER_SWAP

PERMUTATIONS = 2000
"""Random cluster swaps per test (seeded)."""


def task_metric(task: TaskResult, name: str) -> Metric | None:
    """The task plugin's definition of metric `name` (its score fields and how they reduce), for a metric computed
    over a cell's samples together; None when the task is not installed or defines no such metric."""
    from longctx_eval.discovery import discover

    try:
        info = discover().get(task.name)
        built = info.build(dict(task.args), lengths=list(task.lengths or []) or [1024], seed=task.seed, tokenizer=None)
    except (LongctxError, KeyError, TypeError, ValueError):
        return None
    return next((m for m in built.metrics if m.name == name), None)


def per_sample(scores: Mapping[PairKey, SampleScore], metric: str) -> bool:
    """Whether `metric` is a per-sample score of these samples (else it is computed over them together)."""
    return any(metric in s.scores or metric in s.null for s in scores.values())


def paired_join(
    a: Mapping[PairKey, SampleScore], b: Mapping[PairKey, SampleScore], metric: str, task: TaskResult | None
) -> tuple[Join, Metric | None]:
    """The pairs for `metric` (`paired_scores.join`) and, for a metric computed over the samples together whose
    task defines it, its definition (the pairs then those holding its fields); (join on `metric`, None) else."""
    aggregate = None
    if not (per_sample(a, metric) and per_sample(b, metric)) and task is not None:
        aggregate = task_metric(task, metric)
    return join(a, b, aggregate.fields[-1] if aggregate is not None else metric), aggregate


def paired_rows(
    a: Mapping[PairKey, SampleScore],
    b: Mapping[PairKey, SampleScore],
    metric: str,
    aggregate: Metric | None,
    pairs: Sequence[PairKey],
    *,
    seed: int = 0,
) -> list[PairedDifference]:
    """Per length then pooled, A - B over `pairs`: per-sample differences, or the metric recomputed on each side
    where `aggregate` defines it (`aggregate_differences`)."""
    if aggregate is not None:
        return aggregate_differences(a, b, aggregate, pairs, seed=seed)
    return paired_differences(a, b, metric, seed=seed, pairs=pairs)


def aggregate_differences(
    a: Mapping[PairKey, SampleScore],
    b: Mapping[PairKey, SampleScore],
    metric: Metric,
    pairs: Sequence[PairKey],
    *,
    seed: int = 0,
) -> list[PairedDifference]:
    """Per length (sorted) then pooled: metric(A) - metric(B) over `pairs` (every pair holds `metric.fields`)."""
    return [_row(length, ks, a, b, metric, seed) for length, ks in length_groups(list(pairs), a)]


def _row(
    length: int | None,
    keys: Sequence[PairKey],
    a: Mapping[PairKey, SampleScore],
    b: Mapping[PairKey, SampleScore],
    metric: Metric,
    seed: int,
) -> PairedDifference:
    va = np.array([[a[k].scores[f] for f in metric.fields] for k in keys], dtype=np.float64)
    vb = np.array([[b[k].scores[f] for f in metric.fields] for k in keys], dtype=np.float64)
    ma, mb = float(metric.reduce(va)), float(metric.reduce(vb))
    clusters = [a[k].cluster or b[k].cluster or k[0] for k in keys]
    codes = cluster_codes(clusters, len(keys))
    codes = np.arange(len(keys)) if codes is None else codes
    count = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    ci95 = None
    if has_interval(len(keys), count):
        counts = resample_counts(codes, rng, N_RESAMPLES)
        index = np.arange(len(keys))
        diffs = []
        for row in counts:
            take = np.repeat(index, row.astype(np.int64))
            diffs.append(metric.reduce(va[take]) - metric.reduce(vb[take]))
        lo, hi = np.quantile(np.array(diffs), [0.025, 0.975])
        ci95 = (float(lo), float(hi))
    observed = ma - mb
    swapped = rng.random((PERMUTATIONS, count)) < 0.5
    extreme = 0
    for flips in swapped:
        side = flips[codes]
        pa = np.where(side[:, None], vb, va)
        pb = np.where(side[:, None], va, vb)
        extreme += abs(metric.reduce(pa) - metric.reduce(pb)) >= abs(observed) - 1e-12
    p = (extreme + 1) / (PERMUTATIONS + 1)
    per_cluster = [
        metric.reduce(va[codes == c]) - metric.reduce(vb[codes == c]) for c in range(count)
    ]  # which side each cluster favours on its own
    return PairedDifference(
        length=length,
        n=len(keys),
        mean_a=ma,
        mean_b=mb,
        difference=observed,
        ci95=ci95,
        a_better=int(sum(d > 0 for d in per_cluster)),
        b_better=int(sum(d < 0 for d in per_cluster)),
        test=CLUSTER_SWAP,
        p_value=float(min(1.0, p)),
        clusters=count,
    )
