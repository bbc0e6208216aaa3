"""Dense retriever: a sentence-transformers bi-encoder ranks chunks by cosine similarity to the query.

Chunks are encoded canonically (`encode_canonical`): each text is padded to its own length bucket and batched
only with texts of the same bucket, so its vector does not depend on which other texts were encoded with it.
That makes the chunk-vector cache (`models/retrieval/embedding_cache.py`) exact: documents that share chunks (one
haystack, a needle at many depths) embed each distinct chunk once, and every vector is the one a fresh
encoding of that text alone gives, bit for bit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np

from longctx_eval.hashing import cached_file_sha256
from longctx_eval.models.assets import MINILM_SHA256
from longctx_eval.models.base import model_meta
from longctx_eval.models.model_files import embedder_files
from longctx_eval.models.model_source import load_error, retriever_source, retriever_tokenizer
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import RetrieverOptions
from longctx_eval.models.rerankers import load_reranker
from longctx_eval.models.retrieval.chunk_retriever import ChunkRetriever
from longctx_eval.models.retrieval.embedding_cache import EmbeddingCache, Reuse
from longctx_eval.models.retrieval.index_cache import Arrays
from longctx_eval.progress import work_progress

PROGRESS_SLICE = 256
"""Encoding more chunks than this at once reports progress (chunks done, tokens/s)."""
BUCKET_TOKENS = 16
"""Canonical encoding pads a text of n tokens (special tokens included) to ceil(n / 16) * 16, at most
max_seq_length: at most 15 pad tokens per text, and 128-token chunks fall in a handful of buckets."""
ENCODING = f"bucketed-{BUCKET_TOKENS}"
"""The encoding scheme, part of the index identity and of the chunk-vector cache's namespace."""


SMALL_CALL = 16
"""An encoding call of at most this many texts runs on one CPU thread (`few_threads`)."""


