"""How much a question shares with the needle that answers it: BM25 and MiniLM cosine, and a bucket of the two.

Stored on every needle-family sample, so any result can be sliced by how lexically easy the question was.
Definitions (docs/needle.md states them in full):

- `overlap_bm25`: the Okapi BM25 score (the `bm25s` package, Lucene variant, k1 = 1.5, b = 0.75) of the
  question against the needle sentence, where the corpus is the document's sentences: the context cut at
  every sentence end (`span_insertion.sentence_ends`) and at both ends of every inserted needle,
  whitespace-stripped, empty pieces dropped. Terms are `bm25s.tokenize` tokens (lowercased words of two or
  more characters) minus STOPWORDS (function words), so only content words count; IDF and the average
  sentence length come from that corpus.
- `overlap_cosine`: cosine of the packaged MiniLM's normalized embeddings of the question and the needle.
- `overlap_bucket`: "none" when the question shares no BM25 term with the needle (`overlap_bm25` == 0),
  else "low" when `overlap_cosine` < COSINE_HIGH, else "high".

Both numbers are rounded to 4 decimals.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from data_builders.haystack.span_insertion import sentence_ends


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


STOPWORDS = _words(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing done down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me might
    more most must my myself no nor not now of off on once only or other our ours ourselves out over own
    same shall she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up upon us very was we were what when where which while who
    whom whose why will with would yes yet you your yours yourself yourselves also ever never one ones
    """
)
"""English function words: BM25 terms and the low-overlap check count content words only."""
_STOP = frozenset(STOPWORDS)
BM25_K1 = 1.5
BM25_B = 0.75
COSINE_HIGH = 0.5
"""The cosine from which a question that shares a term with its needle counts as "high" overlap."""
BUCKETS = ("none", "low", "high")


_WORD = re.compile(r"[a-z]+")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "er", "ied", "ies", "ed", "es", "s", "ly")


def content_words(text: str) -> set[str]:
    """The lowercased words of `text` (letters only; an apostrophe splits) that are not STOPWORDS."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1}


def stem(word: str) -> str:
    """A crude stem: the first matching suffix of _SUFFIXES cut when at least 3 letters remain."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def shared_content_words(a: str, b: str) -> set[tuple[str, str]]:
    """Content-word pairs of `a` and `b` that match: same stem, or the same first 5 letters."""
    return {
        (x, y)
        for x in content_words(a)
        for y in content_words(b)
        if stem(x) == stem(y) or (len(x) >= 5 and len(y) >= 5 and x[:5] == y[:5])
    }


@dataclass(frozen=True)
class Overlap:
    """A question's overlap with its needle sentence."""

    bm25: float
    cosine: float

    @property
    def bucket(self) -> str:
        """ "none", "low" or "high" (see the module docstring)."""
        return overlap_bucket(self.bm25, self.cosine)

    def metadata(self) -> dict[str, Any]:
        """The sample metadata fields: overlap_bm25, overlap_cosine, overlap_bucket."""
        return {"overlap_bm25": self.bm25, "overlap_cosine": self.cosine, "overlap_bucket": self.bucket}


def overlap_bucket(bm25: float, cosine: float) -> str:
    """The bucket of one (BM25, cosine) pair: "none" (no shared term), "low" or "high" (by cosine)."""
    if bm25 <= 0.0:
        return "none"
    return "high" if cosine >= COSINE_HIGH else "low"


def document_sentences(context: str, needles: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The context's sentence spans: cut at sentence ends and at both ends of each needle, stripped, non-empty."""
    cuts = set(sentence_ends(context, len(context)))
    for start, end in needles:
        cuts.update((start, end))
    cuts.update((0, len(context)))
    bounds = sorted(cuts)
    spans = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        piece = context[a:b]
        lead = len(piece) - len(piece.lstrip())
        trail = len(piece.rstrip())
        if trail > lead:
            spans.append((a + lead, a + trail))
    return spans


def bm25_scores(
    questions: Sequence[str],
    context: str,
    targets: Sequence[tuple[int, int]],
    needles: Sequence[tuple[int, int]] = (),
) -> list[float]:
    """The BM25 score of each question against its target needle (same order), IDF from the document's sentences.

    `needles`: every inserted needle's span (targets are added), so each one is a sentence of its own. Computed
    from per-sentence term statistics (`sentence_terms`, memoised by sentence text), with bm25s's arithmetic:
    the same numbers as indexing the whole corpus with bm25s (`bm25_scores_indexed`; tested), without the index.
    """

    spans = document_sentences(context, [*targets, *needles])
    index = {span: i for i, span in enumerate(spans)}
    missing = [t for t in targets if t not in index]
    if missing:
        raise ValueError(f"needle span {missing[0]} is not one of the document's sentences")
    stats = sentence_terms([context[a:b] for a, b in spans])
    queries = [_tokens(q) for q in questions]
    asked = {t for q in queries for t in q}
    df = dict.fromkeys(asked, 0)
    for _, distinct in stats:
        for t in asked & distinct:
            df[t] += 1
    n_docs = len(spans)
    avg_len = np.array([n for n, _ in stats]).mean()  # as bm25s: numpy's mean of the lengths
    out = []
    for query, (a, b) in zip(queries, targets, strict=True):
        score = _target_score(query, _tokens(context[a:b]), df, n_docs, avg_len) if query else 0.0
        out.append(round(score, 4))
    return out


def _tokens(text: str) -> list[str]:
    """The BM25 terms of `text`: `bm25s.tokenize` with STOPWORDS, in order, repeats kept."""
    import bm25s

    return bm25s.tokenize([text], stopwords=list(STOPWORDS), show_progress=False, return_ids=False)[0]


def _target_score(query: Sequence[str], doc: Sequence[str], df: dict[str, int], n_docs: int, avg_len: Any) -> float:
    """bm25s's score of one document for `query`: float32 idf x tfc per term (its Lucene variant), summed in float32
    over the query's terms in order (a repeated term counts each time), as its index and `get_scores` compute it."""
    counts = Counter(doc)
    present = [t for t in counts if t in df]
    if not present:
        return 0.0
    tf = np.array([counts[t] for t in present], dtype=np.float32)
    idf = np.array([math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5)) for t in present], dtype=np.float32)
    tfc = tf / (BM25_K1 * ((1 - BM25_B) + BM25_B * len(doc) / avg_len) + tf)
    per_term = dict(zip(present, (idf * tfc).astype(np.float32).tolist(), strict=True))
    total = np.zeros(1, dtype=np.float32)
    for t in query:
        if t in per_term:
            total += np.float32(per_term[t])
    return float(total[0])


