"""The retrieval task's data: deterministic, exact gold spans, coverable by the chunker, oracle 100%, wrong 0.

Also the `retrieval` dataset builder: plain `datasets.load_dataset` reads back the task's own documents and queries.
"""

from __future__ import annotations

import datasets
import pytest

from data_builders import get_source
from data_builders.dataset.export import build_dataset
from data_builders.dataset.registry import BuildConfig
from data_builders.retrieval.bank import BANK
from data_builders.retrieval.builder import context_of
from data_builders.retrieval.docs import BUCKETS, RETRIEVAL, build_retrieval_doc, query_bucket
from longctx_eval import Hit, Prediction
from longctx_eval.discovery import discover
from longctx_eval.hashing import sha256_json
from longctx_eval.text.chunking import ChunkConfig, chunk_document
from longctx_eval.text.offset_index import OffsetIndex

LENGTH, TOPICS = 2048, 3


@pytest.fixture(scope="module")
def task_info():
    return discover()["retrieval"]


@pytest.fixture(scope="module")
def samples(task_info, minilm_tokenizer):
    task = task_info.build(
        {"topics": TOPICS, "source": "synthetic"}, lengths=[LENGTH], seed=3, tokenizer=minilm_tokenizer
    )
    return task, list(task.samples())


def test_samples_are_deterministic_and_share_one_context(task_info, samples, minilm_tokenizer):
    task, first = samples
    again = task_info.build(
        {"topics": TOPICS, "source": "synthetic"}, lengths=[LENGTH], seed=3, tokenizer=minilm_tokenizer
    )
    second = list(again.samples())
    digest = [sha256_json([s.id, s.context, s.question, s.gold, s.metadata]) for s in first]
    assert digest == [sha256_json([s.id, s.context, s.question, s.gold, s.metadata]) for s in second]
    assert len(first) == 3 * TOPICS and len({s.id for s in first}) == len(first)
    assert len({s.context for s in first}) == 1  # every query of the document on one context
    assert minilm_tokenizer.count(first[0].context) == LENGTH
    other = task_info.build(
        {"topics": TOPICS, "source": "synthetic"}, lengths=[LENGTH], seed=4, tokenizer=minilm_tokenizer
    )
    assert next(iter(other.samples())).context != first[0].context


def test_every_gold_span_maps_back_exactly(samples, minilm_tokenizer):
    _, rows = samples
    context = rows[0].context
    enc = minilm_tokenizer.encode(context)
    chunks = chunk_document(context, minilm_tokenizer, ChunkConfig(RETRIEVAL.chunk_tokens, RETRIEVAL.chunk_overlap))
    index = OffsetIndex(chunks, len(context), len(enc.ids))
    for s in rows:
        assert len(s.gold["spans"]) == s.metadata["gold_spans"] >= 1
        for (start, end), (ts, te), fact in zip(s.gold["spans"], s.gold["token_spans"], s.gold["facts"], strict=True):
            assert context[start:end] == fact
            assert enc.offsets[ts][0] == start and enc.offsets[te - 1][1] == end  # the token span is the fact's
            assert index.covering(start, end), f"{s.id}: no {RETRIEVAL.chunk_tokens}-token chunk covers {fact!r}"


def test_query_buckets_and_forms(samples):
    _, rows = samples
    assert {s.metadata["query_bucket"] for s in rows} == set(BUCKETS)
    for s in rows:
        assert s.metadata["query_bucket"] == query_bucket(s.question) == s.metadata["stratum"]
        assert s.metadata["query_form"] == {"1-3": "short", "4-6": "medium", "7+": "long"}[s.metadata["query_bucket"]]
        assert 0.0 <= s.metadata["lexical_overlap"] <= 1.0
        if s.metadata["query_form"] != "short":
            assert s.metadata["gold_spans"] == 1


def test_bank_queries_fall_in_their_buckets():
    for kind in BANK:
        assert all(query_bucket(q.format(N="Name")) == "1-3" for q in kind.short)
        for fact in kind.facts:
            assert query_bucket(fact.medium.format(N="Name")) == "4-6" and "{N}" in fact.medium
            assert query_bucket(fact.long) == "7+" and "{N}" not in fact.long
            assert fact.sentence.count(".") == 1 and fact.sentence.endswith(".")  # one sentence, never split


