"""Retrieval metrics: a gold span counts as found at K when a top-K chunk covers all of it.

Per query: recall@K (share of gold spans covered within the top K), MRR, nDCG@10, the score at each rank and the
KL divergence between the gold relevance distribution and the softmax of the scores (docs/retrieval.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

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


def covering_ranks(hits: Sequence[Hit], spans: Sequence[tuple[int, int]]) -> list[int | None]:
    """For each gold span, the 1-based rank of the first hit covering it whole (None when none does)."""
    return [first_covering_rank(hits, int(start), int(end)) for start, end in spans]


def recall_curve(ranks: Sequence[int | None], ks: Sequence[int]) -> dict[str, float]:
    """recall@K for each K: the share of gold spans whose covering rank is at most K."""
    if not ranks:
        raise ValueError("recall_curve: expected at least one gold span")
    return {f"recall@{k}": sum(r is not None and r <= k for r in ranks) / len(ranks) for k in ks}


def _relevant(hits: Sequence[Hit], spans: Sequence[tuple[int, int]]) -> list[list[int]]:
    """For each hit, the indices of the gold spans it covers whole."""
    return [[j for j, (s, e) in enumerate(spans) if h.char_start <= s and e <= h.char_end] for h in hits]


def reciprocal_rank(hits: Sequence[Hit], spans: Sequence[tuple[int, int]]) -> float:
    """1 / the rank of the first hit covering any gold span whole; 0 when no returned hit does."""
    for rank, covered in enumerate(_relevant(hits, spans), 1):
        if covered:
            return 1.0 / rank
    return 0.0


def ndcg_at(hits: Sequence[Hit], spans: Sequence[tuple[int, int]], k: int = 10) -> float:
    """nDCG@k with binary gains: the hit at rank r gains 1 when it covers a gold span no higher-ranked hit covered.

    DCG = sum of gain_r / log2(r + 1) over r <= k; the ideal DCG puts one new span at each of ranks
    1..min(number of spans, k). A span counted once keeps overlapping chunks from scoring it twice, so 0 <= nDCG <= 1.
    """
    if not spans:
        raise ValueError("ndcg_at: expected at least one gold span")
    seen: set[int] = set()
    dcg = 0.0
    for rank, covered in enumerate(_relevant(hits[:k], spans), 1):
        new = [j for j in covered if j not in seen]
        if new:
            dcg += 1.0 / math.log2(rank + 1)
            seen.update(new)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(len(spans), k) + 1))
    return dcg / ideal


def kl_bits(hits: Sequence[Hit], spans: Sequence[tuple[int, int]], temperature: float | None = 1.0) -> float | None:
    """KL(P || Q) in bits over the returned hits; None when no returned hit covers a gold span.

    P: the gold relevance distribution, uniform over the hits that cover a gold span whole (0 elsewhere).
    Q: softmax(score / T) over the same hits. T = `temperature`, or (None) the population standard deviation of
    the returned scores (scale-free; Q is uniform when every score is equal). No smoothing is needed: terms with
    P = 0 contribute 0, and Q > 0 always (computed in log space, so no probability underflows to 0).
    """
    relevant = [bool(c) for c in _relevant(hits, spans)]
    n_rel = sum(relevant)
    if not n_rel:
        return None
    scores = np.asarray([h.score for h in hits], dtype=np.float64)
    t = float(np.std(scores)) if temperature is None else float(temperature)
    if t <= 0 or not math.isfinite(t):
        logits = np.zeros_like(scores)
    else:
        logits = scores / t
    top = float(logits.max())
    log_q = logits - (top + math.log(float(np.exp(logits - top).sum())))
    log_p = math.log(1.0 / n_rel)
    kl = sum(log_p - float(lq) for lq, rel in zip(log_q, relevant, strict=True) if rel) / n_rel
    return max(0.0, kl / math.log(2))


def ranking_scores(
    hits: Sequence[Hit], spans: Sequence[tuple[int, int]], ks: Sequence[int], ndcg_k: int = 10
) -> dict[str, float]:
    """Every per-query retrieval field: recall@K (share of spans covered within top K), mrr, ndcg@k,
    score@r (the system's score at rank r, for the ranks returned, up to max(ks)), kl_bits (T = 1) and
    kl_bits_std (T = the scores' standard deviation); the two KL fields only when a returned hit is relevant."""
    out = recall_curve(covering_ranks(hits, spans), ks)
    out["mrr"] = reciprocal_rank(hits, spans)
    out[f"ndcg@{ndcg_k}"] = ndcg_at(hits, spans, ndcg_k)
    depth = max(ks)
    for rank, hit in enumerate(hits[:depth], 1):
        out[f"score@{rank}"] = float(hit.score)
    returned = hits[:depth]
    for name, temperature in (("kl_bits", 1.0), ("kl_bits_std", None)):
        value = kl_bits(returned, spans, temperature)
        if value is not None:
            out[name] = value
    return out