_TERMS: dict[str, tuple[int, frozenset[str]]] = {}
_TERMS_MAX = 160_000
"""Sentences whose statistics are kept (the oldest dropped first): about four 1M-token haystacks."""


def sentence_terms(sentences: Sequence[str]) -> list[tuple[int, frozenset[str]]]:
    """Each sentence's number of BM25 terms (`_tokens`: repeats count) and its set of terms, memoised by text."""
    import bm25s

    new = list(dict.fromkeys(s for s in sentences if s not in _TERMS))
    if new:
        tokenized = bm25s.tokenize(new, stopwords=list(STOPWORDS), show_progress=False, return_ids=False)
        for sentence, toks in zip(new, tokenized, strict=True):
            _TERMS[sentence] = (len(toks), frozenset(toks))
    out = [_TERMS[s] for s in sentences]
    while len(_TERMS) > _TERMS_MAX:  # the oldest first
        del _TERMS[next(iter(_TERMS))]
    return out


def bm25_scores_indexed(
    questions: Sequence[str],
    context: str,
    targets: Sequence[tuple[int, int]],
    needles: Sequence[tuple[int, int]] = (),
) -> list[float]:
    """`bm25_scores` the straightforward way: a bm25s index of the whole corpus of sentences (the tests' reference)."""
    import bm25s

    spans = document_sentences(context, [*targets, *needles])
    index = {span: i for i, span in enumerate(spans)}
    missing = [t for t in targets if t not in index]
    if missing:
        raise ValueError(f"needle span {missing[0]} is not one of the document's sentences")
    stop = list(STOPWORDS)
    corpus = bm25s.tokenize([context[a:b] for a, b in spans], stopwords=stop, show_progress=False)
    retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B)
    retriever.index(corpus, show_progress=False)
    out = []
    for question, target in zip(questions, targets, strict=True):
        terms = bm25s.tokenize([question], stopwords=stop, show_progress=False, return_ids=False)[0]
        score = float(retriever.get_scores(terms)[index[target]]) if terms else 0.0
        out.append(round(score, 4))
    return out


@lru_cache(maxsize=1)
def _minilm() -> Any:
    """The packaged MiniLM, loaded once per process."""
    from sentence_transformers import SentenceTransformer

    from longctx_eval.models.assets import minilm_path

    return SentenceTransformer(str(minilm_path()), device="cpu")


def cosine_scores(questions: Sequence[str], needles: Sequence[str]) -> list[float]:
    """MiniLM cosine of each question with its needle sentence (same order), rounded to 4 decimals.

    One torch thread while encoding (restored after): a few short sentences gain nothing from more, and on a
    busy machine a thread pool's spin-waiting made each call about ten times slower.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        emb = _minilm().encode(
            [*questions, *needles], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
    finally:
        torch.set_num_threads(threads)
    n = len(questions)
    return [round(float(emb[i] @ emb[n + i]), 4) for i in range(n)]


def measure_overlaps(
    questions: Sequence[str],
    context: str,
    targets: Sequence[tuple[int, int]],
    needles: Sequence[tuple[int, int]] = (),
) -> list[Overlap]:
    """Each question's overlap with its target needle `context[start:end]` (`needles`: all inserted spans)."""
    bm25 = bm25_scores(questions, context, targets, needles)
    cosine = cosine_scores(questions, [context[a:b] for a, b in targets])
    return [Overlap(b, c) for b, c in zip(bm25, cosine, strict=True)]


def mean_overlap(overlaps: Sequence[Overlap]) -> Overlap:
    """One overlap for a sample with several (question, needle) pairs: the mean of each number."""
    n = len(overlaps)
    return Overlap(round(sum(o.bm25 for o in overlaps) / n, 4), round(sum(o.cosine for o in overlaps) / n, 4))
