"""The packaged MiniLM sentence embedder: fast precision close to exact, exact equal to sentence-transformers,
deterministic, and semantic chunking keeps its invariants with it (real model, small texts)."""

from __future__ import annotations

import numpy as np
import pytest

from data_builders import AustenSource, assemble, get_source
from longctx_eval.errors import ConfigError
from longctx_eval.models.semantic_embed import minilm_embedder, native_bfloat16, smooth
from longctx_eval.text import ChunkConfig, chunk_document

SENTENCES = [
    "Emma Woodhouse, handsome, clever, and rich, seemed to unite some of the best blessings of existence.",
    "The whale breached twice before the boats were lowered.",
    "Yes.",
    "CHAPTER I",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want "
    "of a wife, however little known the feelings or views of such a man may be on his first entering a "
    "neighbourhood; this truth is so well fixed in the minds of the surrounding families.",
    "Mr. Knightley was one of the few people who could see faults in Emma Woodhouse.",
    "The stock market fell sharply after the announcement of new interest rates.",
    "She laughed.",
]


@pytest.fixture(scope="module")
def exact():
    return minilm_embedder(window=0, precision="exact", batch_size=3)


@pytest.fixture(scope="module")
def fast():
    return minilm_embedder(window=0, batch_size=3)


@pytest.fixture(scope="module")
def austen() -> AustenSource:
    source = get_source("austen")
    assert isinstance(source, AustenSource)
    return source


def test_exact_is_the_sentence_transformers_pipeline(exact):
    from sentence_transformers import SentenceTransformer

    from longctx_eval.models.assets import minilm_path

    reference = SentenceTransformer(str(minilm_path()), device="cpu").encode(
        SENTENCES, batch_size=64, convert_to_numpy=True, normalize_embeddings=True
    )
    vectors = exact(SENTENCES)
    assert exact.dtype == "float32" and vectors.shape == (len(SENTENCES), 384) and vectors.dtype == np.float32
    assert np.allclose(vectors, reference, atol=1e-5)


def test_fast_is_close_to_exact(fast, exact):
    assert fast.dtype == ("bfloat16" if native_bfloat16("cpu") else "float32")
    a, b = fast(SENTENCES), exact(SENTENCES)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert (a * b).sum(1).min() >= 0.999


def test_deterministic_and_independent_of_batching():
    once = minilm_embedder(window=0, batch_size=3)(SENTENCES)
    again = minilm_embedder(window=0, batch_size=3)(SENTENCES)
    assert np.array_equal(once, again)
    # Other batch compositions pad differently; padding is masked, so vectors agree to rounding.
    other = minilm_embedder(window=0, batch_size=64)(SENTENCES[::-1])[::-1]
    assert (once * other).sum(1).min() >= 0.999


def test_precision_and_dtype_options():
    assert minilm_embedder(window=0, precision="exact", dtype="bfloat16").dtype == "bfloat16"  # dtype wins
    for bad in ({"precision": "int8"}, {"dtype": "int8"}, {"max_seq_length": 1}):
        with pytest.raises(ConfigError, match="minilm_embedder"):
            minilm_embedder(**bad)


def test_max_seq_length_truncates():
    capped = minilm_embedder(window=0, precision="exact", max_seq_length=8)
    full = minilm_embedder(window=0, precision="exact")
    long, short = SENTENCES[4], SENTENCES[3]
    a, b = capped([long, short]), full([long, short])
    assert np.allclose(a[1], b[1], atol=1e-5) and float(a[0] @ b[0]) < 0.99


def test_fast_semantic_chunking_invariants(austen, minilm_tokenizer, fast, exact):
    text = assemble(austen, minilm_tokenizer, 3000, 5)
    config = ChunkConfig(max_tokens=256, overlap=32, semantic=True)

    def windowed(embed):
        return lambda texts: smooth(embed(texts), 1)

    chunks = chunk_document(text, minilm_tokenizer, config, embed=windowed(fast))
    reference = chunk_document(text, minilm_tokenizer, config, embed=windowed(exact))
    plain = chunk_document(text, minilm_tokenizer, ChunkConfig(max_tokens=256, overlap=32))
    assert len(chunks) >= len(plain)
    assert chunks[0].token_start == 0 and chunks[-1].token_end == 3000
    for prev, c in zip(chunks, chunks[1:], strict=False):
        assert text[c.char_start : c.char_end] == c.text and c.token_end - c.token_start <= 256
        assert c.char_start <= prev.char_end and c.overlap_tokens <= 32
    same = {(c.char_start, c.char_end) for c in chunks} & {(c.char_start, c.char_end) for c in reference}
    assert len(same) >= 0.9 * len(reference)