@contextlib.contextmanager
def few_threads(model: Any, n_texts: int) -> Iterator[None]:
    """One torch thread for a small call on the CPU, then the thread count as it was.

    A forward pass over a few texts is too small to split; on shared cores two threads mostly wait for each
    other (six one-chunk calls on 2 busy cores: 29 s on two threads, 6.4 s on one), and a needle sample of a
    cached haystack makes exactly such calls (its new chunks, its query). The vectors are
    the same bit for bit with one thread or two (tested), so this changes no vector, only the wait.
    """
    import torch

    device = getattr(model, "device", None)
    threads = torch.get_num_threads()
    if n_texts > SMALL_CALL or threads == 1 or getattr(device, "type", "cpu") != "cpu":
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def bucket_of(n_tokens: int, cap: int) -> int:
    """The padded length of a text of `n_tokens` tokens under canonical encoding."""
    return min(cap, -(-n_tokens // BUCKET_TOKENS) * BUCKET_TOKENS)


def encode_canonical(model: Any, texts: list[str], batch_size: int, progress: str | None = None) -> np.ndarray:
    """Unit-normalised float32 embeddings, one row per text, each independent of the other texts.

    Padding is where batch composition enters a transformer's output (a batch is padded to its longest text,
    and the padded length changes the float rounding by about 1e-7). Here every text is padded to its own
    bucket (`bucket_of`) and batched only with texts of the same bucket, so a text's row is the same whether
    it is encoded alone or among thousands (tested bit for bit on the CPU). A model without a tokenizer is
    encoded one text per call (the same property, slower). `progress` names the work when it is long.
    """
    out = np.zeros((len(texts), 0), dtype=np.float32)
    if not texts:
        return out
    tokenizer = getattr(model, "tokenizer", None)
    cap = int(model.max_seq_length or 1 << 30)
    if tokenizer is None:
        groups: dict[int, list[int]] = {0: list(range(len(texts)))}
        lengths = [0] * len(texts)
    else:
        prompt_name = getattr(model, "default_prompt_name", None)
        prompt = ((getattr(model, "prompts", None) or {}).get(prompt_name) or "") if prompt_name else ""
        ids = tokenizer([prompt + t for t in texts], add_special_tokens=True, truncation=False)["input_ids"]
        lengths = [min(len(x), cap) for x in ids]
        groups = {}
        for i, n in enumerate(lengths):
            groups.setdefault(bucket_of(n, cap), []).append(i)
    rows: np.ndarray | None = None
    show = progress is not None and len(texts) > PROGRESS_SLICE
    with contextlib.ExitStack() as stack:
        advance = stack.enter_context(work_progress(progress or "", len(texts))) if show else None
        for bucket in sorted(groups):
            members = groups[bucket]
            step = batch_size if tokenizer is not None else 1
            for start in range(0, len(members), step):
                part = members[start : start + step]
                kwargs: dict[str, Any] = {}
                if tokenizer is not None:
                    kwargs["processing_kwargs"] = {"text": {"padding": "max_length", "max_length": bucket}}
                with few_threads(model, len(part)):
                    vectors = model.encode(
                        [texts[i] for i in part],
                        batch_size=len(part),
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                        **kwargs,
                    )
                vectors = np.asarray(vectors, dtype=np.float32)
                if rows is None:
                    rows = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
                rows[part] = vectors
                if advance is not None:
                    advance(len(part), sum(lengths[i] for i in part))
    assert rows is not None
    return rows


class DenseIndexer:
    """Unit-normalised chunk embeddings (float32); a query scores each chunk by cosine similarity.

    With a chunk-vector cache (`use_embedding_cache`, which the chunk retriever calls with its index cache's)
    only chunks it does not hold are encoded; the document's matrix is then assembled in memory and not
    written to the index cache's disk level (`persist_index`), whose copy would repeat the cache's vectors.
    `last_reuse` says where the rows of the last `build` came from.
    """

    name = "dense"
    persist_index = False

    def __init__(
        self, model: Any, batch_size: int, weights: str, device: str, files: dict[str, str] | None = None
    ) -> None:
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
            "encoding": ENCODING,
            **({"files": files} if files else {}),  # config / tokenizer / pooling files that are not pinned
        }
        self.embedding_cache: EmbeddingCache | None = None
        self.last_reuse: Reuse | None = None

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def namespace(self) -> dict[str, Any]:
        """What a chunk vector depends on besides its text: the identity, the model's modules and prompt, and
        the library versions that compute it (the chunk-vector cache's namespace)."""
        import sentence_transformers
        import torch
        import transformers

        prompt_name = getattr(self.model, "default_prompt_name", None)
        prompts = getattr(self.model, "prompts", None) or {}
        return {
            **self._identity,
            "modules": [repr(m) for m in self.model],
            "prompt": prompts.get(prompt_name) if prompt_name else None,
            "libraries": {
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "sentence_transformers": sentence_transformers.__version__,
            },
        }

    def use_embedding_cache(self, cache: EmbeddingCache | None) -> None:
        """Look chunk vectors up in `cache` (and add the new ones to it) from the next `build` on."""
        self.embedding_cache = cache

    def dimension(self) -> int | None:
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return get()

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-normalised embeddings, one float32 row per text, as one `model.encode` call (queries)."""
        with few_threads(self.model, len(texts)):
            out = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Chunk embeddings, canonically encoded (`encode_canonical`), with progress for long documents."""
        return encode_canonical(self.model, texts, self.batch_size, f"embedding {len(texts)} chunks [{self.name}]")

    def build(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The chunks' embeddings: from the chunk-vector cache where it holds them, the rest encoded now."""
        cache = self.embedding_cache
        if cache is None:
            self.last_reuse = Reuse(embedded=len(texts))
            return {"vectors": self.embed(texts)}
        vectors, self.last_reuse = cache.vectors(self.namespace(), texts, self.embed, dim=self.dimension(), unit=True)
        return {"vectors": vectors}

    def score(self, index: Arrays, query: str, key: str) -> np.ndarray:
        return index["vectors"] @ self.encode([query])[0]

    def check(self, index: Arrays, n_chunks: int) -> str | None:
        vectors = index.get("vectors")
        if vectors is None or set(index) != {"vectors"}:
            return f"a dense index holds 'vectors', this entry {sorted(index)}"
        dim = self.dimension() or (vectors.shape[1:] or [0])[0]
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
        o = cast("RetrieverOptions", spec.options)
        self.batch_size = o.batch_size
        self.chunking = o.chunking
        files = embedder_files(spec.target, retriever_source(spec.target))  # before loading, by content
        self.model, sha, path = load_encoder(spec.target, o.device)
        device = encoder_device(self.model)
        self.indexers = (DenseIndexer(self.model, o.batch_size, sha or str(path), device, files.identity),)
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
            settings={
                "max_seq_length": self.model.max_seq_length,
                "normalize": True,
                **self.retrieval_settings(),
                **files.setting(),
            },
            runtime=files.runtime(),
        )
        super().__init__(meta, tok)
