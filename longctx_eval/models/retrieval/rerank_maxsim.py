"""The `maxsim` reranker: a chunk scores the highest MiniLM cosine between the query and any of its sentences.

A chunk of 128 tokens mixes the passage that answers a query with its neighbours; scoring its best sentence
instead of its average meaning rewards the chunk that holds one precise match. Sentences are Punkt sentences
(`text.sentences.split_sentences`); each distinct sentence is embedded once per process (bounded memory).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from longctx_eval.models.assets import MINILM_SHA256, minilm_path
from longctx_eval.models.model_files import embedder_files
from longctx_eval.text.sentences import split_sentences

SENTENCES_KEPT = 50_000
"""Sentence vectors kept across queries (1.5 KB each): reranking many queries on one document embeds each once."""


class MaxSimReranker:
    """score(chunk) = max over its sentences s of cos(MiniLM(query), MiniLM(s))."""

    name = "maxsim"

    def __init__(self, *, device: str = "auto", batch_size: int = 64, shared: Mapping[str, Any] | None = None) -> None:
        model = (shared or {}).get("minilm")
        if model is None:
            from sentence_transformers import SentenceTransformer

            from longctx_eval.models.devices import resolve_device

            model = SentenceTransformer(str(minilm_path()), device=resolve_device(device))
        self.model = model
        self.files = embedder_files("minilm", minilm_path()).identity  # {} while the packaged files are the pinned ones
        self.batch_size = batch_size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "weights": MINILM_SHA256,
            "max_seq_length": self.model.max_seq_length,
            "sentences": "punkt:english",
            **({"files": self.files} if self.files else {}),
        }

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(out, dtype=np.float32)

    def _sentence_vectors(self, sentences: list[str]) -> np.ndarray:
        missing = [s for s in dict.fromkeys(sentences) if s not in self._vectors]
        if missing:
            for s, v in zip(missing, self._encode(missing), strict=True):
                self._vectors[s] = v
        rows = []
        for s in sentences:
            self._vectors.move_to_end(s)
            rows.append(self._vectors[s])
        while len(self._vectors) > SENTENCES_KEPT:
            self._vectors.popitem(last=False)
        return np.stack(rows)

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One score per candidate text: its best sentence's cosine to the query (-1 for an empty text)."""
        per_text = [[t[s:e] for s, e in split_sentences(t)] for t in texts]
        flat = [s for sents in per_text for s in sents]
        if not flat:
            return np.full(len(texts), -1.0)
        q = self._encode([query])[0]
        sims = self._sentence_vectors(flat) @ q
        out, i = np.full(len(texts), -1.0), 0
        for j, sents in enumerate(per_text):
            if sents:
                out[j] = float(sims[i : i + len(sents)].max())
            i += len(sents)
        return out
