"""Retrieval metrics: a gold span counts as found at K when a top-K chunk covers all of it."""

from __future__ import annotations

from collections.abc import Sequence

from longctx_eval.sample import Hit


def first_covering_rank(hits: Sequence[Hit], start: int, end: int) -> int | None:
    """1-based rank of the first hit whose char span fully covers [start, end), else None."""
    for rank, hit in enumerate(hits, 1):
        if hit.char_start <= start and end <= hit.char_end:
            return rank
    return None


def recall_at(hits: Sequence[Hit], start: int, end: int, ks: Sequence[int]) -> dict[str, float]:
    """recall@k for each k and the reciprocal rank of the covering chunk (0 when not retrieved)."""
    rank = first_covering_rank(hits, start, end)
    out = {f"recall@{k}": float(rank is not None and rank <= k) for k in ks}
    out["mrr"] = 1.0 / rank if rank else 0.0
    return out
