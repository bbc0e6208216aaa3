"""BM25 (the `bm25s` package) over the chunks of each context; lengths are measured in MiniLM's tokenizer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from longctx_eval.assets import load_tokenizer
from longctx_eval.models.base import model_meta
from longctx_eval.models.chunk_retriever import ChunkRetriever
from longctx_eval.models.spec import ModelSpec


class BM25Retriever(ChunkRetriever):
    """Lexical baseline: Okapi BM25 with English stopwords, k1 and b from the spec."""

    def __init__(self, spec: ModelSpec) -> None:
        import bm25s

        self._bm25s = bm25s
        self.k1 = spec.options.k1
        self.b = spec.options.b
        tok = load_tokenizer("minilm")
        meta = model_meta(
            spec,
            tok,
            self.capabilities,
            revision=f"bm25s=={bm25s.__version__}",
            settings={"k1": self.k1, "b": self.b, "stopwords": "en"},
        )
        super().__init__(meta, tok)

    def rank(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        corpus_tokens = self._bm25s.tokenize(list(chunks), stopwords="en", show_progress=False)
        retriever = self._bm25s.BM25(k1=self.k1, b=self.b)
        retriever.index(corpus_tokens, show_progress=False)
        query_tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        id_to_term = {i: t for t, i in query_tokens.vocab.items()}
        terms = [id_to_term[i] for i in query_tokens.ids[0]]
        if not terms:
            return np.zeros(len(chunks))
        return np.asarray(retriever.get_scores(terms), dtype=np.float64)
