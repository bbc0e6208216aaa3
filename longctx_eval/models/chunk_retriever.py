"""Retrievers over one long context: chunk it with the exact offset chunker, rank chunks, return spans."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from longctx_eval.capability import Capability
from longctx_eval.models.base import ModelAdapter
from longctx_eval.sample import Hit, Prediction, Request
from longctx_eval.text.chunking import ChunkConfig, chunk_document


class ChunkRetriever(ModelAdapter):
    """Serves 'retrieve': subclasses implement `rank(query, chunk_texts) -> scores` (higher is better)."""

    capabilities = frozenset({Capability.RETRIEVE})

    def rank(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        """One relevance score per chunk."""
        raise NotImplementedError

    def prompt_tokens(self, request: Request) -> int:
        """A retriever reads the whole context; its length is the context's, in this tokenizer."""
        return self.tokenizer.count(request.context)

    def retrieve(self, requests: Sequence[Request]) -> list[Prediction]:
        """Top-k chunks per request, ties broken by document order so results are deterministic."""
        out = []
        for req in requests:
            t0 = time.perf_counter()
            cfg = ChunkConfig(max_tokens=req.retrieval.chunk_tokens, overlap=req.retrieval.chunk_overlap)
            chunks = chunk_document(req.context, self.tokenizer, cfg)
            if not chunks:
                out.append(Prediction(hits=(), seconds=time.perf_counter() - t0))
                continue
            scores = np.asarray(self.rank(req.query, [c.text for c in chunks]), dtype=np.float64)
            order = np.lexsort((np.arange(len(chunks)), -scores))[: req.retrieval.k]
            hits = tuple(Hit(chunks[i].char_start, chunks[i].char_end, float(scores[i])) for i in order)
            out.append(Prediction(hits=hits, seconds=time.perf_counter() - t0))
        return out
