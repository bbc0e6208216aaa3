"""Dense retriever: a sentence-transformers bi-encoder ranks chunks by cosine similarity to the query."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from longctx_eval.assets import MINILM_SHA256
from longctx_eval.hashing import cached_file_sha256
from longctx_eval.models.base import model_meta
from longctx_eval.models.chunk_retriever import ChunkRetriever
from longctx_eval.models.index_cache import Arrays
from longctx_eval.models.model_source import load_error, retriever_source, retriever_tokenizer
from longctx_eval.models.rerank import load_reranker
from longctx_eval.models.spec import ModelSpec
from longctx_eval.progress import work_progress

PROGRESS_SLICE = 256
"""A document of more chunks is embedded in slices of this many, reporting progress after each."""


class DenseIndexer:
    """Unit-normalised chunk embeddings (float32); a query scores each chunk by cosine similarity."""

    name = "dense"

    def __init__(self, model: Any, batch_size: int, weights: str, device: str) -> None:
        self.model = model
        self.batch_size = batch_size
        self._identity = {
            "kind": "dense",
            "weights": weights,
            "max_seq_length": model.max_seq_length,
            "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
            "device": device,
            "batch_size": batch_size,
            "normalize": True,
        }

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-normalised embeddings, one float32 row per text."""
        out = self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(out, dtype=np.float32)

    def build(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The chunks' embeddings; a long document is encoded in slices, with progress (chunks, tokens/s)."""
        step = max(PROGRESS_SLICE, self.batch_size)
        if len(texts) <= step:
            return {"vectors": self.encode(texts)}
        parts = []
        with work_progress(f"embedding {len(texts)} chunks [{self.name}]", len(texts)) as advance:
            for start in range(0, len(texts), step):
                part = texts[start : start + step]
                parts.append(self.encode(part))
                advance(len(part), self._tokens(part))
        return {"vectors": np.concatenate(parts)}

    def _tokens(self, texts: list[str]) -> int:
        """Tokens the encoder reads for `texts` (each truncated at max_seq_length), for the tokens/s shown."""
        tokenizer = getattr(self.model, "tokenizer", None)
        if tokenizer is None:
            return 0
        cap = self.model.max_seq_length or 1 << 30
        return sum(min(len(ids), cap) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"])

    def score(self, index: Arrays, query: str, key: str) -> np.ndarray:
        return index["vectors"] @ self.encode([query])[0]

    def check(self, index: Arrays, n_chunks: int) -> str | None:
        vectors = index.get("vectors")
        if vectors is None or set(index) != {"vectors"}:
            return f"a dense index holds 'vectors', this entry {sorted(index)}"
        dim = self.model.get_sentence_embedding_dimension() or (vectors.shape[1:] or [0])[0]
        if vectors.dtype != np.float32 or vectors.shape != (n_chunks, dim):
            return f"{vectors.dtype} vectors of shape {vectors.shape}, expected float32 ({n_chunks}, {dim})"
        return None


def load_encoder(target: str, device: str) -> tuple[Any, str | None, Path | str]:
    """The SentenceTransformer of `retriever:<target>` on `device` (auto: CUDA when there is one), its weights'
    sha256 (None when unknown) and its source."""
    from sentence_transformers import SentenceTransformer

    from longctx_eval.models.devices import resolve_device

    device = resolve_device(device)
    path = retriever_source(target)
    try:
        model = SentenceTransformer(str(path), device=device)
    except (OSError, ValueError) as exc:
        raise load_error(target, exc) from exc
    weights = Path(path) / "model.safetensors"
    sha = MINILM_SHA256 if target == "minilm" else (cached_file_sha256(weights) if weights.is_file() else None)
    return model, sha, path


def encoder_device(model: Any) -> str:
    """The device a loaded encoder runs on, as the index identity names it (`cpu`, `cuda:0`)."""
    device = getattr(model, "device", None)
    if device is None:
        return "cpu"
    return f"{device.type}:{device.index or 0}" if device.type == "cuda" else str(device.type)


class DenseRetriever(ChunkRetriever):
    """`retriever:<folder|hub id|minilm>`; chunks are sized in the embedder's own tokenizer."""

    def __init__(self, spec: ModelSpec) -> None:
        o = spec.options
        self.batch_size = o.batch_size
        self.model, sha, path = load_encoder(spec.target, o.device)
        device = encoder_device(self.model)
        self.indexers = (DenseIndexer(self.model, o.batch_size, sha or str(path), device),)
        if o.rerank:
            shared = {"minilm": self.model} if spec.target == "minilm" else {}
            self.reranker = load_reranker(o.rerank, device=device, batch_size=o.batch_size, shared=shared)
            self.rerank_depth = o.rerank_depth
        tok = retriever_tokenizer(spec)
        meta = model_meta(
            spec,
            tok,
            self.capabilities,
            revision=str(path),
            sha256=sha,
            params=sum(p.numel() for p in self.model.parameters()),
            dtype=str(next(self.model.parameters()).dtype).removeprefix("torch."),
            settings={"max_seq_length": self.model.max_seq_length, "normalize": True, **self.retrieval_settings()},
        )
        super().__init__(meta, tok)
