"""Paragraph-by-paragraph token offsets and sentence spans (`text/pieces.py`) are the whole text's, exactly.

They make chunking the hundredth needle sample of a haystack cheap (only its new paragraphs are tokenized and
split), so they must never change a chunk: compared here with whole-text tokenization and `split_sentences`.
"""

from __future__ import annotations

import numpy as np
import pytest

from data_builders import get_source
from data_builders.haystack.assembly import assemble
from longctx_eval.text import pieces
from longctx_eval.text.chunking import ChunkConfig, chunk_document
from longctx_eval.text.sentences import split_sentences

EDGES = (
    "  \n\nA heading\n\nFirst sentence. Second one?\r\n\r\nCRLF paragraph. \u2029After a separator. Mr. Smith "
    "arrived at 5 p.m. on Jan. 3.\n\n\n\nMany blank lines.\n \t\nSpaces on the blank line. “Quoted.” (Bracketed.)\n"
)


@pytest.fixture(scope="module")
def documents(minilm_tokenizer):
    return [
        assemble(get_source("austen"), minilm_tokenizer, 12_000, 3),
        assemble(get_source("synthetic"), minilm_tokenizer, 12_000, 4),
        EDGES * 200,
    ]


def test_sentences_by_paragraph_are_the_whole_texts(documents):
    for text in documents:
        assert len(text) >= pieces.MIN_CHARS
        assert pieces.sentence_spans(text) == split_sentences(text)


def test_token_offsets_by_paragraph_are_the_whole_texts(documents, minilm_tokenizer):
    assert pieces.separable(minilm_tokenizer)
    for text in documents:
        starts, ends = pieces.token_offsets(minilm_tokenizer, text)
        whole_starts, whole_ends = minilm_tokenizer.offset_arrays(text)
        assert np.array_equal(starts, whole_starts) and np.array_equal(ends, whole_ends)
        assert pieces.token_count(minilm_tokenizer, text) == minilm_tokenizer.count(text)


def test_other_tokenizers_are_tokenized_whole(bpe_tokenizer, documents):
    from longctx_eval.models.assets import load_tokenizer

    assert not pieces.separable(bpe_tokenizer)  # byte-level BPE: whitespace is part of its tokens
    assert not pieces.separable(load_tokenizer("smollm2-135m"))
    text = documents[0]
    starts, _ = pieces.token_offsets(bpe_tokenizer, text)
    assert np.array_equal(starts, bpe_tokenizer.offset_arrays(text)[0])


def test_shared_paragraphs_are_tokenized_once(documents, minilm_tokenizer, monkeypatch):
    text = documents[0]
    pieces.token_offsets(minilm_tokenizer, text)
    seen: list[str] = []
    real = pieces._encode_many  # every paragraph the memo lacks is tokenized here, in one batch

    def spy(tokenizer, batch):
        seen.extend(batch)
        return real(tokenizer, batch)

    monkeypatch.setattr(pieces, "_encode_many", spy)
    middle = pieces.paragraph_cuts(text)[len(pieces.paragraph_cuts(text)) // 2]
    other = text[:middle] + "The special magic number for Varkholt is 4817293. " + text[middle:]
    pieces.token_offsets(minilm_tokenizer, other)
    assert len(seen) == 1 and "Varkholt" in seen[0]  # only the paragraph holding the insertion


def test_chunks_are_the_same_with_and_without_the_memo(documents, minilm_tokenizer, monkeypatch):
    cfg = ChunkConfig(128, 16)
    with_memo = [chunk_document(t, minilm_tokenizer, cfg) for t in documents]
    monkeypatch.setattr(pieces, "MIN_CHARS", 1 << 40)  # everything processed whole
    assert [chunk_document(t, minilm_tokenizer, cfg) for t in documents] == with_memo
