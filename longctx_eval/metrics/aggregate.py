"""Metrics over per-sample scores: a named reduction of one or more score fields, with a bootstrap CI (over
clusters, then samples within them, when the samples name their clusters)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from longctx_eval.metrics.bootstrap import bootstrap_ci

Reduce = Callable[[np.ndarray], float]
"""Takes an (n_samples, n_fields) array, returns the metric; the bootstrap resamples its rows."""


@dataclass(frozen=True)
class Metric:
    """Reduces the score fields `fields` over the samples that carry all of them; reported as `name`."""

    name: str
    fields: tuple[str, ...]
    reduce: Reduce

    @property
    def field(self) -> str:
        """The first field (the only one for mean and rate)."""
        return self.fields[0]

    def compute(
        self, rows: Sequence[Sequence[float]], seed: int = 0, clusters: Sequence[str] | None = None
    ) -> tuple[float, tuple[float, float]]:
        """The metric value and its 95% percentile-bootstrap confidence interval over samples: over `clusters`
        (one name per row) and the samples within them when given (two-stage), else over samples."""
        arr = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(self.fields))
        return float(self.reduce(arr)), bootstrap_ci(arr, self.reduce, seed=seed, clusters=clusters)


def column_mean(a: np.ndarray) -> float:
    """Mean of the first column (0 for no rows)."""
    return float(a[:, 0].mean()) if a.shape[0] else 0.0


def column_ratio(a: np.ndarray) -> float:
    """sum(first column) / sum(second column); 0 when the denominator is 0."""
    den = a[:, 1].sum()
    return float(a[:, 0].sum() / den) if den else 0.0


def mean(field: str, name: str | None = None) -> Metric:
    """Mean of a score field (accuracy, recall@k, ...)."""
    return Metric(name=name or field, fields=(field,), reduce=column_mean)


def rate(field: str, name: str | None = None) -> Metric:
    """Share of samples whose 0/1 field is set (e.g. empty answers, over-length prompts)."""
    return Metric(name=name or f"{field}_rate", fields=(field,), reduce=column_mean)


def ratio(numerator: str, denominator: str, name: str) -> Metric:
    """Micro-average: sum of numerators over sum of denominators (e.g. recall summed over documents)."""
    return Metric(name=name, fields=(numerator, denominator), reduce=column_ratio)


def custom(name: str, fields: Sequence[str], reduce: Reduce) -> Metric:
    """Any reduction of several fields, e.g. an F1 from summed numerators and denominators."""
    return Metric(name=name, fields=tuple(fields), reduce=reduce)
