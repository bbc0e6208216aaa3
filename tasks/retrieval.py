"""Retrieval recall: facts about invented subjects planted in long documents, found through chunk retrieval.

Each query is one sample; the queries of one document share its context, so a retriever chunks and indexes the
document once (and caches the index by content hash). Scored per query through the gold sentences' char spans:
Recall@K for K = 1..100 (a curve), MRR, nDCG@10, the score at each rank (the similarity-decay curve) and the KL
divergence between the gold relevance distribution and the softmax of the scores, by query length.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from data_builders import get_source
from data_builders.haystack.cluster import haystack_cluster
from data_builders.retrieval.docs import (
    DEFAULT_TOPICS,
    RECALL_KS,
    RETRIEVAL,
    RetrievalDoc,
    build_retrieval_doc,
    draw_retrieval_doc,
    lexical_overlap,
)
from longctx_eval import Hit, Prediction, Request, Sample, Score, Task, Tokenizer, any_of, between, curve, mean, task
from longctx_eval.metrics.retrieval import ranking_scores
from longctx_eval.sample_plan import Planned, PlannedDataset

CURVE_KS = RECALL_KS
REPORTED_KS = (1, 5, 10, 20, 50, 100)


def samples_of(doc: RetrievalDoc, **metadata: object) -> Iterator[Sample]:
    """One Sample per query of `doc`, all holding the same context object (indexed once by a retriever)."""
    for q in doc.queries:
        gold = [doc.planted[i] for i in q.gold]
        overlap = lexical_overlap(q.text, [p.text for p in gold])
        yield Sample(
            id=q.id,
            context=doc.context,
            question=q.text,
            gold={
                "spans": [[p.char_start, p.char_end] for p in gold],
                "token_spans": [[p.token_start, p.token_end] for p in gold],
                "facts": [p.text for p in gold],
            },
            metadata={
                "target_tokens": doc.length,
                "stratum": q.bucket,  # --limit spreads over the query-length buckets
                "query_bucket": q.bucket,
                "query_words": len(q.text.split()),
                "query_form": q.form,
                "gold_spans": len(gold),
                "names_subject": q.names_subject,
                "lexical_overlap": overlap,
                "overlap_bucket": "high" if overlap >= 0.5 else "low",
                "topic": q.kind,
                "doc": doc.index,
                "depths": [p.depth for p in gold],
                "haystack_seed": doc.haystack_seed,
                "cluster": haystack_cluster(doc.haystack_seed),  # every query of a document shares it
                **metadata,
            },
        )


def query_request(sample: Sample) -> Request:
    """The document and the query; generators are not asked (the task needs 'retrieve')."""
    return Request(sample.id, sample.question, sample.context, sample.question, max_new_tokens=1, retrieval=RETRIEVAL)


def retrieval_score(sample: Sample, pred: Prediction) -> Score:
    """recall@1..100, mrr, ndcg@10, score@k, kl_bits(_std) from the hits; rerank_ms when the system reranked."""
    spans = [(int(s), int(e)) for s, e in sample.gold["spans"]]
    hits = pred.hits if pred.status == "ok" else ()
    values = ranking_scores(hits, spans, RECALL_KS)
    data = pred.data or {}
    if "rerank_s" in data:
        values["rerank_ms"] = 1000.0 * float(data["rerank_s"])
    return Score(values)


def gold_oracle(sample: Sample) -> Prediction:
    """A perfect ranking: the gold sentences' own spans as the top hits."""
    return Prediction(hits=tuple(Hit(int(s), int(e), 1.0) for s, e in sample.gold["spans"]))


@task(
    name="retrieval",
    version="1",
    requires=any_of("retrieve"),
    default_lengths=[8192, 32768, 131072],
    description="Planted facts in 8K-1M-token documents (length: document tokens in the retriever's tokenizer); "
    "Recall@1..100, MRR, nDCG@10, score decay, KL by query length",
    bounds={"docs_per_length": between(1, 1000), "topics": between(1, 1000)},
    cache_samples=True,  # requests and scores read each Sample alone
)
def retrieval(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    docs_per_length: int = 1,
    topics: int = DEFAULT_TOPICS,
    source: str = "austen",
) -> Task:
    def plan() -> Iterator[Planned]:
        """Every query of every document, drawn without assembling any document (the draw needs no tokenizer)."""
        for length in lengths:
            for index in range(docs_per_length):
                draw = draw_retrieval_doc(length, index, seed, topics)
                cluster = haystack_cluster(draw.haystack_seed)
                for q in draw.queries:
                    yield Planned(q.id, {"target_tokens": length, "stratum": q.bucket, "cluster": cluster})

    def build(chosen: Sequence[Planned]) -> Iterator[Sample]:
        """The chosen queries' samples, in plan order: only the documents that hold one are assembled."""
        if tokenizer is None:
            raise ValueError("retrieval samples are measured in the evaluated model's tokenizer; none was given")
        src = get_source(source)
        ids = {p.id for p in chosen}
        for length in lengths:
            for index in range(docs_per_length):
                if not any(q.id in ids for q in draw_retrieval_doc(length, index, seed, topics).queries):
                    continue
                doc = build_retrieval_doc(src, tokenizer, length, index, seed, topics)
                meta = {"seed": seed, "source": src.name, "source_sha256": src.sha256, "tokenizer": tokenizer.name}
                yield from (s for s in samples_of(doc, **meta) if s.id in ids)

    ks = CURVE_KS
    return Task(
        dataset=PlannedDataset(plan, build),
        prompt=query_request,
        scorer=retrieval_score,
        metrics=[
            mean("recall@5"),
            *(mean(f"recall@{k}") for k in REPORTED_KS if k != 5),
            mean("mrr"),
            mean("ndcg@10"),
            mean("kl_bits"),
            mean("kl_bits_std"),
            mean("rerank_ms"),
        ],
        oracle=gold_oracle,
        primary={"retrieve": "recall@5"},
        slices=("query_bucket", "overlap_bucket"),
        curves=[
            curve("recall_at_k", [f"recall@{k}" for k in ks], ks, "K", "Recall@K"),
            curve("similarity_decay", [f"score@{k}" for k in ks], ks, "rank k", "mean score at rank k"),
        ],
        cluster_noun="documents",
    )
