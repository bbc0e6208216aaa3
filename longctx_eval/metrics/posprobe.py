"""posprobe metrics (the position-extrapolation probe) over exact attention rows: NPB, LAE, rho, hit rate,
needle and sink mass; and the answer-NLL read-outs (per step, pooled, median and clipped perplexity).

Pure numpy. A "row" is one query's softmax attention over the keys 0..L-1 (zeros past the query).
Definitions follow docs/posprobe.md: entropies in bits, positions in tokens, NPB normalised by L.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def entropy_bits(rows: np.ndarray) -> np.ndarray:
    """Shannon entropy in bits over the last axis, accumulated in float64, with 0 * log 0 = 0."""
    p = np.asarray(rows, dtype=np.float64)
    logp = np.log2(np.where(p > 0, p, 1.0))
    return -(p * logp).sum(axis=-1)


def normalized_entropy(rows: np.ndarray, query_positions: Sequence[int]) -> np.ndarray:
    """Entropy divided by log2(q + 1), the entropy of uniform attention over keys 0..q; 0 for q = 0."""
    h = entropy_bits(rows)
    cap = np.log2(np.asarray(query_positions, dtype=np.float64) + 1.0)
    return np.divide(h, cap, out=np.zeros_like(h), where=cap > 0)


def argmax_first(rows: np.ndarray) -> np.ndarray:
    """Index of the largest weight along the last axis; ties go to the smaller index."""
    return np.argmax(np.asarray(rows), axis=-1)


def npb_terms(argmax: Sequence[int], targets: Sequence[int], length: int) -> dict[str, float]:
    """NPB = mean |argmax - target| / L, with its signed form (positive = recency) and the hit rate."""
    a = np.asarray(argmax, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    if a.shape != t.shape or a.size == 0 or length <= 0:
        raise ValueError(f"npb_terms: argmax {a.shape} and targets {t.shape} must match, non-empty; L={length}")
    diff = (a - t) / length
    return {"npb": float(np.abs(diff).mean()), "npb_signed": float(diff.mean()), "hit": float((a == t).mean())}


def mass_at(rows: np.ndarray, positions: Sequence[int]) -> np.ndarray:
    """Attention weight of row k on position positions[k] (rows: (..., K, L))."""
    r = np.asarray(rows)
    idx = np.asarray(positions, dtype=np.int64)
    return np.take_along_axis(r, np.broadcast_to(idx[..., None], (*r.shape[:-1], 1)), axis=-1)[..., 0]


def sink_mass(rows: np.ndarray) -> float:
    """Mean attention weight on the first token (the BOS / attention-sink position)."""
    return float(np.asarray(rows, dtype=np.float64)[..., 0].mean())


def retrieval_scores(argmax: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Wu et al.'s retrieval score per head: share of (needle, step) pairs whose argmax is the copied token.

    argmax: (n_layers, n_heads, N, K) per-head argmax positions; targets: (N, K) copied-token positions.
    """
    a, t = np.asarray(argmax), np.asarray(targets)
    return (a == t[None, None]).mean(axis=(-2, -1))


def select_heads(scores: np.ndarray, threshold: float, max_heads: int) -> list[tuple[int, int]]:
    """Heads with score >= threshold, best first, at most max_heads; the single best head if none qualifies."""
    s = np.asarray(scores)
    flat = sorted(np.ndindex(*s.shape), key=lambda lh: (-s[lh], lh))
    chosen = [(int(layer), int(head)) for layer, head in flat if s[layer, head] >= threshold][:max_heads]
    return chosen or [(int(flat[0][0]), int(flat[0][1]))]


def head_mean_rows(rows: np.ndarray, heads: Sequence[tuple[int, int]]) -> np.ndarray:
    """a-bar: the mean row over the chosen (layer, head) pairs; rows: (n_layers, n_heads, K, L) -> (K, L)."""
    r = np.asarray(rows, dtype=np.float64)
    return np.mean([r[layer, head] for layer, head in heads], axis=0)


def rho(lae: float, lae_ref: float, length: int, ref_length: int) -> float:
    """Entropy growth per doubling of context: (LAE(L) - LAE(L_ref)) / log2(L / L_ref); undefined at L = L_ref."""
    if length == ref_length:
        raise ValueError(f"rho is undefined at the reference length itself (L = L_ref = {length})")
    return (lae - lae_ref) / math.log2(length / ref_length)


CLIP_NLL = math.log(10.0)
"""Per-step NLL cap of the clipped answer perplexity: a model that knows a digit comes but lost which one."""
MAX_STEPS = 8
"""Answer steps reported one by one (`needle_nll_k1` ...); the 5-digit passkey has 5 in every tokenizer seen."""


def answer_terms(nll: Sequence[float]) -> dict[str, float]:
    """One needle's answer-NLL fields (nats): pooled and clipped sums, its own perplexity, steps 2..K, each step.

    `answer_nll_k{k}` is step k's NLL for k <= MAX_STEPS (k1: the step at the query's "? ", reported apart);
    `answer_ppl` = exp(mean NLL) of this needle alone (the median perplexity's per-needle value).
    """
    v = np.asarray(nll, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"answer_terms: expected a non-empty list of finite per-step NLLs, got {list(nll)!r}")
    terms = {
        "answer_nll_sum": float(v.sum()),
        "answer_nll_clipped_sum": float(np.minimum(v, CLIP_NLL).sum()),
        "answer_tokens": float(v.size),
        "answer_ppl": float(np.exp(v.mean())),
        "answer_nll_rest_sum": float(v[1:].sum()),
        "answer_rest_tokens": float(v.size - 1),
    }
    terms.update({f"answer_nll_k{k + 1}": float(x) for k, x in enumerate(v[:MAX_STEPS])})
    return terms


def perplexity(nll_sum: float, count: float) -> float:
    """exp(total negative log-likelihood in nats / tokens); nan for no tokens."""
    return math.exp(nll_sum / count) if count else float("nan")


def ppl_reduce(a: np.ndarray) -> float:
    """Metric reduce over (n, 2) rows of (nll_sum, tokens): the pooled perplexity."""
    den = a[:, 1].sum()
    return float(np.exp(a[:, 0].sum() / den)) if den else float("nan")


def median_reduce(a: np.ndarray) -> float:
    """Metric reduce over (n, 1) rows: the median of the first column (nan for no rows)."""
    return float(np.median(a[:, 0])) if a.shape[0] else float("nan")
