"""BM25 indexes assembled from cached per-chunk term counts equal bm25s's own, array for array and score for score.

The reference is the straightforward path (`bm25_arrays.bm25s_arrays`: `bm25s.tokenize` + `BM25.index`, what
`BM25Indexer.build` ran before) and bm25s's own `get_scores` on an index it built itself. Real contexts: needle
samples on one shared haystack (the needle builder), the retrieval task's documents and their queries, plus
hand-made chunks for repeated and absent query terms, ties, stopword-only chunks and duplicate chunks.
"""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest

from data_builders import get_source
from data_builders.needle.grid import RETRIEVAL
from data_builders.needle.insertion import build_needle_doc
from data_builders.retrieval.docs import build_retrieval_doc
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.retrieval import bm25 as bm25_module
from longctx_eval.models.retrieval.bm25 import BM25Indexer
from longctx_eval.models.retrieval.bm25_arrays import BM25_ARRAYS, assemble, bm25s_arrays
from longctx_eval.models.retrieval.chunk_retriever import top_k
from longctx_eval.models.retrieval.index_cache import IndexCache
from longctx_eval.models.retrieval.term_counts import TermCounts
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request
from longctx_eval.text.chunking import ChunkConfig, chunk_document

K1, B = 1.5, 0.75
LENGTH = 4096
"""MiniLM tokens per document: about 36 chunks of 128."""


@pytest.fixture(scope="module")
def needles(minilm_tokenizer):
    """Five needle samples on one haystack (as the needle family's 25 depths share one), 0% to 100% deep."""
    src = get_source("austen")
    return [
        build_needle_doc(src, minilm_tokenizer, LENGTH, depth, random.Random(i), haystack_seed=77)
        for i, depth in enumerate((0.0, 0.25, 0.5, 0.75, 1.0))
    ]


@pytest.fixture(scope="module")
def retrieval_docs(minilm_tokenizer):
    return [build_retrieval_doc(get_source("austen"), minilm_tokenizer, LENGTH, i, 0, topics=4) for i in range(2)]


def _chunks(context: str, tokenizer) -> list[str]:
    cfg = ChunkConfig(RETRIEVAL.chunk_tokens, RETRIEVAL.chunk_overlap)
    return [c.text for c in chunk_document(context, tokenizer, cfg)]


def _fresh() -> TermCounts:
    from bm25s.stopwords import STOPWORDS_EN

    return TermCounts(STOPWORDS_EN)


def _assert_same_arrays(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want) == set(BM25_ARRAYS)
    for name in BM25_ARRAYS:
        assert got[name].dtype == want[name].dtype, name
        assert got[name].shape == want[name].shape, name
        assert np.array_equal(got[name], want[name]), name  # float32 weights: bit for bit (no NaN can occur)
    assert got["data"].tobytes() == want["data"].tobytes()


def _bm25s_scores(texts: list[str], query: str, k1: float = K1, b: float = B) -> np.ndarray:
    """bm25s end to end on its own index: tokenize, index, get_scores (float32)."""
    retriever = bm25s.BM25(k1=k1, b=b)
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    query_tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    if not query_tokens:
        return np.zeros(len(texts), dtype=np.float32)
    return retriever.get_scores(query_tokens)


def _assert_same_scores(texts: list[str], queries: list[str], k1: float = K1, b: float = B) -> None:
    """Our indexer (assembled index, its `score`) against bm25s end to end: equal float32 sums, equal top 100."""
    indexer = BM25Indexer(k1, b)
    indexer.term_counts = _fresh()
    index = indexer.build(texts)
    for n, query in enumerate(queries):
        want = _bm25s_scores(texts, query, k1, b)
        got = indexer.score(index, query, key=f"doc-{id(texts)}")
        assert got.dtype == np.float64 and want.dtype == np.float32
        assert np.array_equal(got, want.astype(np.float64)), query  # float32 sums widened exactly
        assert np.array_equal(top_k(got, 100), top_k(want.astype(np.float64), 100)), query
        assert n or got.any()  # the first query of each set matches something: not a test of zeros


