"""The fast paths of sample building give what the straightforward whole-text computation gives, exactly:

- the exact-length fit and the haystack measured through the paragraph memo (`text/pieces.py`) equal encoding
  the whole context (token count, every offset, every inserted span), in MiniLM's tokenizer (separable: the memo
  path) and SmolLM2's (not separable: whole-text encoding);
- `overlap_bm25` from per-sentence statistics equals a bm25s index of the whole corpus of sentences
  (`bm25_scores_indexed`), on real needle-family contexts and on questions made to share many terms with them.

Real tokenizers, real bm25s; contexts of 8K tokens, so the memo (texts of 20,000 characters or more) is used.
"""

from __future__ import annotations

import random
import re
from bisect import bisect_left, bisect_right

import pytest

from data_builders import get_source
from data_builders.haystack.assembly import haystack_text
from data_builders.haystack.span_insertion import insert_sentences
from data_builders.needle.lexical_overlap import bm25_scores, bm25_scores_indexed, document_sentences
from longctx_eval.models.assets import load_tokenizer
from longctx_eval.text.pieces import MIN_CHARS, separable

SENTENCES = [
    ("The special magic number for the Bergmann archive is 4412093.", 0.0),
    ("Yes, Avrielle lives right next to the Prado.", 0.37),
    ("The passcode for the Esmark ledger is quartz-4127.", 0.37),
    ("The special magic UUID for the Hesketh charter is 0f6c2a8e-9d51-4b7e-8a43-2c1d7e5b9f60.", 1.0),
]


@pytest.fixture(scope="module", params=["minilm", "smollm2-135m"])
def tok(request):
    return load_tokenizer(request.param)


def test_the_memo_is_exercised_for_minilm_only():
    assert separable(load_tokenizer("minilm")) and not separable(load_tokenizer("smollm2-135m"))


@pytest.mark.parametrize("source", ["austen", "synthetic"])
def test_haystack_and_fit_equal_whole_text_encoding(tok, source):
    src = get_source(source)
    hay = haystack_text(src, tok, 8000, 11)
    assert len(hay.text) >= MIN_CHARS
    assert hay.token_ends == [e for _, e in tok.encode(hay.text).offsets]
    for seed in (3, 4):
        doc = insert_sentences(src, tok, 8000, SENTENCES, seed=seed)
        enc = tok.encode(doc.context)
        assert len(enc.ids) == 8000
        starts = [s for s, _ in enc.offsets]
        ends = [e for _, e in enc.offsets]
        for span, (text, _) in zip(doc.spans, SENTENCES, strict=True):
            assert doc.context[span.char_start : span.char_end] == text
            assert span.token_start == bisect_right(ends, span.char_start)
            assert span.token_end == bisect_left(starts, span.char_end)
            assert span.actual_depth == span.token_start / 8000


def _questions(rng: random.Random, context: str, target: str) -> list[str]:
    """Questions sharing words with the target and with the rest (repeats included), and one sharing none."""
    words = re.findall(r"[A-Za-z]{3,}", context)
    own = re.findall(r"[A-Za-z]{3,}", target)
    return [
        " ".join(rng.choices(own, k=3) + rng.choices(words, k=4)),
        " ".join(rng.choices(own, k=2) * 2 + rng.choices(words, k=2)),  # repeated terms count each time
        " ".join(rng.choices(words, k=6)),
        "Which character has been to Madrid?",
        "the of and",  # stopwords only: no terms
    ]


@pytest.mark.parametrize("source", ["austen", "synthetic"])
def test_bm25_from_statistics_equals_the_bm25s_index(source):
    tok = load_tokenizer("minilm")
    rng = random.Random(source)
    for seed in (0, 1, 2):
        doc = insert_sentences(get_source(source), tok, 8000, SENTENCES, seed=seed)
        spans = [(s.char_start, s.char_end) for s in doc.spans]
        assert set(spans) <= set(document_sentences(doc.context, spans))
        for target in spans:
            questions = _questions(rng, doc.context, doc.context[target[0] : target[1]])
            targets = [target] * len(questions)
            fast = bm25_scores(questions, doc.context, targets, spans)
            assert fast == bm25_scores_indexed(questions, doc.context, targets, spans)
            assert any(f > 0 for f in fast) and fast[-1] == 0.0
