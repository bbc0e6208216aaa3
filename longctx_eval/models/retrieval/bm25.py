"""BM25 (the `bm25s` package) over the chunks of each context; lengths are measured in MiniLM's tokenizer."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, cast

import numpy as np

from longctx_eval.models.assets import load_tokenizer
from longctx_eval.models.base import model_meta
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import BM25Options
from longctx_eval.models.rerankers import load_reranker
from longctx_eval.models.retrieval.bm25_arrays import assemble
from longctx_eval.models.retrieval.chunk_retriever import ChunkRetriever
from longctx_eval.models.retrieval.index_cache import Arrays
from longctx_eval.models.retrieval.term_counts import shared_term_counts

_RESTORED_KEPT = 8


class BM25Indexer:
    """Okapi BM25 (bm25s, English stopwords): the eager score matrix and vocabulary as arrays, scored per query."""

    name = "bm25"

    def __init__(self, k1: float, b: float) -> None:
        import bm25s
        from bm25s.stopwords import STOPWORDS_EN

        self._bm25s = bm25s
        self.k1 = k1
        self.b = b
        self._restored: OrderedDict[str, Any] = OrderedDict()
        self.term_counts = shared_term_counts(STOPWORDS_EN)
        """Each distinct chunk text's terms, shared by every BM25 index of the process."""

    def identity(self) -> dict[str, Any]:
        return {"kind": "bm25", "k1": self.k1, "b": self.b, "stopwords": "en", "bm25s": self._bm25s.__version__}

    def build(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The bm25s index of these chunks, assembled from their cached term counts (`bm25_arrays.assemble`: the
        arrays `bm25s_arrays` would build, bit for bit), so only chunks not seen before are tokenized."""
        counts = self.term_counts.of(texts)
        return assemble(counts, self.term_counts.terms, self.k1, self.b)

    def check(self, index: Arrays, n_chunks: int) -> str | None:
        names = {"data", "indices", "indptr", "num_docs", "vocab"}
        if set(index) != names:
            return f"a bm25 index holds {sorted(names)}, this entry {sorted(index)}"
        data, indices, indptr, vocab = index["data"], index["indices"], index["indptr"], index["vocab"]
        if index["num_docs"].shape != () or int(index["num_docs"]) != n_chunks:
            return f"a bm25 index of {index['num_docs']} chunks, expected {n_chunks}"
        if data.ndim != 1 or indices.shape != data.shape or indptr.ndim != 1 or len(indptr) - len(vocab) not in (0, 1):
            return f"bm25 arrays of shapes {data.shape}, {indices.shape}, {indptr.shape} for {len(vocab)} terms"
        if len(indptr) and (int(indptr[0]) != 0 or int(indptr[-1]) != len(data) or bool((np.diff(indptr) < 0).any())):
            return "bm25 term offsets that do not cover its scores"
        if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= n_chunks):
            return f"bm25 chunk ids outside 0..{n_chunks - 1}"
        return None

    def _retriever(self, index: Arrays, key: str) -> Any:
        """A bm25s.BM25 over the stored arrays (kept for the next query on the same document)."""
        held = self._restored.get(key)
        if held is not None:
            self._restored.move_to_end(key)
            return held
        retriever = self._bm25s.BM25(k1=self.k1, b=self.b)
        retriever.scores = {
            "data": index["data"],
            "indices": index["indices"],
            "indptr": index["indptr"],
            "num_docs": int(index["num_docs"]),
        }
        retriever.vocab_dict = {str(t): i for i, t in enumerate(index["vocab"].tolist())}
        retriever.unique_token_ids_set = set(retriever.vocab_dict.values())
        retriever.nonoccurrence_array = None  # Okapi ("lucene") scoring has none
        self._restored[key] = retriever
        while len(self._restored) > _RESTORED_KEPT:
            self._restored.popitem(last=False)
        return retriever

    def score(self, index: Arrays, query: str, key: str) -> np.ndarray:
        query_tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        id_to_term = {i: t for t, i in query_tokens.vocab.items()}
        terms = [id_to_term[i] for i in query_tokens.ids[0]]
        retriever = self._retriever(index, key)
        ids = retriever.get_tokens_ids(terms)  # what get_scores does first: the terms the index holds
        if not ids:  # none (bm25s scores zeros, or refuses an index without any term)
            return np.zeros(int(index["num_docs"]))
        return np.asarray(retriever.get_scores_from_ids(ids), dtype=np.float64)


class BM25Retriever(ChunkRetriever):
    """Lexical baseline: Okapi BM25 with English stopwords, k1 and b from the spec."""

    def __init__(self, spec: ModelSpec) -> None:
        import bm25s

        o = cast(BM25Options, spec.options)
        self.k1 = o.k1
        self.b = o.b
        self.chunking = o.chunking
        self.indexers = (BM25Indexer(o.k1, o.b),)
        if o.rerank:
            self.reranker = load_reranker(o.rerank, device=o.device, batch_size=64, shared={})
            self.rerank_depth = o.rerank_depth
        tok = load_tokenizer("minilm")
        meta = model_meta(
            spec,
            tok,
            self.capabilities,
            revision=f"bm25s=={bm25s.__version__}",
            settings={"k1": self.k1, "b": self.b, "stopwords": "en", **self.retrieval_settings()},
        )
        super().__init__(meta, tok)
