"""Coreference in a haystack (exact shifts) and the synthetic long-document generator."""

from __future__ import annotations

import pytest

from data_builders import get_source
from data_builders.coref.conll import CorefDocument, parse_conll
from data_builders.coref.haystack import as_long, measure, render, split_words, stretch, valid_gaps
from data_builders.coref.synthetic import synthetic_document
from longctx_eval.errors import ConfigError, DataError

DOC = """#begin document (t); part 000
t\t0\t0\tMary\t(0
t\t0\t1\tJones\t0)
t\t0\t2\tarrived\t-
t\t0\t3\t.\t-

t\t0\t0\tShe\t(0)
t\t0\t1\tsaw\t-
t\t0\t2\tthe\t(1
t\t0\t3\tdog\t1)
t\t0\t4\t.\t-

t\t0\t0\tIt\t(1)
t\t0\t1\tbarked\t-
t\t0\t2\tat\t-
t\t0\t3\ther\t(0)
t\t0\t4\t.\t-
#end document
"""


def _doc() -> CorefDocument:
    return parse_conll(DOC.splitlines())[0]


def _assert_exact(original: CorefDocument, long) -> None:  # noqa: ANN001
    for c0, c1 in zip(original.clusters, long.doc.clusters, strict=True):
        for (s, e), (s2, e2) in zip(c0, c1, strict=True):
            assert long.doc.tokens[s2 : e2 + 1] == original.tokens[s : e + 1]
            assert (s2, e2) == (long.shift[s], long.shift[e])


@pytest.mark.parametrize("target", [20, 200, 5000])
def test_stretch_in_words_is_exact(target: int) -> None:
    d = _doc()
    long = stretch(d, target, get_source("synthetic"), seed=3)
    _assert_exact(d, long)
    assert measure(long, None) <= target and measure(long, None) >= target - 2
    assert long.inserted_tokens == len(long.doc.tokens) - len(d.tokens)
    inserted = {i for s, e in long.haystack for i in range(s, e)}
    assert not inserted & {i for c in long.doc.clusters for s, e in c for i in range(s, e + 1)}
    # Distances grew: the last mention moved by all the haystack inserted before it.
    assert long.doc.clusters[0][-1][0] - long.doc.clusters[0][0][0] > 13 or target < 30


def test_stretch_in_model_tokens(minilm_tokenizer) -> None:  # noqa: ANN001
    d = _doc()
    long = stretch(d, 600, get_source("synthetic"), seed=1, tokenizer=minilm_tokenizer)
    _assert_exact(d, long)
    n = measure(long, minilm_tokenizer)
    assert 560 <= n <= 600
    assert stretch(d, 600, get_source("synthetic"), seed=1, tokenizer=minilm_tokenizer) == long  # deterministic


def test_stretch_refuses_a_target_below_the_document() -> None:
    with pytest.raises(DataError, match="more than the target"):
        stretch(_doc(), 5, get_source("synthetic"), seed=0)


def test_gaps_never_split_a_mention() -> None:
    d = CorefDocument("x", ("a", "b", "c", "d"), (1, 2, 4), (((0, 2),),))
    assert valid_gaps(d) == []
    assert as_long(d).doc is d


def test_render_spans_are_exact() -> None:
    toks = ['"', "Hello", ",", "Clara", "'s", "friend", '"', "(", "she", ")", "said", "."]
    text, spans = render(toks, (len(toks),))
    assert [text[s:e] for s, e in spans] == toks
    assert text == '"Hello, Clara\'s friend" (she) said.'
    assert split_words("Clara's dog, too.") == ["Clara", "'s", "dog", ",", "too", "."]


@pytest.mark.parametrize("target", [64, 1000, 20000])
def test_synthetic_gold_is_exact_and_seeded(target: int) -> None:
    long = synthetic_document(target, seed=5)
    doc = long.doc
    assert len(doc.tokens) <= target
    pronouns = {"he", "him", "his", "himself", "she", "her", "herself"}
    for cluster in doc.clusters:
        first = " ".join(doc.tokens[cluster[0][0] : cluster[0][1] + 1])
        assert first.lower() not in pronouns, "a chain never starts with a pronoun"
        for s, e in cluster:
            words = doc.tokens[s : e + 1]
            assert words[0][0].isalpha() and all(w.isalpha() or w == "'s" for w in words)
    assert synthetic_document(target, seed=5) == long
    assert synthetic_document(target, seed=6).doc.tokens != doc.tokens


def test_synthetic_in_model_tokens(minilm_tokenizer) -> None:  # noqa: ANN001
    long = synthetic_document(2048, seed=0, tokenizer=minilm_tokenizer)
    n = minilm_tokenizer.count(render(long.doc.tokens, long.doc.sentence_ends, long.paragraph_ends)[0])
    assert 1700 <= n <= 2048
    assert sum(len(c) for c in long.doc.clusters) > 50


def test_synthetic_rejects_tiny_targets() -> None:
    with pytest.raises(ConfigError):
        synthetic_document(3, seed=0)
