"""A document's BM25 index (bm25s's eager Lucene score matrix) assembled from its chunks' term counts.

`assemble` returns the arrays `bm25s_arrays` gets from bm25s itself (`bm25s.tokenize` + `BM25.index`), bit for
bit: the same vocabulary order (terms by first occurrence, then bm25s's empty token), the same float32 weights
(Lucene's idf through `math.log`, each tf weight computed in float64 with the same operations in the same
order, rounded once to float32) and the same CSC layout (columns by term, chunks ascending within one). Only
its inputs differ: per-chunk term counts that `term_counts.TermCounts` keeps, so the chunks a document shares
with earlier ones cost no tokenization, and the weights are one vectorised pass instead of a loop per chunk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from longctx_eval.models.retrieval.term_counts import ChunkTerms

BM25_ARRAYS = ("data", "indices", "indptr", "num_docs", "vocab")


def assemble(chunks: Sequence[ChunkTerms], terms: Sequence[str], k1: float, b: float) -> dict[str, np.ndarray]:
    """The bm25s index of documents with these term counts (`terms[i]` is the term of id i); see the module."""
    n_docs = len(chunks)
    per_doc = np.fromiter((len(c.ids) for c in chunks), dtype=np.int64, count=n_docs)
    lengths = np.fromiter((c.length for c in chunks), dtype=np.int64, count=n_docs)
    empty = np.empty(0, dtype=np.int64)
    ids = np.concatenate([c.ids for c in chunks]) if n_docs else empty
    tf = (np.concatenate([c.counts for c in chunks]) if n_docs else empty).astype(np.float32)
    # One stable sort by term id: each term's entries together, in chunk order (a term occurs once per chunk).
    n_entries = len(ids)
    perm = np.argsort(ids, kind="stable")
    sorted_ids = ids[perm]
    new_term = np.ones(n_entries, dtype=bool)
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=new_term[1:])
    starts = np.flatnonzero(new_term)
    doc_freqs_by_id = np.diff(starts, append=n_entries)
    # The document's vocabulary, by first occurrence (bm25s.tokenize numbers terms as it meets them).
    by_first = np.argsort(perm[starts], kind="stable")
    n_vocab = len(starts)
    local = np.empty(n_vocab, dtype=np.int64)
    local[by_first] = np.arange(n_vocab)
    group = np.cumsum(new_term) - 1
    cols = np.empty(n_entries, dtype=np.int64)
    cols[perm] = local[group]
    rows = np.repeat(np.arange(n_docs, dtype=np.int32), per_doc)
    doc_freqs = doc_freqs_by_id[by_first]
    # Weights as bm25s's `_build_scores_and_indices_for_matrix` computes them, operation by operation.
    avg_doc_len = lengths.mean() if n_docs else np.float64(0.0)
    idf = np.zeros(n_vocab, dtype=np.float32)
    freq_values, freq_of = np.unique(doc_freqs, return_inverse=True)
    logs = [math.log(1 + (n_docs - df + 0.5) / (df + 0.5)) for df in freq_values.tolist()]
    idf[:] = np.asarray(logs, dtype=np.float64)[freq_of.reshape(-1)]
    with np.errstate(divide="ignore", invalid="ignore"):  # no terms at all: no weight reads the nan
        length_norm = k1 * ((1 - b) + b * lengths / avg_doc_len)
    tf64 = tf.astype(np.float64)
    tfc = tf64 / (length_norm[rows] + tf64)
    weights = (idf[cols].astype(np.float64) * tfc).astype(np.float32)
    # CSC: columns by term (vocabulary order), chunks ascending within a column, as bm25s's numpy builder sorts.
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(doc_freqs, out=indptr[1:])
    csc = np.empty(n_entries, dtype=np.int64)
    csc[indptr[local[group]] + (np.arange(n_entries) - starts[group])] = perm
    vocab = [terms[i] for i in sorted_ids[starts][by_first].tolist()] + [""]
    return {
        "data": weights[csc],
        "indices": rows[csc],
        "indptr": indptr,
        "num_docs": np.asarray(n_docs, dtype=np.int64),
        "vocab": np.asarray(vocab, dtype=str),
    }


def bm25s_arrays(texts: list[str], k1: float, b: float) -> dict[str, np.ndarray]:
    """The straightforward path: bm25s tokenizes and indexes `texts` (English stopwords); the reference
    `assemble` must equal (tests, `benchmarks/embedding_reuse.py`)."""
    import bm25s

    corpus_tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    retriever = bm25s.BM25(k1=k1, b=b)
    retriever.index(corpus_tokens, show_progress=False)
    vocab = sorted(retriever.vocab_dict.items(), key=lambda kv: kv[1])
    if [i for _, i in vocab] != list(range(len(vocab))):
        raise RuntimeError("bm25s returned a vocabulary whose ids are not 0..n-1; this bm25s is not supported")
    s = retriever.scores
    return {
        "data": np.asarray(s["data"]),
        "indices": np.asarray(s["indices"]),
        "indptr": np.asarray(s["indptr"]),
        "num_docs": np.asarray(s["num_docs"], dtype=np.int64),
        "vocab": np.asarray([t for t, _ in vocab], dtype=str),
    }
