"""What the retrieval card states so an outside implementation reproduces the suite's recall@K: the chunker
(its budget, overlap and sentence splitter; each row also carries its context's chunk spans) and the `bm25`
baseline's tokenisation, weights, sums and tie order, read from the code's own parameters."""

from __future__ import annotations

from data_builders.retrieval.docs import RETRIEVAL
from longctx_eval.models.options import BM25Options

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""bm25s's default token pattern, which `models/retrieval/bm25.py` uses (bm25s.tokenize without a pattern)."""


def bm25_stopwords() -> tuple[str, ...]:
    """The English stopword list bm25s removes (`stopwords="en"`), as the installed bm25s holds it."""
    from bm25s.stopwords import STOPWORDS_EN

    return tuple(STOPWORDS_EN)


def chunking_text() -> str:
    """The card's paragraph on how contexts are chunked, and where a row's chunk spans are."""
    return f"""\
**Chunks.** Retrievers index `{RETRIEVAL.chunk_tokens}`-token chunks with `{RETRIEVAL.chunk_overlap}` tokens of
overlap (`longctx_eval.text.chunking`, `ChunkConfig(max_tokens={RETRIEVAL.chunk_tokens},
overlap={RETRIEVAL.chunk_overlap})`), measured in the retriever's tokenizer. Sentences come from Punkt (English
model) with every blank line as a hard boundary; a chunk is the run of whole sentences that fits the budget,
and the next chunk starts with the trailing whole sentences of the previous one that fit within the overlap
(fewer when the next sentence would not fit beside them); only a sentence longer than the budget is cut at token
boundaries, its pieces overlapping by `{RETRIEVAL.chunk_overlap}` tokens. A chunk's span is stretched over the
whitespace up to the next chunk, so chunks cover the context with no gap. Each row carries the chunks of its
context in this dataset's tokenizer: `chunk_starts[i]:chunk_ends[i]` (half-open characters) is chunk `i`, in
document order. They are exactly the chunks the suite's retrievers index when the dataset's tokenizer is theirs
(the `bm25`, `minilm` and `hybrid` baselines measure in MiniLM: build with `--tokenizer minilm`)."""


def bm25_text() -> str:
    """The card's paragraph on the `bm25` baseline: tokens, stopwords, weights, float32 sums and ties."""
    opts = BM25Options()
    words = ", ".join(f"`{w}`" for w in bm25_stopwords())
    return f"""\
**The `bm25` baseline** (bm25s, Lucene's BM25) indexes each context on its own: the documents of its index are
that context's chunks. A text's terms: lowercase it, take every match of the regular expression
`{TOKEN_PATTERN}` (Python `re`, two or more word characters), drop the English stopwords ({words}); no stemming.
With N chunks, `df(t)` the number of chunks holding term t, `tf(t, c)` its count in chunk c, `|c|` the chunk's
number of terms and `avg` the mean of `|c|` over the N chunks, the weight of t in c is `idf(t) * tf / (tf + k1 *
(1 - b + b * |c| / avg))` with `idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`, `k1 = {opts.k1}` and
`b = {opts.b}` (the spec's defaults), each weight rounded to float32. A chunk's score for a query is the float32
sum of the weights of the query's terms in it, once per occurrence of a term in the query (a query term no chunk
holds adds nothing). The top `{RETRIEVAL.k}` chunks are returned by score, highest first, equal scores in chunk
order."""
