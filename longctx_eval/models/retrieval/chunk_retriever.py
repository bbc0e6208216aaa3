"""Retrievers over one long context: chunk it with the exact offset chunker, rank chunks, return spans.

A retriever built from `Indexer`s (dense embeddings, a BM25 matrix) chunks and indexes each document once:
the chunk spans and every index are cached by content hash (`index_cache`), in memory for the process and on
disk, so several queries on one document, and a second run over it, reuse them. An optional second-stage
`Reranker` reorders the top `rerank_depth` chunks. Each prediction's `data` says where the index came from
(`index_cache`: memory, disk or built) and how long indexing and reranking took.

An indexer that embeds (dense) also looks each chunk's vector up in the index cache's chunk-vector cache
(`embedding_cache.py`): documents that share chunks, such as one haystack with a needle at many depths, embed
only the chunks they do not share; `data.embeddings` counts the chunks embedded and looked up. Chunk
boundaries follow the retriever's `chunking` rule: `greedy` (the default) or `resync` (content-chosen sync
sentences, so an insertion changes only the chunks around it; `text/chunking.py`), part of the model's
settings and so of its identity when not the default.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from longctx_eval.capability import Capability
from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.rerankers import Reranker
from longctx_eval.models.retrieval.embedding_cache import Reuse
from longctx_eval.models.retrieval.index_cache import Arrays, IndexCache, Status, shared_cache
from longctx_eval.results import ModelMeta
from longctx_eval.sample import Hit, Prediction, Request
from longctx_eval.text.chunking import ChunkConfig, chunk_document
from longctx_eval.text.pieces import token_count
from longctx_eval.text.tokenizer import Tokenizer

_COUNTS_KEPT = 16
_ORDER: dict[str, int] = {"built": 0, "disk": 1, "memory": 2}


class Indexer(Protocol):
    """One per-document index: built once from the chunk texts (arrays, so it can be cached), scored per query."""

    name: str

    def identity(self) -> dict[str, Any]:
        """Everything the built arrays depend on besides the chunks (model weights, parameters, versions)."""
        ...

    def build(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The index of these chunk texts."""
        ...

    def score(self, index: Arrays, query: str, key: str) -> np.ndarray:
        """One relevance score per chunk (higher is better); `key` identifies the index, for memoised lookups."""
        ...

    def check(self, index: Arrays, n_chunks: int) -> str | None:
        """None if `index` (read back from the disk cache) can be an index of `n_chunks` chunks, else why not."""
        ...


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, ties broken by document order so results are deterministic."""
    return np.lexsort((np.arange(len(scores)), -scores))[:k]


def least_cached(statuses: Sequence[Status]) -> Status:
    """The status of a result assembled from several entries: built if any was built, else disk if any was read."""
    return min(statuses, key=lambda s: _ORDER[s]) if statuses else "memory"


class ChunkRetriever(ModelAdapter):
    """Serves 'retrieve'. Subclasses set `indexers` (cached per document) and `fuse` several of them, or
    implement `rank(query, chunk_texts) -> scores` (recomputed per request, nothing cached)."""

    capabilities = frozenset({Capability.RETRIEVE})
    indexers: tuple[Indexer, ...] = ()
    reranker: Reranker | None = None
    rerank_depth: int = 20
    chunking: str = "greedy"
    """The chunk boundary rule: `greedy` or `resync` (`ChunkConfig.resync`)."""
    cache: IndexCache | None = None
    """The index cache; None = the process-wide `shared_cache()` for the current settings."""

    def __init__(self, meta: ModelMeta, tokenizer: Tokenizer) -> None:
        super().__init__(meta, tokenizer)
        self._counts: OrderedDict[str, int] = OrderedDict()  # document sha256 -> token count
        self._tokenizer_sha256 = tokenizer.sha256  # serialising the tokenizer per request would cost ~10 ms

    def rank(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        """One relevance score per chunk (for retrievers without indexers)."""
        raise NotImplementedError

    def fuse(self, query: str, scores: Sequence[np.ndarray]) -> np.ndarray:
        """One score per chunk from each indexer's scores; a single indexer's are used as they are."""
        if len(scores) != 1:
            raise NotImplementedError(f"{type(self).__name__} has {len(scores)} indexers and no fuse()")
        return scores[0]

    def prompt_tokens(self, request: Request) -> int:
        """A retriever reads the whole context; its length is the context's, in this tokenizer (counted once)."""
        counts = self._counts
        key = sha256_text(request.context)
        if key not in counts:
            counts[key] = token_count(self.tokenizer, request.context)  # paragraph memo: text/pieces.py
            while len(counts) > _COUNTS_KEPT:
                counts.popitem(last=False)
        return counts[key]

    def retrieval_settings(self) -> dict[str, Any]:
        """The chunking rule (when not the default) and the reranker's part of the model settings (empty for a
        greedy retriever without a reranker, so their identities are what they were), for `model_meta`."""
        out: dict[str, Any] = {} if self.chunking == "greedy" else {"chunking": self.chunking}
        if self.reranker is not None:
            out |= {"rerank": self.reranker.name, "rerank_depth": self.rerank_depth}
            out["reranker"] = self.reranker.identity()
        return out

    def retrieve(self, requests: Sequence[Request]) -> list[Prediction]:
        """Top-k chunks per request (the top `rerank_depth` reordered by the reranker, if there is one)."""
        return [self._retrieve_one(req) for req in requests]

    def _retrieve_one(self, req: Request) -> Prediction:
        t0 = time.perf_counter()
        cache = self.cache or shared_cache()
        cfg = ChunkConfig(
            max_tokens=req.retrieval.chunk_tokens, overlap=req.retrieval.chunk_overlap, resync=self.chunking == "resync"
        )
        doc_sha256 = sha256_text(req.context)
        chunks_from = {"doc": doc_sha256, "chunking": cfg.key_fields(), "tokenizer": self._tokenizer_sha256}
        chunks_key = sha256_json(chunks_from)
        layout, chunk_status = cache.get_or_build(
            chunks_key,
            lambda: _chunk_arrays(req.context, self.tokenizer, cfg),
            built_from={**chunks_from, "doc_chars": len(req.context)},
            check=lambda arrays: layout_problem(arrays, len(req.context)),
        )
        spans = layout["spans"]
        layout_sha256 = sha256_text(spans.tobytes().hex() + layout["tokens"].tobytes().hex())
        parts: dict[str, Status] = {"chunks": chunk_status}
        if not len(spans):
            return Prediction(hits=(), seconds=time.perf_counter() - t0, data={"index_cache": chunk_status})
        texts: list[str] = []  # sliced from the context once, only when something is built

        def build(ix: Indexer) -> dict[str, np.ndarray]:
            if not texts:
                texts.extend(_texts(req.context, spans))
            return ix.build(texts)

        reuse: Reuse | None = None
        if self.indexers:
            per_indexer = []
            for ix in self.indexers:
                identity = ix.identity()
                key = sha256_json({"chunks": chunks_key, "index": identity})
                built_from = {"doc": doc_sha256, "chunks": chunks_key, "layout": layout_sha256, "index": identity}
                attach = getattr(ix, "use_embedding_cache", None)
                if attach is not None:
                    attach(cache.embeddings())
                    setattr(ix, "last_reuse", None)  # noqa: B010 (an optional attribute of the Indexer)

                def build_ix(ix: Indexer = ix) -> dict[str, np.ndarray]:
                    return build(ix)

                def check_ix(arrays: Arrays, ix: Indexer = ix) -> str | None:
                    return ix.check(arrays, len(spans))

                index, parts[ix.name] = cache.get_or_build(
                    key,
                    build_ix,
                    built_from={**built_from, "n_chunks": len(spans)},
                    check=check_ix,
                    persist=getattr(ix, "persist_index", True),
                )
                got: Reuse | None = getattr(ix, "last_reuse", None)
                if parts[ix.name] == "built" and got is not None:
                    # Assembled from the chunk-vector cache: built only if something was embedded now.
                    parts[ix.name] = "built" if got.embedded else ("disk" if got.disk else "memory")
                    reuse = reuse or Reuse()
                    reuse.add(got)
                per_indexer.append((ix, index, key))
            index_s = time.perf_counter() - t0
            scores = self.fuse(req.query, [ix.score(index, req.query, key) for ix, index, key in per_indexer])
        else:
            index_s = time.perf_counter() - t0
            scores = self.rank(req.query, _texts(req.context, spans))
        scores = np.asarray(scores, dtype=np.float64)
        order = top_k(scores, req.retrieval.k)
        final = scores[order]
        data: dict[str, Any] = {
            "index_cache": least_cached(list(parts.values())),
            "index_cache_parts": parts,
            "index_s": round(index_s, 6),
            "chunks": len(spans),
        }
        if reuse is not None:
            data["embeddings"] = reuse.as_dict()
        if self.reranker is not None and len(order):
            order, final, data["rerank_s"] = self._rerank(req, spans, order, final)
            data["rerank_depth"] = min(self.rerank_depth, len(order))
        hits = tuple(Hit(int(spans[i, 0]), int(spans[i, 1]), float(s)) for i, s in zip(order, final, strict=True))
        return Prediction(hits=hits, seconds=time.perf_counter() - t0, data=data)

    def _rerank(
        self, req: Request, spans: np.ndarray, order: np.ndarray, first: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """The top `rerank_depth` reordered by the reranker's scores (ties keep first-stage order), the rest kept."""
        assert self.reranker is not None
        t0 = time.perf_counter()
        depth = min(self.rerank_depth, len(order))
        head = order[:depth]
        rescored = np.asarray(
            self.reranker.score(req.query, [req.context[spans[i, 0] : spans[i, 1]] for i in head]), dtype=np.float64
        )
        new = np.lexsort((np.arange(depth), -rescored))
        order = np.concatenate([head[new], order[depth:]])
        final = np.concatenate([rescored[new], first[depth:]])
        return order, final, round(time.perf_counter() - t0, 6)


def layout_problem(arrays: Arrays, n_chars: int) -> str | None:
    """None if `arrays` is a chunk layout of an `n_chars`-character document (ordered spans inside it), else why."""
    spans, tokens = arrays.get("spans"), arrays.get("tokens")
    if spans is None or tokens is None or set(arrays) != {"spans", "tokens"}:
        return f"a chunk layout holds 'spans' and 'tokens', this entry {sorted(arrays)}"
    if spans.ndim != 2 or spans.shape[1:] != (2,) or tokens.shape != spans.shape or spans.dtype.kind != "i":
        return f"chunk spans of shape {spans.shape} and token spans of shape {tokens.shape}"
    if len(spans) and (spans.min() < 0 or spans.max() > n_chars or bool((spans[:, 1] <= spans[:, 0]).any())):
        return f"chunk spans outside the {n_chars}-character document or empty"
    if len(spans) > 1 and bool((np.diff(spans[:, 0]) <= 0).any()):
        return "chunk spans out of document order"
    return None


def _texts(context: str, spans: np.ndarray) -> list[str]:
    return [context[s:e] for s, e in spans.tolist()]


def _chunk_arrays(text: str, tokenizer: Any, cfg: ChunkConfig) -> dict[str, np.ndarray]:
    chunks = chunk_document(text, tokenizer, cfg)
    spans = np.asarray([(c.char_start, c.char_end) for c in chunks], dtype=np.int64).reshape(-1, 2)
    tokens = np.asarray([(c.token_start, c.token_end) for c in chunks], dtype=np.int64).reshape(-1, 2)
    return {"spans": spans, "tokens": tokens}
