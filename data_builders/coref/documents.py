"""The long coreference documents the coref tasks and the coref dataset builders share, one generator for both.

A corpus document is stretched with haystack prose to each target length it fits in (`corpus_documents`);
a synthetic narrative is written to each length (`synthetic_documents`). Each comes with its sample id,
its annotation regime and the metadata a sample records, seeded so the task and `longctx-eval build` give
the same texts and gold. `rendered` turns one into text with every word's character span and its span in
a tokenizer's tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from data_builders.coref.conll import CorefDocument
from data_builders.coref.haystack import LongDoc, as_long, measure, render, stretch
from data_builders.coref.splits import Corpus
from data_builders.coref.synthetic import GENERATOR_VERSION, synthetic_document
from data_builders.haystack.assembly import HaystackSource, get_source
from longctx_eval.errors import DataError
from longctx_eval.hashing import sha256_json
from longctx_eval.text.tokenizer import Tokenizer

Span = tuple[int, int]
MIN_SYNTHETIC_TOKENS = 16
"""The shortest synthetic narrative (`synthetic_document`'s least target)."""


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


Fit = Callable[[Callable[[int], StretchedDoc], int, int], StretchedDoc | None]
"""How a document meets a length: given `at(target)` (the document built to `target` tokens), the length and the
fewest tokens it can have, the document to use or None (skipped). Default: built to the length itself."""


def _default_fit(at: Callable[[int], StretchedDoc], length: int, floor: int) -> StretchedDoc | None:
    return at(length) if floor <= length else None


def corpus_documents(
    corpus: Corpus,
    lengths: Sequence[int],
    seed: int,
    source: str | HaystackSource = "synthetic",
    tokenizer: Tokenizer | None = None,
    fit: Fit | None = None,
) -> Iterator[StretchedDoc]:
    """Each corpus document stretched with haystack prose to each target length it fits in (longer: skipped);
    `fit` chooses the stretch target (a task whose prompt adds tokens around the document stretches it less)."""
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
    # the key's own scheme decides: a file that annotates singletons keeps the system's too (a user's OntoNotes-
    # layout file with singletons is not scored against system output that has had them dropped)
    singletons = corpus.singletons or any(len(c) == 1 for d in corpus.documents for c in d.clusters)
    for length in lengths:
        for doc in corpus.documents:
            meta = {"target_tokens": length, "doc": doc.doc_id, "corpus": corpus.name, "split": corpus.split,
                    "seed": seed, "source": src.name, "source_sha256": src.sha256}  # fmt: skip
            sample_id = f"{sample_stem(doc.name, doc.doc_id)}@{length}"

            def at(
                target: int, doc: CorefDocument = doc, length: int = length, meta: dict = meta, sid: str = sample_id
            ) -> StretchedDoc:
                long = stretch(doc, target, src, seed_for(seed, doc.name, length), tokenizer)
                return StretchedDoc(long, sid, singletons, meta)

            got = (fit or _default_fit)(at, length, measure(as_long(doc), tokenizer))
            if got is not None:
                yield got


def synthetic_documents(
    lengths: Sequence[int], seed: int, per_length: int, tokenizer: Tokenizer | None = None, fit: Fit | None = None
) -> Iterator[StretchedDoc]:
    """`per_length` synthetic narratives of each target length, their person chains as gold (singletons kept);
    `fit` chooses the length each is written to (a shorter target writes a prefix of the same narrative)."""
    for length in lengths:
        for rep in range(per_length):
            name = f"synthetic-L{length}-r{rep}"
            meta = {"target_tokens": length, "doc": name, "corpus": "synthetic", "seed": seed,
                    "generator_version": GENERATOR_VERSION}  # fmt: skip

            def at(target: int, length: int = length, rep: int = rep, nm: str = name, md: dict = meta) -> StretchedDoc:
                long = synthetic_document(target, seed_for(seed, length, rep), tokenizer, name=nm)
                return StretchedDoc(long, nm, True, md)

            got = (fit or _default_fit)(at, length, MIN_SYNTHETIC_TOKENS)
            if got is not None:
                yield got


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
