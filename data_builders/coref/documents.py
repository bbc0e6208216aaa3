"""The long coreference documents the coref tasks and the coref dataset builders share, one generator for both.

A corpus document is stretched with haystack prose to each target length it fits in (`corpus_documents`);
a synthetic narrative is written to each length (`synthetic_documents`). Each comes with its sample id,
its annotation regime and the metadata a sample records, seeded so the task and `longctx-eval build` give
the same texts and gold. `rendered` turns one into text with every word's character span and its span in
a tokenizer's tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from data_builders.coref.haystack import LongDoc, as_long, measure, render, stretch
from data_builders.coref.splits import Corpus
from data_builders.coref.synthetic import GENERATOR_VERSION, synthetic_document
from data_builders.haystack.assembly import HaystackSource, get_source
from longctx_eval.errors import DataError
from longctx_eval.hashing import sha256_json
from longctx_eval.text.tokenizer import Tokenizer

Span = tuple[int, int]


@dataclass(frozen=True)
class StretchedDoc:
    """One document at one target length: the document, its sample id, regime and sample metadata."""

    long: LongDoc
    sample_id: str
    singletons: bool
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Rendered:
    """A document as text: each word's half-open character span and half-open span in model tokens."""

    text: str
    word_chars: list[Span]
    token_starts: list[int]
    token_ends: list[int]
    n_tokens: int  # of the whole text (words when there is no tokenizer)


def seed_for(*parts: object) -> int:
    """A 32-bit seed from any JSON-able parts (stable across processes)."""
    return int(sha256_json(list(parts))[:8], 16)


def sample_stem(name: str, doc_id: str) -> str:
    """A document's id in sample ids: its doc id, with `-pNNN` for a part other than 0 (OntoNotes parts)."""
    _, sep, part = name.rpartition("; part ")
    if sep and part.isdigit() and int(part) != 0:
        return f"{doc_id}-p{int(part):03d}"
    return doc_id


def corpus_documents(
    corpus: Corpus,
    lengths: Sequence[int],
    seed: int,
    source: str | HaystackSource = "synthetic",
    tokenizer: Tokenizer | None = None,
) -> Iterator[StretchedDoc]:
    """Each corpus document stretched with haystack prose to each target length it fits in (longer: skipped)."""
    src = get_source(source) if isinstance(source, str) else source
    stems: dict[str, str] = {}
    for doc in corpus.documents:
        stem = sample_stem(doc.name, doc.doc_id)
        if stem in stems:
            raise DataError(
                f"{doc.path}:{doc.line}: document {doc.name!r} has the same id {stem!r} as {stems[stem]}; "
                "expected each document once"
            )
        stems[stem] = f"{doc.path}:{doc.line}"
    for length in lengths:
        for doc in corpus.documents:
            if measure(as_long(doc), tokenizer) > length:
                continue  # the document alone is longer than this stratum
            long = stretch(doc, length, src, seed_for(seed, doc.name, length), tokenizer)
            meta = {"target_tokens": length, "doc": doc.doc_id, "corpus": corpus.name, "split": corpus.split,
                    "seed": seed, "source": src.name, "source_sha256": src.sha256}  # fmt: skip
            yield StretchedDoc(long, f"{sample_stem(doc.name, doc.doc_id)}@{length}", corpus.singletons, meta)


def synthetic_documents(
    lengths: Sequence[int], seed: int, per_length: int, tokenizer: Tokenizer | None = None
) -> Iterator[StretchedDoc]:
    """`per_length` synthetic narratives of each target length, their person chains as gold (singletons kept)."""
    for length in lengths:
        for rep in range(per_length):
            name = f"synthetic-L{length}-r{rep}"
            long = synthetic_document(length, seed_for(seed, length, rep), tokenizer, name=name)
            meta = {"target_tokens": length, "doc": name, "corpus": "synthetic", "seed": seed,
                    "generator_version": GENERATOR_VERSION}  # fmt: skip
            yield StretchedDoc(long, name, True, meta)


def rendered(long: LongDoc, tokenizer: Tokenizer | None = None) -> Rendered:
    """The document's text, every word's character span, and its span in `tokenizer` tokens (or words)."""
    doc = long.doc
    text, word_chars = render(doc.tokens, doc.sentence_ends, long.paragraph_ends)
    if tokenizer is None:
        n = len(word_chars)
        return Rendered(text, word_chars, list(range(n)), list(range(1, n + 1)), n)
    offsets = tokenizer.encode(text).offsets
    ends = np.array([e for _, e in offsets])
    starts_tok = np.searchsorted(ends, [s for s, _ in word_chars], side="right")
    ends_tok = np.searchsorted(ends, [e for _, e in word_chars], side="left") + 1
    return Rendered(text, word_chars, starts_tok.tolist(), np.maximum(ends_tok, starts_tok + 1).tolist(), len(offsets))
