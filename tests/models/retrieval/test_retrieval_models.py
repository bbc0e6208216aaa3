"""Retrievers end to end with the real MiniLM and bm25s: hybrid fusion, the maxsim reranker, the index cache."""

from __future__ import annotations

import numpy as np
import pytest

from data_builders import get_source
from data_builders.retrieval.docs import RETRIEVAL, build_retrieval_doc
from longctx_eval.errors import ConfigError
from longctx_eval.metrics.retrieval import covering_ranks
from longctx_eval.models.assets import MINILM_SHA256
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.retrieval import hybrid as hybrid_module
from longctx_eval.models.retrieval.dense import DenseIndexer
from longctx_eval.models.retrieval.hybrid import fuse_scores, ranks
from longctx_eval.models.retrieval.index_cache import IndexCache
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request
from longctx_eval.text.sentences import split_sentences


def _load(raw: str, cache: IndexCache, shared=None):
    """The adapter of `raw`; `shared` (a loaded minilm retriever) lends its MiniLM instead of loading another."""
    spec = parse_spec(raw)
    with pytest.MonkeyPatch.context() as mp:
        if shared is not None:
            mp.setattr(hybrid_module, "load_encoder", lambda target, device: (shared.model, MINILM_SHA256, "minilm"))
        adapter = MODEL_KINDS.get(spec.kind).load(spec)
    adapter.cache = cache
    return adapter


@pytest.fixture(scope="module")
def doc(minilm_tokenizer):
    return build_retrieval_doc(get_source("synthetic"), minilm_tokenizer, 2048, 0, 5, topics=3)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return IndexCache(tmp_path_factory.mktemp("index"), disk_bytes=1 << 30)


@pytest.fixture(scope="module")
def minilm(cache):
    return _load("minilm", cache)


def _requests(doc) -> list[Request]:
    return [Request(q.id, q.text, doc.context, q.text, retrieval=RETRIEVAL) for q in doc.queries]


def _recall5(doc, preds) -> float:
    found = []
    for q, p in zip(doc.queries, preds, strict=True):
        ranks_ = covering_ranks(p.hits, [(doc.planted[i].char_start, doc.planted[i].char_end) for i in q.gold])
        found += [r is not None and r <= 5 for r in ranks_]
    return sum(found) / len(found)


def test_fusion_rules_by_hand():
    dense, lexical = np.array([0.9, 0.1, 0.5]), np.array([0.0, 7.0, 7.0])
    assert ranks(dense).tolist() == [1, 3, 2] and ranks(lexical).tolist() == [3, 1, 2]  # ties by document order
    rrf = fuse_scores(dense, lexical, "rrf", 0.5, 60)
    assert rrf.tolist() == pytest.approx([0.5 / 61 + 0.5 / 63, 0.5 / 63 + 0.5 / 61, 0.5 / 62 + 0.5 / 62])
    mm = fuse_scores(dense, lexical, "minmax", 0.25, 60)
    assert mm.tolist() == pytest.approx([0.25 * 1.0, 0.25 * 0.0 + 0.75, 0.25 * 0.5 + 0.75])
    assert fuse_scores(dense, np.zeros(3), "minmax", 0.5, 60).tolist() == pytest.approx(
        (0.5 * np.array([1, 0, 0.5])).tolist()
    )


def test_hybrid_end_to_end_reuses_the_dense_and_bm25_indexes(doc, cache, minilm):
    minilm_preds = minilm.retrieve(_requests(doc))
    bm25 = _load("bm25", cache)
    bm25_preds = bm25.retrieve(_requests(doc))
    for fusion in ("rrf", "minmax"):
        hybrid = _load(f"hybrid?fusion={fusion}&alpha=0.5", cache, shared=minilm)
        preds = hybrid.retrieve(_requests(doc))
        assert all(p.data["index_cache"] == "memory" for p in preds)  # minilm and bm25 built both sides already
        assert set(preds[0].data["index_cache_parts"]) == {"chunks", "dense", "bm25"}
        assert all(len(p.hits) == min(RETRIEVAL.k, p.data["chunks"]) for p in preds)
        assert _recall5(doc, preds) >= 0.5
        # The fused ranking is computed from the two systems' own scores.
        for p, d, b in zip(preds, minilm_preds, bm25_preds, strict=True):
            dense = {(h.char_start, h.char_end): h.score for h in d.hits}
            lexical = {(h.char_start, h.char_end): h.score for h in b.hits}
            spans = sorted(dense)  # every chunk: the document has fewer than k chunks
            fused = fuse_scores(
                np.array([dense[s] for s in spans]), np.array([lexical[s] for s in spans]), fusion, 0.5, 60
            )
            got = {(h.char_start, h.char_end): h.score for h in p.hits}
            assert [got[s] for s in spans] == pytest.approx(fused.tolist())
    assert hybrid.meta.settings["fusion"] == "minmax" and hybrid.meta.kind == "hybrid"


