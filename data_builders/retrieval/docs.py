"""Retrieval documents: facts about invented subjects planted in an exact-length haystack, with their queries.

One generator for the `retrieval` task (`tasks/retrieval.py`) and the `retrieval` dataset builder, so both give
the same documents. Per document, `topics` subjects (one per topic kind of `retrieval_bank.BANK`) each get 1-3
planted facts and three queries: short (the subject's name: every planted fact is gold), medium (names the
subject, asks one fact) and long (a paraphrase of one fact without the name). Each subject also has a distractor
twin of the same kind under another name, with 1-2 facts other than the long query's (hard negatives). All
sentences go at stratified random depths; the context is exactly `length` tokens in the given tokenizer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from data_builders.haystack.assembly import HaystackSource
from data_builders.haystack.span_insertion import insert_sentences
from data_builders.retrieval.bank import BANK, NAME_HEADS, NAME_TAILS, Fact, TopicKind
from longctx_eval.errors import ConfigError
from longctx_eval.hashing import sha256_json
from longctx_eval.sample import RetrievalParams
from longctx_eval.text.tokenizer import Tokenizer

RETRIEVAL = RetrievalParams(chunk_tokens=128, chunk_overlap=16, k=100)
"""Retrievers chunk each document into 128-token chunks (16 shared with the previous) and return the top 100."""
RECALL_KS = tuple(range(1, RETRIEVAL.k + 1))
BUCKETS = ("1-3", "4-6", "7+")
"""Query-length buckets, in words (whitespace-separated)."""
DEFAULT_TOPICS = 8
_WORD = re.compile(r"\w\w+")


def query_bucket(query: str) -> str:
    """The query's length bucket: "1-3", "4-6" or "7+" words."""
    n = len(query.split())
    return BUCKETS[0] if n <= 3 else BUCKETS[1] if n <= 6 else BUCKETS[2]


def content_words(text: str) -> set[str]:
    """Lower-cased words of 2+ characters minus BM25's English stopwords (what a lexical retriever matches)."""
    from bm25s.stopwords import STOPWORDS_EN

    stop = set(STOPWORDS_EN)
    return {w for w in _WORD.findall(text.lower()) if w not in stop}


def lexical_overlap(query: str, gold: Sequence[str]) -> float:
    """Share of the query's content words found in its gold sentences (0 when it has none)."""
    words = content_words(query)
    found = content_words(" ".join(gold))
    return round(len(words & found) / len(words), 3) if words else 0.0


@dataclass(frozen=True)
class Planted:
    """One planted sentence: its text, exact char and token spans, the subject it is about and its role."""

    text: str
    char_start: int
    char_end: int
    token_start: int
    token_end: int
    subject: str
    kind: str  # topic kind noun
    fact: int  # index into the kind's facts
    target: bool  # False for a distractor twin's fact
    depth: float  # actual depth (token_start / length)


@dataclass(frozen=True)
class Query:
    """One query and its gold: the planted sentences (indices into `RetrievalDoc.planted`) that answer it."""

    id: str
    text: str
    form: str  # "short", "medium" or "long"
    kind: str
    subject: str
    gold: tuple[int, ...]
    names_subject: bool

    @property
    def bucket(self) -> str:
        return query_bucket(self.text)


@dataclass(frozen=True)
class RetrievalDoc:
    """A document of exactly `length` tokens with its planted sentences and queries."""

    doc_id: str
    length: int
    index: int
    context: str
    planted: tuple[Planted, ...]
    queries: tuple[Query, ...]
    haystack_seed: int


def _names(rng: random.Random, n: int) -> list[str]:
    pool = [h + t for h in NAME_HEADS for t in NAME_TAILS]
    return rng.sample(pool, n)


def _fill(template: str, name: str, values: dict[str, int]) -> str:
    return template.format(N=name, **values)


def _values(rng: random.Random, fact: Fact) -> dict[str, int]:
    year = rng.randint(1610, 1790)
    return {"year": year, "year2": year + rng.randint(15, 90), "num": rng.randint(*fact.num)}


def _check_topics(topics: int) -> None:
    if isinstance(topics, bool) or not isinstance(topics, int) or not 1 <= topics <= len(BANK):
        raise ConfigError(f"topics: expected an integer from 1 to {len(BANK)} (topic kinds), got {topics!r}")


@dataclass(frozen=True)
class DocDraw:
    """What a document's generator draws before any text is assembled: its planted sentences, where they go,
    its queries and its haystack's seed (cheap: no tokenizer, no haystack)."""

    doc_id: str
    length: int
    index: int
    sentences: tuple[tuple[str, str, str, int, bool], ...]  # text, subject, kind, fact, target
    slots: tuple[float, ...]
    queries: tuple[Query, ...]
    haystack_seed: int


