"""Slicing results by a sample-metadata key: which values count, how they compare, and the per-value rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from longctx_eval.metrics.aggregate import Metric
from longctx_eval.results import MetricResult, SliceValue
from longctx_eval.sample import Sample, Score, cluster_of
from longctx_eval.scoring.rows import metric_row

Scored = Sequence[tuple[Sample, Score]]
ValueKey = tuple[int, Any]
"""A slice value made comparable: (0, bool) | (1, number) | (2, str); 1 and True stay apart, 2 and 2.0 do not."""


def value_key(value: Any) -> ValueKey | None:
    """The comparable form of a metadata value, or None when it cannot slice (missing, None, a list, NaN)."""
    if isinstance(value, bool):
        return (0, value)
    if isinstance(value, int | float):
        return (1, value) if math.isfinite(value) else None
    if isinstance(value, str):
        return (2, value)
    return None


def same_value(value: Any, wanted: SliceValue) -> bool:
    """Whether a metadata value equals a declared slice value (a bool matches only a bool)."""
    key = value_key(value)
    return key is not None and key == value_key(wanted)


def evaluated(scored: Scored) -> list[tuple[Sample, Score]]:
    """The samples that fit the model's window and whose request did not fail: every breakdown is over these."""
    return [(s, sc) for s, sc in scored if not sc.values.get("over_length") and not sc.values.get("error")]


def length_of(sample: Sample) -> int:
    """The sample's target length (its length stratum)."""
    return int(sample.metadata["target_tokens"])


def slice_rows(scored: Scored, metrics: Sequence[Metric], keys: Sequence[str]) -> tuple[list[MetricResult], list[str]]:
    """Every metric per value of each key, per length and pooled over lengths (depths pooled); plus warnings.

    Samples lacking a key (or holding a value that cannot slice: None, a list, NaN) are left out of that key's
    rows; a warning counts the unusable values. Rows are ordered by key (as declared), value, then length
    (pooled first). Intervals resample the samples' clusters, then the samples within them.
    """
    rows: list[MetricResult] = []
    warnings: list[str] = []
    pool = evaluated(scored)
    for key in dict.fromkeys(keys):
        groups: dict[ValueKey, dict[int | None, list[tuple[Score, str]]]] = {}
        shown: dict[ValueKey, SliceValue] = {}
        unusable = 0
        for sample, score in pool:
            if key not in sample.metadata or sample.metadata[key] is None:
                continue
            vkey = value_key(sample.metadata[key])
            if vkey is None:
                unusable += 1
                continue
            shown.setdefault(vkey, sample.metadata[key])
            by_length = groups.setdefault(vkey, {})
            item = (score, cluster_of(sample))
            by_length.setdefault(None, []).append(item)
            by_length.setdefault(length_of(sample), []).append(item)
        if unusable:
            warnings.append(
                f"slice {key!r}: {unusable} sample(s) hold a value that is not a bool, number or string; left out"
            )
        for vkey in sorted(groups):
            by_length = groups[vkey]
            for length in sorted(by_length, key=lambda n: (n is not None, n or 0)):
                items = by_length[length]
                scores, clusters = [s for s, _ in items], [c for _, c in items]
                for m in metrics:
                    row = metric_row(m, scores, length, None, {key: shown[vkey]}, clusters)
                    if row is not None:
                        rows.append(row)
    return rows, warnings