def test_needle_samples_on_one_haystack_assemble_bm25s_arrays(needles, minilm_tokenizer):
    counts = _fresh()
    seen: set[str] = set()
    for doc in needles:
        texts = _chunks(doc.context, minilm_tokenizer)
        before = counts.tokenized
        got = assemble(counts.of(texts), counts.terms, K1, B)
        _assert_same_arrays(got, bm25s_arrays(texts, K1, B))
        assert counts.tokenized - before == len(set(texts) - seen)  # only chunks not seen before are tokenized
        seen |= set(texts)
    # The haystack is shared: later samples tokenize a few chunks, not all of theirs.
    assert counts.reused > counts.tokenized


def test_needle_scores_and_rankings_equal_bm25s(needles, minilm_tokenizer):
    for doc in needles[::2]:
        texts = _chunks(doc.context, minilm_tokenizer)
        key = doc.key
        _assert_same_scores(
            texts,
            [
                doc.question,
                f"magic number {key} magic number {key}",  # repeated terms add once per occurrence
                f"{doc.value} zzyzxqv unheardofword",  # the answer plus terms no chunk holds
                "the of and to",  # stopwords only: zeros
                "miss miss elizabeth",  # common words of the haystack: many ties at equal tf and length
            ],
        )


def test_retrieval_documents_and_their_queries_score_as_bm25s(retrieval_docs, minilm_tokenizer):
    for doc in retrieval_docs:
        texts = _chunks(doc.context, minilm_tokenizer)
        _assert_same_arrays(BM25Indexer(K1, B).build(texts), bm25s_arrays(texts, K1, B))
        _assert_same_scores(texts, [q.text for q in doc.queries])
        _assert_same_scores(texts, [q.text for q in doc.queries[:3]], k1=0.9, b=0.4)  # other parameters


def test_hand_made_chunks_ties_empty_and_duplicate_chunks():
    texts = [
        "Bells and bells: the bell rang.",
        "The the the, a an of!",  # stopwords only: length 0
        "Bells and bells: the bell rang.",  # a duplicate chunk
        "x y z 7",  # one-character words only: no term at all
        "BELL bell Bell ringing",
        "Ringing bells, ringing bells.",
        "rang bell",  # ties: "rang bell" and "bell rang" score the same
        "bell rang",
    ]
    counts = _fresh()
    got = assemble(counts.of(texts), counts.terms, K1, B)
    _assert_same_arrays(got, bm25s_arrays(texts, K1, B))
    assert counts.tokenized == 7 and counts.reused == 1
    _assert_same_scores(texts, ["bell rang", "bells bells ringing", "bell", "nothing here", "rang rang bell"])
    indexer = BM25Indexer(K1, B)
    scores = indexer.score(indexer.build(texts), "bell rang", key="ties")
    assert scores[6] == scores[7] and list(top_k(scores, 8)).index(6) < list(top_k(scores, 8)).index(7)


def test_a_document_without_any_term_scores_zero_where_bm25s_cannot_index_it():
    texts = ["the of a", "x 1 y", "..."]
    with np.errstate(invalid="ignore"), pytest.raises(ValueError):
        bm25s_arrays(texts, K1, B)  # bm25s has no vocabulary to add its empty token to
    indexer = BM25Indexer(K1, B)
    index = indexer.build(texts)
    assert indexer.check(index, len(texts)) is None
    assert np.array_equal(indexer.score(index, "bell", key="empty"), np.zeros(3))


def test_cached_and_uncached_agree_after_a_chunk_changes(needles, minilm_tokenizer):
    texts = _chunks(needles[1].context, minilm_tokenizer)
    counts = _fresh()
    assemble(counts.of(texts), counts.terms, K1, B)  # the document once: every chunk cached
    changed = list(texts)
    changed[3] = "The Varkholt bell was cast in 1742 by Lisktherpe. " + changed[3]
    changed[7] = changed[7] + " Bell bell ringing."
    changed.insert(10, "A new chunk about the Varkholt bell.")
    del changed[20]
    before = counts.tokenized
    cached = assemble(counts.of(changed), counts.terms, K1, B)
    assert counts.tokenized - before == 3  # the changed and the new chunk, no other
    uncached_counts = _fresh()
    uncached = assemble(uncached_counts.of(changed), uncached_counts.terms, K1, B)
    reference = bm25s_arrays(changed, K1, B)
    _assert_same_arrays(cached, reference)
    _assert_same_arrays(uncached, reference)
    # And the original document again, from the cache after the change: still bm25s's.
    _assert_same_arrays(assemble(counts.of(texts), counts.terms, K1, B), bm25s_arrays(texts, K1, B))