def test_oracle_scores_100_and_a_wrong_system_0(samples):
    task, rows = samples
    for s in rows:
        perfect = task.scorer(s, task.oracle(s)).values
        g = len(s.gold["spans"])  # K < g spans cannot all be in the top K: recall@K = K / g at best
        assert [perfect[f"recall@{k}"] for k in range(1, 101)] == [min(k, g) / g for k in range(1, 101)]
        assert perfect["mrr"] == 1.0 and perfect["ndcg@10"] == pytest.approx(1.0)
        assert perfect["kl_bits"] == pytest.approx(0.0, abs=1e-12)
        # Wrong: the 100 chunks that cover no gold sentence (all of them, here: the document is short).
        gold = [tuple(g) for g in s.gold["spans"]]
        step = len(s.context) // 200
        wrong = tuple(
            Hit(a, a + step, 1.0 - i / 1000)
            for i, a in enumerate(range(0, len(s.context) - step, step))
            if not any(a <= g0 < a + step or a < g1 <= a + step for g0, g1 in gold)
        )[:100]
        bad = task.scorer(s, Prediction(hits=wrong)).values
        assert bad["recall@100"] == 0.0 and bad["mrr"] == 0.0 and bad["ndcg@10"] == 0.0 and "kl_bits" not in bad
        failed = task.scorer(s, Prediction(status="error", error="boom")).values
        assert failed["recall@100"] == 0.0


def test_rerank_latency_is_reported_when_present(samples):
    task, rows = samples
    s = rows[0]
    pred = Prediction(hits=task.oracle(s).hits, data={"rerank_s": 0.25, "index_cache": "memory"})
    assert task.scorer(s, pred).values["rerank_ms"] == 250.0
    assert "rerank_ms" not in task.scorer(s, task.oracle(s)).values


def test_task_declares_slices_curves_and_primary(samples):
    task, _ = samples
    assert task.primary_metric("retrieve").name == "recall@5"
    assert "query_bucket" in task.slices
    curves = {c.name: c for c in task.curves}
    assert curves["recall_at_k"].fields == tuple(f"recall@{k}" for k in range(1, 101))
    assert curves["recall_at_k"].x == tuple(float(k) for k in range(1, 101))
    assert curves["similarity_decay"].fields[0] == "score@1"


def test_dataset_builder_loads_with_plain_load_dataset(samples, minilm_tokenizer, tmp_path):
    _, rows = samples
    config = BuildConfig(lengths=(LENGTH,), seed=3, source="synthetic", options={"topics": str(TOPICS)})
    report = build_dataset("retrieval", config, tmp_path / "ds", minilm_tokenizer)
    assert sorted(e.name for e in report.configs) == ["documents", f"retrieval_{LENGTH}"]
    assert "## Scoring" in report.card and "recall@K" in report.card
    cache = str(tmp_path / "cache")
    docs = datasets.load_dataset(str(report.out), "documents", split="test", cache_dir=cache)
    queries = datasets.load_dataset(str(report.out), f"retrieval_{LENGTH}", split="test", cache_dir=cache)
    documents = {d["doc_id"]: d["text"] for d in docs}
    assert len(documents) == 1 and len(queries) == len(rows)
    for row, s in zip(queries, rows, strict=True):
        assert row["id"] == s.id and row["query"] == s.question
        assert context_of(row, documents) == s.context
        assert [[a, b] for a, b in zip(row["gold_starts"], row["gold_ends"], strict=True)] == s.gold["spans"]
        assert row["query_bucket"] == s.metadata["query_bucket"]


def test_a_document_is_exact_at_its_length_with_the_default_topics(minilm_tokenizer):
    doc = build_retrieval_doc(get_source("synthetic"), minilm_tokenizer, 8192, 0, 0)
    assert minilm_tokenizer.count(doc.context) == 8192
    assert len(doc.queries) == 24 and sum(p.target for p in doc.planted) >= 8
    assert all(doc.context[p.char_start : p.char_end] == p.text for p in doc.planted)
