"""The `retrieval` dataset builder (`longctx-eval build retrieval`): the retrieval task's documents and queries.

Configs: `retrieval_<length>` (one row per query) and `documents` (each document once; a row's context is the
document `doc_id`, unchanged). `--per-cell N` documents per length; `--option topics=N` subjects per document.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from datasets import Features, List, Value

from data_builders.dataset.registry import BuildConfig, BuildContext, CardInfo, Document, Part, builder
from data_builders.retrieval.card import bm25_text, chunking_text
from data_builders.retrieval.docs import (
    DEFAULT_TOPICS,
    RETRIEVAL,
    SCORING,
    RetrievalDoc,
    lexical_overlap,
    retrieval_docs,
)
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.chunking import Chunk, ChunkConfig, chunk_document

CHUNKING = ChunkConfig(max_tokens=RETRIEVAL.chunk_tokens, overlap=RETRIEVAL.chunk_overlap)
"""The chunks retrievers index (`models/retrieval/chunk_retriever.py` builds it from the request's RetrievalParams)."""

RETRIEVAL_VERSION = "2"
"""2: rows carry their context's chunk spans (chunk_starts, chunk_ends); the card states the chunker and BM25."""

_int, _str, _float, _bool = Value("int64"), Value("string"), Value("float64"), Value("bool")
RETRIEVAL_FEATURES = Features(
    {
        "id": _str,
        "doc_id": _str,  # the context: document `doc_id` of the `documents` config
        "query": _str,
        "query_bucket": _str,  # "1-3", "4-6" or "7+" words
        "query_words": _int,
        "query_form": _str,  # short (the subject's name), medium (names it), long (paraphrase, no name)
        "gold_starts": List(_int),  # half-open char spans of the gold sentences in the context
        "gold_ends": List(_int),
        "gold_token_starts": List(_int),  # and their token spans in the dataset's tokenizer
        "gold_token_ends": List(_int),
        "gold_facts": List(_str),  # context[gold_starts[i]:gold_ends[i]] == gold_facts[i]
        "gold_depths": List(_float),
        "chunk_starts": List(_int),  # the context's retrieval chunks, half-open chars, in the dataset's tokenizer
        "chunk_ends": List(_int),
        "names_subject": _bool,
        "lexical_overlap": _float,  # share of the query's content words in its gold sentences
        "topic": _str,
        "subject": _str,
        "target_tokens": _int,  # the context is exactly this many tokens in the dataset's tokenizer
        "doc": _int,
        "seed": _int,
        "haystack_seed": _int,
    }
)

USAGE = """\
Each row of a `retrieval_<length>` config is one query. Its context is the document `doc_id` of the
`documents` config, as stored (every query of a document shares it, so a retriever indexes it once):

```python
docs = {d["doc_id"]: d["text"] for d in load_dataset("<DIR>", "documents", split="test")}
context = docs[row["doc_id"]]
assert [context[s:e] for s, e in zip(row["gold_starts"], row["gold_ends"])] == row["gold_facts"]
```

A retriever chunks the context, ranks the chunks for `query` and is scored by which of its top chunks cover the
gold sentences whole. The context is exactly `target_tokens` tokens in the tokenizer under Provenance: for
retrieval a length is the document's tokens in the retriever's tokenizer (no prompt surrounds it; the
generation tasks' lengths are whole prompt budgets instead).
"""


def card_usage(config: BuildConfig) -> str:
    """The card's usage: reading the rows, then the chunker and the `bm25` baseline, stated in full."""
    return f"{USAGE}\n{chunking_text()}\n\n{bm25_text()}\n"


def topics_option(config: BuildConfig) -> int:
    """`--option topics=N` (subjects per document), default DEFAULT_TOPICS; ConfigError otherwise."""
    raw = config.options.get("topics", str(DEFAULT_TOPICS))
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"--option topics={raw!r}: expected a whole number of subjects per document") from None


def _total(config: BuildConfig) -> int:
    return len(config.lengths) * config.per_cell * 3 * topics_option(config)


def query_rows(doc: RetrievalDoc, seed: int, chunks: Sequence[Chunk] = ()) -> list[dict[str, Any]]:
    """The rows of one document's queries, each with the document's `chunks` (its retrieval chunk spans)."""
    rows = []
    for q in doc.queries:
        gold = [doc.planted[i] for i in q.gold]
        rows.append(
            {
                "id": q.id,
                "doc_id": doc.doc_id,
                "query": q.text,
                "query_bucket": q.bucket,
                "query_words": len(q.text.split()),
                "query_form": q.form,
                "gold_starts": [p.char_start for p in gold],
                "gold_ends": [p.char_end for p in gold],
                "gold_token_starts": [p.token_start for p in gold],
                "gold_token_ends": [p.token_end for p in gold],
                "gold_facts": [p.text for p in gold],
                "gold_depths": [p.depth for p in gold],
                "chunk_starts": [c.char_start for c in chunks],
                "chunk_ends": [c.char_end for c in chunks],
                "names_subject": q.names_subject,
                "lexical_overlap": lexical_overlap(q.text, [p.text for p in gold]),
                "topic": q.kind,
                "subject": q.subject,
                "target_tokens": doc.length,
                "doc": doc.index,
                "seed": seed,
                "haystack_seed": doc.haystack_seed,
            }
        )
    return rows


@builder(
    "retrieval",
    version=RETRIEVAL_VERSION,
    features=RETRIEVAL_FEATURES,
    description="Facts about invented subjects planted in exact-length documents; queries of 1-3, 4-6 and 7+ words.",
    total=_total,
    options={"topics": f"subjects planted per document, 1-12 (default {DEFAULT_TOPICS}); 3 queries each"},
    card=CardInfo(
        tags=("long-context", "retrieval", "information-retrieval"),
        task_categories=("text-retrieval",),
        usage=card_usage,
        scoring=SCORING,
    ),
)
def retrieval_parts(ctx: BuildContext) -> Iterator[Part]:
    """One `retrieval_<length>` part per length: `per_cell` documents, each stored once, 3 queries per subject."""
    cfg = ctx.config
    topics = topics_option(cfg)
    rows: list[dict[str, Any]] = []
    documents: list[Document] = []
    length = None
    for doc in retrieval_docs(ctx.source, ctx.tokenizer, cfg.lengths, cfg.per_cell, cfg.seed, topics):
        if length is not None and doc.length != length:
            yield Part(f"retrieval_{length}", rows, documents)
            rows, documents = [], []
        length = doc.length
        documents.append(Document(doc.doc_id, doc.context, doc.length))
        chunks = chunk_document(doc.context, ctx.tokenizer, CHUNKING)
        rows.extend(query_rows(doc, cfg.seed, chunks))
        ctx.advance(len(doc.queries))
    if length is not None:
        yield Part(f"retrieval_{length}", rows, documents)


def context_of(row: Mapping[str, Any], documents: Mapping[str, str]) -> str:
    """The exact context of a query row, checked against its gold facts."""
    context = documents.get(row["doc_id"])
    if context is None:
        raise DataError(
            f"retrieval row {row.get('id')!r}: document {row['doc_id']!r} is not among the {len(documents)} "
            "documents given; expected the `documents` config of the same dataset"
        )
    got = [context[s:e] for s, e in zip(row["gold_starts"], row["gold_ends"], strict=True)]
    if got != list(row["gold_facts"]):
        raise DataError(f"retrieval row {row.get('id')!r}: gold spans do not match document {row['doc_id']!r}")
    return context
