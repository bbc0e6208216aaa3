"""`sentence_ends` scanned paragraph by paragraph through its memo equals scanning the whole text at once
(`text_sentence_ends`): on real haystacks with sentences inserted, at many limits, and on random texts built from
the characters the rules look at (blank lines, runs of newlines and spaces, quotes, "Mr.", initials, digits)."""

from __future__ import annotations

import random

import pytest

from data_builders import get_source
from data_builders.haystack.assembly import haystack_text
from data_builders.haystack.span_insertion import sentence_ends, text_sentence_ends
from longctx_eval.models.assets import load_tokenizer


@pytest.mark.parametrize("source", ["austen", "synthetic"])
def test_memo_scan_equals_whole_scan_on_haystacks(source):
    hay = haystack_text(get_source(source), load_tokenizer("minilm"), 16000, 5)
    rng = random.Random(source)
    text = hay.text
    for _ in range(3):  # a sentence inserted at a sentence end, as the builders do
        at = rng.choice(text_sentence_ends(text, len(text))[1:])
        text = text[:at] + " The special magic number for the Esmark ledger is 4412093." + text[at:]
    for limit in [len(text), len(text) - 1, 20_000, *(rng.randrange(20_000, len(text)) for _ in range(20))]:
        assert sentence_ends(text, limit) == text_sentence_ends(text, limit), limit
    assert sentence_ends(text, len(text)) == sentence_ends(text, len(text))  # from the memo the second time


def test_memo_scan_equals_whole_scan_on_random_texts():
    rng = random.Random(0)
    atoms = [
        "\n\n",
        "\n",
        "\n\n\n",
        " ",
        "  ",
        ". ",
        ".",
        '."',
        "?",
        "!",
        '"',
        "'",
        "(",
        "Mr",
        "A",
        "Dr. ",
        "x",
        "The",
        "word",
        "7",
        "\u201c",
        "\u201d",
        "\t",
        "\n \n",
    ]
    for _ in range(40):
        text = "".join(rng.choice(atoms) for _ in range(rng.randrange(6_000, 14_000)))
        for limit in (len(text), *(rng.randrange(20_000, len(text) + 1) for _ in range(5) if len(text) > 20_000)):
            assert sentence_ends(text, limit) == text_sentence_ends(text, limit)
