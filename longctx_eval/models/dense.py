"""Dense retriever: a sentence-transformers bi-encoder ranks chunks by cosine similarity to the query."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from longctx_eval.assets import MINILM_SHA256, file_sha256, minilm_path
from longctx_eval.errors import PrerequisiteError
from longctx_eval.models.base import ModelInfo
from longctx_eval.models.chunk_retriever import ChunkRetriever
from longctx_eval.models.spec import ModelSpec, option_int
from longctx_eval.text.tokenizer import Tokenizer


class DenseRetriever(ChunkRetriever):
    """`retriever:<path|hub id|minilm>`; chunks are sized in the embedder's own tokenizer."""

    def __init__(self, spec: ModelSpec) -> None:
        from sentence_transformers import SentenceTransformer

        path = minilm_path() if spec.target == "minilm" else spec.target
        self.batch_size = option_int(spec, "batch_size", 64) or 64
        device = spec.options.get("device", "cpu")
        try:
            self.model = SentenceTransformer(str(path), device=device)
        except OSError as exc:
            raise PrerequisiteError(
                f"retriever {spec.target!r} cannot be loaded (offline or unknown): {str(exc).splitlines()[0]}"
            ) from exc
        tok = Tokenizer.from_transformers(self.model.tokenizer, name=spec.name)
        weights = Path(path) / "model.safetensors"
        sha = MINILM_SHA256 if spec.target == "minilm" else (file_sha256(weights) if weights.is_file() else None)
        params = sum(p.numel() for p in self.model.parameters())
        info = ModelInfo(
            spec=spec.raw,
            name=spec.name,
            kind="retriever",
            tokenizer=tok.name,
            tokenizer_sha256=tok.sha256,
            revision=str(path),
            sha256=sha,
            params=params,
            dtype=str(next(self.model.parameters()).dtype).removeprefix("torch."),
            settings={"max_seq_length": self.model.max_seq_length, "normalize": True},
        )
        super().__init__(info, tok)

    def rank(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        emb = self.model.encode(
            [query, *chunks], batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return emb[1:] @ emb[0]
