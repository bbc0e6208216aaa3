"""Hybrid retriever: MiniLM dense and BM25 scores of the same chunks, fused into one ranking.

Fusion over all chunks of the document (docs/retrieval.md):
- `rrf` (default): score = alpha / (rrf_k + rank_dense) + (1 - alpha) / (rrf_k + rank_bm25), ranks 1-based,
  each side's ties broken by document order; alpha = 0.5 is plain reciprocal-rank fusion halved.
- `minmax`: score = alpha * minmax(cosine) + (1 - alpha) * minmax(bm25), minmax(x) = (x - min) / (max - min)
  over the document's chunks (0 when every chunk scores the same).
Each side's index is the one `minilm` and `bm25` build (same cache entries), so a run with all three embeds once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from longctx_eval.models.assets import minilm_path
from longctx_eval.models.base import model_meta
from longctx_eval.models.model_files import embedder_files
from longctx_eval.models.model_source import minilm_tokenizer
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import HybridOptions
from longctx_eval.models.rerankers import load_reranker
from longctx_eval.models.retrieval.bm25 import BM25Indexer
from longctx_eval.models.retrieval.chunk_retriever import ChunkRetriever
from longctx_eval.models.retrieval.dense import DenseIndexer, encoder_device, load_encoder


def ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of every chunk by descending score, ties by document order."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    out = np.empty(len(scores), dtype=np.float64)
    out[order] = np.arange(1, len(scores) + 1)
    return out


def minmax(scores: np.ndarray) -> np.ndarray:
    """Scores rescaled to [0, 1] over the chunks; all zeros when they are all equal."""
    lo, hi = float(scores.min()), float(scores.max())
    return np.zeros_like(scores) if hi <= lo else (scores - lo) / (hi - lo)


def fuse_scores(dense: np.ndarray, lexical: np.ndarray, fusion: str, alpha: float, rrf_k: int) -> np.ndarray:
    """The hybrid score of every chunk from its dense and BM25 scores (see the module docstring)."""
    dense = np.asarray(dense, dtype=np.float64)
    lexical = np.asarray(lexical, dtype=np.float64)
    if fusion == "rrf":
        return alpha / (rrf_k + ranks(dense)) + (1 - alpha) / (rrf_k + ranks(lexical))
    if fusion == "minmax":
        return alpha * minmax(dense) + (1 - alpha) * minmax(lexical)
    raise ValueError(f"unknown fusion {fusion!r}; expected rrf or minmax")


class HybridRetriever(ChunkRetriever):
    """`hybrid[?alpha=0.5&fusion=rrf|minmax&rrf_k=60&k1=1.5&b=0.75]`: MiniLM + BM25 over MiniLM-sized chunks."""

    def __init__(self, spec: ModelSpec) -> None:
        import bm25s

        o = cast("HybridOptions", spec.options)
        self.alpha, self.fusion, self.rrf_k = o.alpha, o.fusion, o.rrf_k
        self.batch_size = o.batch_size
        self.chunking = o.chunking
        files = embedder_files("minilm", minilm_path())  # {} while the packaged files are the pinned ones
        self.model, sha, path = load_encoder("minilm", o.device)
        device = encoder_device(self.model)
        dense = DenseIndexer(self.model, o.batch_size, sha or str(path), device, files.identity)
        self.indexers = (dense, BM25Indexer(o.k1, o.b))
        if o.rerank:
            self.reranker = load_reranker(
                o.rerank, device=device, batch_size=o.batch_size, shared={"minilm": self.model}
            )
            self.rerank_depth = o.rerank_depth
        tok = minilm_tokenizer(spec)
        settings = {
            "alpha": o.alpha,
            "fusion": o.fusion,
            "rrf_k": o.rrf_k,
            "k1": o.k1,
            "b": o.b,
            "stopwords": "en",
            "max_seq_length": self.model.max_seq_length,
            "normalize": True,
            **self.retrieval_settings(),
            **files.setting(),
        }
        meta = model_meta(
            spec,
            tok,
            self.capabilities,
            revision=f"minilm+bm25s=={bm25s.__version__}",
            sha256=sha,
            params=sum(p.numel() for p in self.model.parameters()),
            dtype=str(next(self.model.parameters()).dtype).removeprefix("torch."),
            settings=settings,
            runtime=files.runtime(),
        )
        super().__init__(meta, tok)

    def fuse(self, query: str, scores: Sequence[np.ndarray]) -> np.ndarray:
        dense, lexical = scores
        return fuse_scores(dense, lexical, self.fusion, self.alpha, self.rrf_k)
