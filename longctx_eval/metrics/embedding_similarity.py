"""Embedding similarity (SemScore: Aynetdinov and Akbik, 2024): the cosine of an answer's and its reference's
sentence embeddings, as the embedder defines them (the packaged all-MiniLM-L6-v2: mean pooling over word pieces,
L2-normalised, 256 word pieces at most). An empty answer scores 0. The embedder is passed in (`Embed`): this
module loads no model (`models/semantic_embed.py` does)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

EMBEDDING_FIELD = "embedding_similarity"
"""The score field: cosine of answer and reference embeddings, in [-1, 1] (0 for an empty answer)."""

Embed = Callable[[list[str]], np.ndarray]
"""Texts -> one embedding row per text."""


def embedding_similarity(answers: Sequence[str], references: Sequence[str], embed: Embed) -> np.ndarray:
    """Per pair, the cosine of the answer's and the reference's embeddings; 0 where the answer is empty."""
    if len(answers) != len(references):
        raise ValueError(f"embedding_similarity: {len(answers)} answers but {len(references)} references")
    filled = [i for i, a in enumerate(answers) if a.strip()]
    out = np.zeros(len(answers), dtype=np.float64)
    if filled:
        texts = [answers[i] for i in filled] + [references[i] for i in filled]
        vectors = np.asarray(embed(texts), dtype=np.float64)
        a, r = vectors[: len(filled)], vectors[len(filled) :]
        norms = np.linalg.norm(a, axis=1) * np.linalg.norm(r, axis=1)
        out[filled] = np.einsum("ij,ij->i", a, r) / np.where(norms == 0, 1.0, norms)
    return out
