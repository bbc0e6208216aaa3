"""Dense retriever: a sentence-transformers bi-encoder ranks chunks by cosine similarity to the query."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from longctx_eval.assets import MINILM_SHA256, file_sha256
from longctx_eval.models.base import model_meta
from longctx_eval.models.chunk_retriever import ChunkRetriever
from longctx_eval.models.model_source import load_error, retriever_source, retriever_tokenizer
from longctx_eval.models.spec import ModelSpec


class DenseRetriever(ChunkRetriever):
    """`retriever:<folder|hub id|minilm>`; chunks are sized in the embedder's own tokenizer."""

    def __init__(self, spec: ModelSpec) -> None:
        from sentence_transformers import SentenceTransformer

        path = retriever_source(spec.target)
        self.batch_size = spec.options.batch_size
        try:
            self.model = SentenceTransformer(str(path), device=spec.options.device)
        except (OSError, ValueError) as exc:
            raise load_error(spec.target, exc) from exc
        tok = retriever_tokenizer(spec)
        weights = Path(path) / "model.safetensors"
        sha = MINILM_SHA256 if spec.target == "minilm" else (file_sha256(weights) if weights.is_file() else None)
        meta = model_meta(
            spec,
            tok,
            self.capabilities,
            revision=str(path),
            sha256=sha,
            params=sum(p.numel() for p in self.model.parameters()),
            dtype=str(next(self.model.parameters()).dtype).removeprefix("torch."),
            settings={"max_seq_length": self.model.max_seq_length, "normalize": True},
        )
        super().__init__(meta, tok)

    def rank(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        emb = self.model.encode(
            [query, *chunks], batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return emb[1:] @ emb[0]
