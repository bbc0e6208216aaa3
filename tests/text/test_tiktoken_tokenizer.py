"""TiktokenTokenizer: exact character offsets from token bytes, and the same ids and offsets as its HF twin."""

from __future__ import annotations

import base64
import functools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longctx_eval.errors import DataError, PrerequisiteError
from longctx_eval.text import ChunkConfig, TiktokenTokenizer, Tokenizer, chunk_document

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Arbitrary Unicode (no lone surrogates, which UTF-8 cannot hold): CJK, emoji, combining marks, CRLF, controls.
TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=80)
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


class PairEncoding:
    """A stand-in for a tiktoken Encoding: UTF-8 bytes cut into pairs, so tokens often split a character."""

    name = "pairs"
    _pat_str = "pairs"
    n_vocab = 256 + 256 * 256

    def decode_single_token_bytes(self, i: int) -> bytes:
        return bytes([i]) if i < 256 else bytes(divmod(i - 256, 256))

    def encode_ordinary(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        pairs = [data[i : i + 2] for i in range(0, len(data), 2)]
        return [p[0] if len(p) == 1 else 256 + p[0] * 256 + p[1] for p in pairs]

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.decode_single_token_bytes(i) for i in ids).decode("utf-8", "replace")


@functools.cache
def pairs() -> TiktokenTokenizer:
    return TiktokenTokenizer(PairEncoding())


def reference_offsets(text: str) -> list[tuple[int, int]]:
    """Per 2-byte token: from the character holding its first byte to the one holding its last, inclusive."""
    char_of_byte = [i for i, ch in enumerate(text) for _ in ch.encode("utf-8")]
    n = len(char_of_byte)
    return [(char_of_byte[b], char_of_byte[min(b + 2, n) - 1] + 1) for b in range(0, n, 2)]


@PROPERTY
@given(TEXT)
def test_offsets_follow_token_bytes(text: str) -> None:
    enc = pairs().encode(text)
    assert enc.offsets == reference_offsets(text)
    starts, ends = pairs().offset_arrays(text)
    assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == enc.offsets
    assert pairs().count(text) == len(enc.ids) and pairs().decode(enc.ids) == text


@PROPERTY
@given(
    st.lists(
        st.sampled_from(["Hello there.", "Ça va? 😀", "中文字。", "e\u0301!", "\r\n\r\n", "Mr. X ran."]), max_size=40
    )
)
def test_chunks_are_exact_when_tokens_split_characters(parts: list[str]) -> None:
    text = " ".join(parts)
    chunks = chunk_document(text, pairs(), ChunkConfig(max_tokens=16, overlap=4))
    offsets = pairs().encode(text).offsets
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
        assert all(c.char_start <= s and e <= c.char_end for s, e in offsets[c.token_start : c.token_end])
    if chunks:
        assert chunks[0].token_start == 0 and chunks[-1].token_end == len(offsets)


def test_lone_surrogate_is_a_clear_error() -> None:
    with pytest.raises(DataError, match="surrogate"):
        pairs().encode("a\ud800b")


def test_hash_names_the_vocabulary() -> None:
    assert len(pairs().sha256) == 64 and pairs().name == "tiktoken:pairs"


# --- against a real tiktoken Encoding and its HF tokenizers twin (needs tiktoken: the `bench` extra) -------

TRAINING = (
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
    "want of a wife. However little known the feelings or views of such a man may be on his first entering "
    "a neighbourhood, this truth is so well fixed in the minds of the surrounding families. Straße, 中文字, 😀."
)


@functools.cache
def twins(folder: str) -> tuple[Tokenizer, Tokenizer]:
    """A small BPE trained here, as a tiktoken Encoding and converted to HF the way benchmarks/gpt2.py does."""
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken comes with the `bench` extra")
    from tiktoken._educational import bpe_train
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = bpe_train(TRAINING * 3, 320, R50K_PATTERN, visualise=None)
    path = Path(folder) / "tiny.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    encoding = tiktoken.Encoding("tiny", pat_str=R50K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    hf = TikTokenConverter(vocab_file=str(path), pattern=R50K_PATTERN).converted()
    return TiktokenTokenizer(encoding), Tokenizer(hf, "tiny-hf")


@pytest.fixture(scope="module")
def twin_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tokenizer, Tokenizer]:
    folder = tmp_path_factory.mktemp("tiktoken")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(folder))  # the converter's file read is cached; keep it here
        return twins(str(folder))


@PROPERTY
@given(text=TEXT)
def test_same_ids_and_offsets_as_hf_twin(twin_pair: tuple[Tokenizer, Tokenizer], text: str) -> None:
    fast, hf = twin_pair
    assert fast.encode(text) == hf.encode(text)


def test_same_chunks_as_hf_twin_on_a_long_document(twin_pair: tuple[Tokenizer, Tokenizer]) -> None:
    fast, hf = twin_pair
    text = "\n\n".join(f"{TRAINING} Chapter {i}: 😀 e\u0301." for i in range(700))
    config = ChunkConfig(max_tokens=256, overlap=32)
    assert chunk_document(text, fast, config) == chunk_document(text, hf, config)


def test_unknown_tiktoken_encoding_is_a_prerequisite_error() -> None:
    pytest.importorskip("tiktoken", reason="tiktoken comes with the `bench` extra")
    from longctx_eval.models.assets import load_tokenizer

    with pytest.raises(PrerequisiteError, match="tiktoken"):
        load_tokenizer("tiktoken:no_such_encoding")