def test_maxsim_reranks_the_top_chunks_by_their_best_sentence(doc, cache, minilm):
    reranked = _load("minilm?rerank=maxsim&rerank_depth=4&name=minilm-maxsim", cache)
    assert reranked.meta.settings["rerank"] == "maxsim" and reranked.meta.identity_sha256 != minilm.meta.identity_sha256
    reqs = _requests(doc)[:3]  # one subject's short, medium and long query
    plain, preds = minilm.retrieve(reqs), reranked.retrieve(reqs)
    model = minilm.model
    for p, first in zip(preds, plain, strict=True):
        assert p.data["rerank_depth"] == 4 and p.data["rerank_s"] >= 0
        head, rest = p.hits[:4], p.hits[4:]
        assert {(h.char_start, h.char_end) for h in head} == {(h.char_start, h.char_end) for h in first.hits[:4]}
        assert rest == first.hits[4:]  # below the depth: first-stage order and scores
        assert [h.score for h in head] == sorted((h.score for h in head), reverse=True)
    # The top score is the best sentence cosine of the top chunk, computed here independently.
    top = preds[0].hits[0]
    text = doc.context[top.char_start : top.char_end]
    sentences = [text[s:e] for s, e in split_sentences(text)]
    vectors = model.encode([doc.queries[0].text, *sentences], normalize_embeddings=True)
    assert top.score == pytest.approx(float((vectors[1:] @ vectors[0]).max()), abs=1e-5)


def test_rerank_options_parse_on_every_retriever_kind_and_unknown_ones_fail():
    for raw in ("bm25?rerank=maxsim&rerank_depth=3", "hybrid?rerank=maxsim", "retriever:minilm?rerank=maxsim"):
        assert parse_spec(raw).options.rerank == "maxsim"
    assert parse_spec("minilm").options.rerank is None and parse_spec("minilm").options.rerank_depth == 20
    with pytest.raises(ConfigError, match="rerank_depth"):
        parse_spec("bm25?rerank=maxsim&rerank_depth=0")
    with pytest.raises(ConfigError, match="rerank"):
        parse_spec("minilm?rerank=colbert")
    with pytest.raises(ConfigError, match="fusion"):
        parse_spec("hybrid?fusion=sum")


class CountingDense(DenseIndexer):
    """The real MiniLM indexer, counting the chunks it encodes."""

    encoded = 0

    def embed(self, texts):
        CountingDense.encoded += len(texts)
        return super().embed(texts)


def test_index_cache_embeds_once_per_document(doc, minilm, tmp_path, minilm_tokenizer):
    cache = IndexCache(tmp_path / "index", disk_bytes=1 << 30)
    base = minilm.indexers[0]
    minilm.indexers = (CountingDense(base.model, base.batch_size, base.identity()["weights"], "cpu"),)
    minilm.cache = cache
    try:
        reqs = _requests(doc)
        first = minilm.retrieve(reqs)
        n_chunks = first[0].data["chunks"]
        assert CountingDense.encoded == n_chunks
        assert [p.data["index_cache"] for p in first] == ["built"] + ["memory"] * (len(reqs) - 1)
        assert first[0].data["embeddings"] == {"embedded": n_chunks, "memory": 0, "disk": 0}
        # On disk: the chunk spans (the document's matrix is assembled from the chunk vectors, kept once) ...
        assert len(list((tmp_path / "index").glob("*/*.npz"))) == 1
        assert len(list((tmp_path / "index" / "embeddings").glob("*/*.npz"))) == 1  # ... and one pack of vectors
        cache.forget_memory()  # as a second process would start
        again = minilm.retrieve(reqs[:2])
        assert CountingDense.encoded == n_chunks and again[0].data["index_cache"] == "disk"
        assert again[0].data["embeddings"] == {"embedded": 0, "memory": 0, "disk": n_chunks}
        assert [p.hits for p in again] == [p.hits for p in first[:2]]  # same ranking from the cached vectors
        other = build_retrieval_doc(get_source("synthetic"), minilm_tokenizer, 1024, 1, 5, topics=1)
        minilm.retrieve([Request("x", "q", other.context, "bell", retrieval=RETRIEVAL)])
        assert CountingDense.encoded > n_chunks  # another document's chunks are embedded
    finally:
        minilm.indexers = (base,)
