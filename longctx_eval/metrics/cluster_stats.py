"""Samples grouped by cluster (the haystack or document they share): cluster codes, the one-way ANOVA
intra-cluster correlation and the effective number of independent units, n_eff = n / (1 + (m_bar - 1) ICC)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_NOUN = "clusters"
"""What a task's clusters are called when it declares nothing (`Task.cluster_noun`: 'haystacks', 'documents')."""


def cluster_codes(clusters: Sequence[str] | np.ndarray | None, n: int) -> np.ndarray | None:
    """Integer codes 0..G-1 of the samples' clusters (first-seen order), or None when no sample shares a cluster
    with another (then every resampling is the plain bootstrap, draw for draw)."""
    if clusters is None:
        return None
    if len(clusters) != n:
        raise ValueError(f"clusters: expected one per sample ({n}), got {len(clusters)}")
    _, first, codes = np.unique(np.asarray(clusters, dtype=object).astype(str), return_index=True, return_inverse=True)
    if first.size == n:
        return None
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[codes.reshape(-1)]


def cluster_count(clusters: Sequence[str] | None, n: int) -> int:
    """How many distinct clusters `n` samples come from (n when none is given: each sample its own)."""
    return n if clusters is None else len(set(map(str, clusters)))


def icc_anova(values: np.ndarray, codes: np.ndarray) -> float:
    """One-way ANOVA estimate of the intra-cluster correlation of `values` (one per sample) grouped by `codes`,
    clipped to [0, 1]; 0 when it is not estimable (one cluster, no within-cluster replicate, no variance)."""
    y = np.asarray(values, dtype=np.float64)
    g = np.asarray(codes, dtype=np.int64)
    n = y.size
    k = int(g.max()) + 1 if n else 0
    if k < 2 or n - k < 1:
        return 0.0
    sizes = np.bincount(g, minlength=k).astype(np.float64)
    means = np.bincount(g, weights=y, minlength=k) / sizes
    grand = y.mean()
    msb = float((sizes * (means - grand) ** 2).sum() / (k - 1))
    msw = float(((y - means[g]) ** 2).sum() / (n - k))
    m0 = (n - float((sizes**2).sum()) / n) / (k - 1)
    den = msb + (m0 - 1.0) * msw
    if den <= 0.0:
        return 0.0
    return float(min(1.0, max(0.0, (msb - msw) / den)))


def effective_n(values: np.ndarray, codes: np.ndarray | None) -> float:
    """n / (1 + (m_bar - 1) ICC): the number of independent samples the clustered `values` are worth (n itself
    when no cluster holds two samples); m_bar is the mean cluster size."""
    n = int(np.asarray(values).size)
    if codes is None or n == 0:
        return float(n)
    m_bar = n / (int(codes.max()) + 1)
    return n / (1.0 + (m_bar - 1.0) * icc_anova(values, codes))


def count_text(k: int, noun: str = DEFAULT_NOUN) -> str:
    """'4 haystacks', '1 haystack' (a plural noun loses its final 's' for one)."""
    return f"{k} {noun[:-1] if k == 1 and noun.endswith('s') else noun}"