def test_a_bounded_cache_evicts_the_oldest_chunks_and_stays_exact(needles, minilm_tokenizer):
    from bm25s.stopwords import STOPWORDS_EN

    counts = TermCounts(STOPWORDS_EN, memory_bytes=20_000)  # room for some 128-token chunks, not a document's
    for doc in needles[:3]:
        texts = _chunks(doc.context, minilm_tokenizer)
        _assert_same_arrays(assemble(counts.of(texts), counts.terms, K1, B), bm25s_arrays(texts, K1, B))
        assert counts._held <= 20_000 or len(counts._memory) == 1
    assert counts.tokenized > len(set(_chunks(needles[0].context, minilm_tokenizer)))  # chunks were tokenized again
    counts.clear()
    assert not counts.terms and counts._held == 0
    texts = _chunks(needles[3].context, minilm_tokenizer)
    _assert_same_arrays(assemble(counts.of(texts), counts.terms, K1, B), bm25s_arrays(texts, K1, B))


def test_bm25_retriever_hits_equal_the_bm25s_build_path(needles, monkeypatch):
    """The whole retriever (chunking, index cache, scoring, top 100) with the assembled index and with bm25s's."""
    spec = parse_spec("bm25")
    adapter = MODEL_KINDS.get(spec.kind).load(spec)
    requests = [Request(f"s{i}", d.question, d.context, d.question, retrieval=RETRIEVAL) for i, d in enumerate(needles)]
    requests.append(Request("miss", "Varkholt bell", needles[0].context, "Varkholt bell", retrieval=RETRIEVAL))
    adapter.cache = IndexCache(None, 0)
    assembled = adapter.retrieve(requests)
    with monkeypatch.context() as mp:
        mp.setattr(bm25_module.BM25Indexer, "build", lambda self, texts: bm25s_arrays(texts, self.k1, self.b))
        adapter.cache = IndexCache(None, 0)
        adapter.indexers[0]._restored.clear()
        reference = adapter.retrieve(requests)
    for got, want in zip(assembled, reference, strict=True):
        assert got.hits == want.hits  # spans and float scores, in order
        assert got.data["index_cache"] == want.data["index_cache"]
    assert [p.data["index_cache"] for p in assembled] == ["built"] * len(needles) + ["memory"]
    assert assembled[0].hits and assembled[0].hits[0].score > 0


def test_the_chunk_tokenizer_is_bm25s_tokenize_with_its_defaults():
    """term_counts re-implements bm25s.tokenize's splitting: pinned to the installed bm25s's own defaults."""
    import inspect

    from bm25s.stopwords import STOPWORDS_EN

    from data_builders.retrieval.card import TOKEN_PATTERN as CARD_PATTERN
    from longctx_eval.models.retrieval.term_counts import TOKEN_PATTERN

    defaults = inspect.signature(bm25s.tokenize).parameters
    assert TOKEN_PATTERN == CARD_PATTERN == defaults["token_pattern"].default
    assert defaults["lower"].default is True and defaults["stemmer"].default is None
    counts = _fresh()
    text = "Ünïcode ÀND the Straße, x2 ab_c 42 a1 -- it's O'Neil's"
    (terms,) = counts.of([text])
    got = [counts.terms[i] for i in terms.ids.tolist()]
    (want,) = bm25s.tokenize([text], stopwords="en", show_progress=False, return_ids=False)
    assert got == list(dict.fromkeys(want)) and terms.length == len(want)
    assert counts._stopwords == frozenset(STOPWORDS_EN)
