"""The curated low-lexical-overlap pairs: no content word shared with the question, invented answer names,
value words that never occur in a haystack, and the overlap measures' definitions on known inputs."""

from __future__ import annotations

import re

import pytest

from data_builders.haystack.sources import austen as austen_mod
from data_builders.haystack.synthetic_narrative import narrative_paragraphs
from data_builders.needle.insertion import WORD_ADJECTIVES, WORD_NOUNS
from data_builders.needle.lexical_overlap import (
    bm25_scores,
    content_words,
    document_sentences,
    measure_overlaps,
    overlap_bucket,
    shared_content_words,
    stem,
)
from data_builders.needle.lowlex_pairs import NAMES, PAIRS


@pytest.fixture(scope="module")
def haystack_words() -> set[str]:
    austen = austen_mod.corpus_path().read_text(encoding="utf-8")
    paragraphs = narrative_paragraphs(3)
    synthetic = " ".join(next(paragraphs) for _ in range(3000))
    return {w.lower() for w in re.findall(r"[A-Za-z]+", austen + " " + synthetic)}


def test_at_least_forty_distinct_pairs():
    assert len(PAIRS) >= 40
    assert len({p.predicate for p in PAIRS}) == len(PAIRS) and len({p.needle for p in PAIRS}) == len(PAIRS)
    for p in PAIRS:
        assert p.needle.count("{name}") == 1 and p.needle.endswith(".")
        assert p.question() == f"Which character {p.predicate}?"
        assert p.answer_prefix() == f"The character who {p.predicate} is"


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.predicate)
def test_question_shares_no_content_word_with_its_needle(pair):
    for name in NAMES[:3]:
        needle = pair.needle.format(name=name)
        assert not shared_content_words(pair.question(), needle), (pair.question(), needle)
        assert not shared_content_words(pair.answer_prefix(), needle)


def test_the_check_catches_shared_words_and_stems():
    assert shared_content_words("Which character travelled to Spain?", "She travels a lot.") == {
        ("travelled", "travels")
    }
    assert shared_content_words("Who bakes bread?", "The baker smiled.") == {("bakes", "baker")}
    assert not shared_content_words("Which one has been there?", "It has been here.")  # stopwords only
    assert stem("gardeners") == "garden" and stem("runs") == "run" and content_words("The Prado's") == {"prado"}


def test_names_and_value_words_never_occur_in_a_haystack(haystack_words):
    assert len(set(NAMES)) == len(NAMES) >= 20
    assert not {n.lower() for n in NAMES} & haystack_words
    for p in PAIRS:  # no name is a word of a question either
        assert not {n.lower() for n in NAMES} & content_words(p.question())
    pairs = {f"{a} {n}" for a in WORD_ADJECTIVES for n in WORD_NOUNS}
    assert len(pairs) >= 500  # enough word values that a sample's four rarely repeat


def test_overlap_definitions_on_a_small_document():
    needle = "The special magic number for the Bergmann archive is 1234567."
    context = f"It was a fine day. {needle} She said so. The Bergmann family was rich, she said."
    start = context.index(needle)
    span = (start, start + len(needle))
    sentences = [context[a:b] for a, b in document_sentences(context, [span])]
    assert sentences == ["It was a fine day.", needle, "She said so.", "The Bergmann family was rich, she said."]
    question = "What is the special magic number for the Bergmann archive?"
    (score,) = bm25_scores([question], context, [span])
    assert score > 0
    (unrelated,) = bm25_scores(["Which character has been to Madrid?"], context, [span])
    assert unrelated == 0.0
    high, none = measure_overlaps([question, "Which character has been to Madrid?"], context, [span, span])
    assert high.bm25 == score and high.cosine > 0.6 and high.bucket == "high"
    assert none.bm25 == 0.0 and none.bucket == "none" and none.cosine < high.cosine
    assert overlap_bucket(1.0, 0.2) == "low"
