"""A task's curves computed: per length and pooled, point i = mean of field i over the samples carrying it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from longctx_eval.metrics.bootstrap import N_RESAMPLES
from longctx_eval.metrics.curves import Curve
from longctx_eval.results import CurvePoint, CurveResult
from longctx_eval.sample import cluster_of
from longctx_eval.scoring.resample import column_means_ci
from longctx_eval.scoring.slicing import Scored, evaluated, length_of


def curve_results(scored: Scored, curves: Sequence[Curve], n_resamples: int = N_RESAMPLES) -> list[CurveResult]:
    """Each curve pooled over lengths, then per length; points no sample carries are left out, and a curve
    with no point at a length is omitted there. Every point has a 95% bootstrap interval (clusters, then the
    samples within them, resampled jointly for all points: one vectorised pass per curve and length) and
    counts its samples and their clusters."""
    pool = evaluated(scored)
    groups: dict[int | None, list[tuple[Mapping[str, float], str]]] = {
        None: [(sc.values, cluster_of(s)) for s, sc in pool]
    }
    for sample, score in pool:
        groups.setdefault(length_of(sample), []).append((score.values, cluster_of(sample)))
    out = []
    for c in curves:
        for length in sorted(groups, key=lambda n: (n is not None, n or 0)):
            carrying = [(v, k) for v, k in groups[length] if any(f in v for f in c.fields)]
            if not carrying:
                continue
            matrix = np.array([[float(v.get(f, np.nan)) for f in c.fields] for v, _ in carrying], dtype=np.float64)
            names = np.array([k for _, k in carrying], dtype=object)
            means, n, lo, hi = column_means_ci(matrix, n_resamples=n_resamples, clusters=list(names))
            carried = np.isfinite(matrix)
            spread = [len(set(names[carried[:, j]])) for j in range(matrix.shape[1])]
            points = [
                CurvePoint(
                    x=x,
                    value=round(float(m), 6),
                    n=int(k),
                    clusters=g,
                    ci95=(round(float(a), 6), round(float(b), 6)),
                )
                for x, m, k, g, a, b in zip(c.x, means, n, spread, lo, hi, strict=True)
                if k > 0 and np.isfinite([m, a, b]).all()
            ]
            if points:
                out.append(CurveResult(name=c.name, length=length, x_label=c.x_label, y_label=c.y_label, points=points))
    return out