def draw_retrieval_doc(length: int, index: int, seed: int, topics: int = DEFAULT_TOPICS) -> DocDraw:
    """Document `index`'s draw: deterministic in (length, index, seed, topics); `build_retrieval_doc` assembles it."""
    _check_topics(topics)
    rng = random.Random(sha256_json(["retrieval", seed, length, index, topics]))
    kinds: list[TopicKind] = rng.sample(BANK, topics)
    names = _names(rng, 2 * topics)
    sentences: list[tuple[str, str, str, int, bool]] = []
    plans = []
    for t, kind in enumerate(kinds):
        subject, twin = names[2 * t], names[2 * t + 1]
        planted = sorted(rng.sample(range(3), rng.randint(1, 3)))
        long_fact = rng.choice(planted)
        medium_fact = rng.choice([f for f in planted if f != long_fact] or planted)
        first = len(sentences)
        for f in planted:
            fact = kind.facts[f]
            sentences.append((_fill(fact.sentence, subject, _values(rng, fact)), subject, kind.noun, f, True))
        others = [f for f in range(3) if f != long_fact]
        for f in sorted(rng.sample(others, rng.randint(1, 2))):
            fact = kind.facts[f]
            sentences.append((_fill(fact.sentence, twin, _values(rng, fact)), twin, kind.noun, f, False))
        gold_of = {f: first + i for i, f in enumerate(planted)}
        plans.append((kind, subject, rng.choice(kind.short), planted, medium_fact, long_fact, gold_of))
    n = len(sentences)
    slots = [0.02 + 0.96 * (i + rng.uniform(0.2, 0.8)) / n for i in range(n)]
    rng.shuffle(slots)
    hseed = int(sha256_json(["retrieval-haystack", seed, length, index])[:8], 16)
    doc_id = f"L{length}-doc{index}"
    queries = []
    for kind, subject, short, planted, medium_fact, long_fact, gold_of in plans:
        base = f"{doc_id}-{kind.noun}"
        queries += [
            Query(f"{base}-short", short.format(N=subject), "short", kind.noun, subject,
                  tuple(gold_of[f] for f in planted), True),
            Query(f"{base}-medium", kind.facts[medium_fact].medium.format(N=subject), "medium", kind.noun, subject,
                  (gold_of[medium_fact],), True),
            Query(f"{base}-long", kind.facts[long_fact].long, "long", kind.noun, subject, (gold_of[long_fact],),
                  False),
        ]  # fmt: skip
    return DocDraw(doc_id, length, index, tuple(sentences), tuple(slots), tuple(queries), hseed)


def build_retrieval_doc(
    source: HaystackSource, tokenizer: Tokenizer, length: int, index: int, seed: int, topics: int = DEFAULT_TOPICS
) -> RetrievalDoc:
    """Document `index` of `length` tokens; deterministic in (source, tokenizer, length, index, seed, topics)."""
    draw = draw_retrieval_doc(length, index, seed, topics)
    placed = [(s[0], d) for s, d in zip(draw.sentences, draw.slots, strict=True)]
    doc = insert_sentences(source, tokenizer, length, placed, draw.haystack_seed)
    planted_out = tuple(
        Planted(
            text=sp.text,
            char_start=sp.char_start,
            char_end=sp.char_end,
            token_start=sp.token_start,
            token_end=sp.token_end,
            subject=s[1],
            kind=s[2],
            fact=s[3],
            target=s[4],
            depth=round(sp.actual_depth, 4),
        )
        for s, sp in zip(draw.sentences, doc.spans, strict=True)
    )
    return RetrievalDoc(draw.doc_id, length, index, doc.context, planted_out, draw.queries, draw.haystack_seed)


def retrieval_docs(
    source: HaystackSource,
    tokenizer: Tokenizer,
    lengths: Sequence[int],
    docs_per_length: int,
    seed: int,
    topics: int = DEFAULT_TOPICS,
) -> Iterator[RetrievalDoc]:
    """Every document, ordered by length, then index."""
    for length in lengths:
        for index in range(docs_per_length):
            yield build_retrieval_doc(source, tokenizer, length, index, seed, topics)


SCORING = f"""\
Retrievers chunk each document ({RETRIEVAL.chunk_tokens}-token sentence-aware chunks, {RETRIEVAL.chunk_overlap}
tokens shared with the previous chunk, in the retriever's tokenizer) and return the top {RETRIEVAL.k} chunks
for the query. A gold sentence (`gold_starts[i]:gold_ends[i]` of the context) counts as found at rank r when the
chunk returned at rank r covers all of it. Per query: `recall@K` (K = 1..{RETRIEVAL.k}) = share of its gold
sentences found within the top K; `mrr` = 1 / rank of the first chunk covering any gold sentence; `ndcg@10`
with binary gains (a chunk gains 1 when it covers a gold sentence no higher chunk covered; ideal DCG from the
number of gold sentences); `score@k` = the system's score at rank k; `kl_bits` = KL(P || softmax(scores / T)) in
bits over the returned chunks, P uniform over the returned chunks that cover a gold sentence (T = 1; `kl_bits_std`:
T = standard deviation of the returned scores), absent when no returned chunk covers one. Metrics are means over
queries, per length and per query-length bucket (1-3, 4-6, 7+ words). Full definitions: docs/retrieval.md.
"""
