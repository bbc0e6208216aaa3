"""Haystack and needle builders: exact lengths in real tokenizers, exact spans, determinism, clear errors."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_builders import (
    MAGIC_NUMBER,
    PASSCODE,
    FilesSource,
    HaystackSource,
    assemble,
    build_needle_doc,
    get_source,
    insert_sentences,
    narrative_paragraphs,
    needle_question,
)
from data_builders.haystack import narrative_lexicon as lexicon
from data_builders.haystack import narrative_templates as templates
from data_builders.haystack.span_insertion import MIN_HAYSTACK_TOKENS, sentence_ends
from data_builders.haystack.synthetic_narrative import _Slots, _Writer, narrative_sha256
from data_builders.needle.insertion import KEY_QUALIFIERS
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.tokenizer import Tokenizer


@pytest.fixture(scope="module", params=["minilm", "bpe"])
def tok(request, minilm_tokenizer, bpe_tokenizer) -> Tokenizer:
    """MiniLM's uncased WordPiece and a byte-level BPE trained on synthetic prose (vocab 400)."""
    return minilm_tokenizer if request.param == "minilm" else bpe_tokenizer


@pytest.fixture(scope="module")
def synthetic() -> HaystackSource:
    return get_source("synthetic")


def _text(seed: int, chars: int) -> str:
    out, n = [], 0
    for para in narrative_paragraphs(seed):
        out.append(para)
        n += len(para) + 2
        if n >= chars:
            return "\n\n".join(out)
    raise AssertionError("unreachable")


# --- synthetic narrative ---------------------------------------------------------------------------


def test_narrative_is_deterministic_per_seed():
    first = list(itertools.islice(narrative_paragraphs(3), 50))
    assert first == list(itertools.islice(narrative_paragraphs(3), 50))
    assert first != list(itertools.islice(narrative_paragraphs(4), 50))
    assert narrative_sha256() == narrative_sha256()


def test_narrative_is_varied_and_clean():
    text = _text(0, 450_000)  # about 100K tokens
    sentences = re.split(r"(?<=[.!?])\s+", text)
    counts = Counter(sentences)
    assert len(counts) / len(sentences) > 0.9, counts.most_common(5)
    assert counts.most_common(1)[0][1] < 60  # no RULER-style filler sentence
    words = re.findall(r"[A-Za-z']+", text)
    assert len(set(words)) > 1200
    assert '"' in text and "?" in text  # dialogue and questions, not only statements
    assert not re.search(r"\d{5,}", text)  # a 7-digit needle value can never collide with the haystack
    assert "magic" not in text.lower() and "{" not in text and "  " not in text


def test_every_template_fills():
    writer = _Writer(random.Random(0))
    writer.paragraph()  # sets up the paragraph's people and place
    pools = [templates.INTRO, templates.SETTING, templates.ACTION, templates.DESCRIBE, templates.INNER]
    pools += [templates.HISTORY, templates.TRANSITION, templates.BEATS, lexicon.LINES, lexicon.QUESTIONS]
    for template in itertools.chain.from_iterable(pools):
        slots = _Slots(writer.base)
        slots.world, slots.rng = writer.world, writer.rng
        assert "{" not in template.format_map(slots), template


def test_narrative_reaches_a_million_tokens():
    assert len(_text(1, 4_500_000)) > 4_000_000  # about 1M tokens; speed is `make bench`'s job


def test_needle_keys_never_name_the_haystack():
    haystack_words = set()
    for name in dir(lexicon):
        value = getattr(lexicon, name)
        if name.isupper() and isinstance(value, tuple):
            haystack_words.update(w for item in value for w in re.findall(r"[A-Za-z]+", item))
    assert not haystack_words & set(KEY_QUALIFIERS)


# --- exact-length assembly --------------------------------------------------------------------------


@pytest.mark.parametrize(("n_tokens", "seeds"), [(1024, (0, 1, 2)), (4096, (0, 5)), (16384, (0, 9)), (131072, (3,))])
def test_assemble_is_exact(tok, synthetic, n_tokens, seeds):
    for seed in seeds:
        text = assemble(synthetic, tok, n_tokens, seed)
        assert tok.count(text) == n_tokens
        assert text == text.lstrip()


@settings(max_examples=30, deadline=None)
@given(n_tokens=st.integers(1, 3000), seed=st.integers(0, 2**32 - 1))
def test_assemble_is_exact_for_any_length(bpe_tokenizer, n_tokens, seed):
    assert bpe_tokenizer.count(assemble(get_source("synthetic"), bpe_tokenizer, n_tokens, seed)) == n_tokens


def test_assemble_is_deterministic(tok, synthetic):
    a = assemble(synthetic, tok, 2048, 11)
    assert a == assemble(get_source("synthetic"), tok, 2048, 11)
    assert get_source("default") is get_source("austen")
    assert a != assemble(synthetic, tok, 2048, 12)


@pytest.mark.slow
def test_assemble_one_million_tokens(request, minilm_tokenizer, synthetic):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: run with -m slow")
    text = assemble(synthetic, minilm_tokenizer, 1_000_000, 0)
    assert minilm_tokenizer.count(text) == 1_000_000


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "100"])
def test_assemble_rejects_bad_lengths(minilm_tokenizer, synthetic, bad):
    with pytest.raises(ConfigError, match="n_tokens"):
        assemble(synthetic, minilm_tokenizer, bad, 0)


def test_truncating_tokenizer_is_reported(minilm_tokenizer, synthetic):
    truncating = Tokenizer(minilm_tokenizer.backend, "truncating")
    truncating.backend.enable_truncation(128)
    with pytest.raises(DataError, match="truncat"):
        assemble(synthetic, truncating, 1000, 0)


# --- sources ----------------------------------------------------------------------------------------


def test_unknown_source_suggests(synthetic):
    with pytest.raises(ConfigError, match=r"unknown haystack source 'synthtic'.*Did you mean 'synthetic'"):
        get_source("synthtic")
    with pytest.raises(ConfigError, match="files:<glob>"):
        get_source("files:")
    assert isinstance(synthetic, HaystackSource) and len(synthetic.sha256) == 64


def test_files_source(tmp_path, tok):
    (tmp_path / "b.txt").write_text("Second file, first paragraph.\n\n\n  Second   file,\nsecond paragraph.  \n")
    paragraphs = [f"Paragraph {i} of the first file. " + "Some words follow here. " * (i % 7 + 1) for i in range(300)]
    (tmp_path / "a.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")
    (tmp_path / "ignored.md").write_text("not matched")
    source = get_source(f"files:{tmp_path}/*.txt")
    assert isinstance(source, FilesSource) and source.name == f"files:{tmp_path}/*.txt"
    assert [p.name for p in source.paths] == ["a.txt", "b.txt"]
    streamed = list(source.paragraphs(0))
    assert len(streamed) == 302 and "Second file, second paragraph." in streamed
    assert sorted(streamed) == sorted(source.paragraphs(1)) and streamed != list(source.paragraphs(1))
    text = assemble(source, tok, 1500, 0)
    assert tok.count(text) == 1500 and text in "\n\n".join(streamed * 2)
    assert get_source(f"files:{tmp_path}").sha256 == source.sha256  # a folder means its .txt files
    before = source.sha256
    (tmp_path / "b.txt").write_text("Changed.")
    assert get_source(f"files:{tmp_path}/*.txt").sha256 != before


def test_files_source_errors(tmp_path, minilm_tokenizer):
    with pytest.raises(DataError, match="matched no files"):
        get_source(f"files:{tmp_path}/*.txt")
    (tmp_path / "empty.txt").write_text("\n\n   \n")
    empty = get_source(f"files:{tmp_path}/*.txt")
    with pytest.raises(DataError, match=r"haystack source 'files:.*' yielded no text"):
        assemble(empty, minilm_tokenizer, 100, 0)
    (tmp_path / "short.txt").write_text("A short text of a few words.")
    with pytest.raises(DataError, match=r"has only \d+ tokens"):
        assemble(get_source(f"files:{tmp_path}/*.txt"), minilm_tokenizer, 100, 0)
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(DataError, match="not UTF-8"):
        get_source(f"files:{tmp_path}/*.txt")


def test_multi_token_characters_still_fit_exactly(tmp_path, bpe_tokenizer):
    # Each emoji or CJK character is several byte tokens here, so some counts cannot end a prefix;
    # the builder then drops the paragraph at the cut and tries again.
    rng = random.Random(0)
    pieces = ["Ça va?", "“Déjà vu,”", "she said.", "😀😀", "Émile", "ate", "crème brûlée.", "日本語のテキスト。", "the"]
    paragraphs = [" ".join(rng.choice(pieces) for _ in range(rng.randint(3, 30))) for _ in range(300)]
    (tmp_path / "u.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")
    source = get_source(f"files:{tmp_path}")
    for n in range(100, 200):
        assert bpe_tokenizer.count(assemble(source, bpe_tokenizer, n, n)) == n
    doc = build_needle_doc(source, bpe_tokenizer, 500, 0.5, random.Random(1))
    assert bpe_tokenizer.count(doc.context) == 500
    assert doc.context[doc.needle_start : doc.needle_end] == doc.needle


def test_needles_fit_exactly_in_dialogue_heavy_text(tmp_path, bpe_tokenizer):
    # Regression: in text dense with curly quotes and emoji every retry could land on another
    # multi-token character at the cut; a single-token filler now ends such texts exactly.
    rng = random.Random(3)
    pieces = ["“Yes,”", "“No!”", "he said", "😀", "“Well…”", "she", "replied", "—", "quietly."]
    paragraphs = [" ".join(rng.choice(pieces) for _ in range(rng.randint(5, 40))) for _ in range(400)]
    (tmp_path / "d.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")
    source = get_source(f"files:{tmp_path}")
    for target in range(300, 420, 7):
        for depth in (0.0, 0.25, 0.5, 0.75, 1.0):
            doc = build_needle_doc(source, bpe_tokenizer, target, depth, random.Random(target))
            assert bpe_tokenizer.count(doc.context) == target
            assert doc.context[doc.needle_start : doc.needle_end] == doc.needle


# --- needles ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", [256, 4096])
@pytest.mark.parametrize("depth", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_needle_doc_is_exact(tok, synthetic, target, depth):
    doc = build_needle_doc(synthetic, tok, target, depth, random.Random(f"{target}-{depth}"))
    assert tok.count(doc.context) == target == doc.target_tokens
    assert doc.context[doc.needle_start : doc.needle_end] == doc.needle
    assert doc.value in doc.needle and doc.key in doc.needle and re.fullmatch(r"\d{7}", doc.value)
    assert doc.context.count(doc.value) == 1
    assert needle_question(doc) == MAGIC_NUMBER.question.format(key=doc.key)
    enc = tok.encode(doc.context)
    assert enc.offsets[doc.needle_token_end - 1][1] == doc.needle_end
    assert enc.offsets[doc.needle_token_start][1] > doc.needle_start >= enc.offsets[doc.needle_token_start][0] - 1
    assert doc.actual_depth == doc.needle_token_start / target
    assert abs(doc.actual_depth - depth) < (0.06 if target == 4096 else 0.25)  # nearest sentence boundary
    if depth == 0.0:
        assert doc.needle_start == 0 and doc.actual_depth == 0.0
    if doc.needle_start > 0:  # inserted after a sentence end, never inside one
        before = doc.context[: doc.needle_start]
        assert re.search(r"[.!?\"] $", before) or before.endswith("\n\n"), before[-40:]


def test_needle_is_deterministic_and_varies(minilm_tokenizer, synthetic):
    docs = [build_needle_doc(synthetic, minilm_tokenizer, 1024, 0.5, random.Random(s)) for s in (1, 1, 2)]
    assert docs[0] == docs[1]
    assert docs[0].key != docs[2].key or docs[0].value != docs[2].value
    assert docs[0].context != docs[2].context


def test_needle_template_and_question_agree(bpe_tokenizer, synthetic):
    doc = build_needle_doc(synthetic, bpe_tokenizer, 1024, 0.3, random.Random(0), template=PASSCODE)
    assert re.fullmatch(r"[a-z]+-\d{4}", doc.value)
    assert doc.needle == f"The passcode for {doc.key} is {doc.value}."
    assert needle_question(doc) == f"What is the passcode for {doc.key}? Answer with the passcode only."


def test_needle_too_short_says_the_minimum(minilm_tokenizer, synthetic):
    with pytest.raises(DataError, match=r"target_tokens=20 is too small.*minimum is about (\d+)") as info:
        build_needle_doc(synthetic, minilm_tokenizer, 20, 0.5, random.Random(0))
    minimum = int(re.search(r"minimum is about (\d+)", str(info.value)).group(1))
    assert minimum > MIN_HAYSTACK_TOKENS
    doc = build_needle_doc(synthetic, minilm_tokenizer, minimum, 0.5, random.Random(0))  # same key and value
    assert minilm_tokenizer.count(doc.context) == minimum


@pytest.mark.parametrize(("depth", "field"), [(1.5, "depth"), (-0.1, "depth"), ("0.5", "depth")])
def test_needle_rejects_bad_depth(minilm_tokenizer, synthetic, depth, field):
    with pytest.raises(ConfigError, match=field):
        build_needle_doc(synthetic, minilm_tokenizer, 1024, depth, random.Random(0))


def test_sentence_ends():
    text = 'Mr. Darcy came. "Where?" Anna asked. J. Smith left! Then she said "no." It ended.\n\nNew one.'
    ends = sentence_ends(text, len(text))
    assert ends[0] == 0
    assert [text[:e].split()[-1] for e in ends[1:]] == ["came.", "asked.", "left!", '"no."', "ended."]
    assert text.index("\n\n") in ends


# --- insert_sentences: several sentences at exact spans -----------------------------------------------

FACTS = (
    ("The vault code of the Aldermoor archive is 4417.", 0.0),
    ("Corvath moved the ledger to the greenhouse.", 0.35),
    ("The Esmark charter was signed in the foundry.", 0.35),
    ("Nesbury kept the atlas in the reservoir.", 1.0),
)


@pytest.mark.parametrize("target", [300, 2048])
def test_insert_sentences_gives_exact_spans(tok, synthetic, target):
    got = insert_sentences(synthetic, tok, target, FACTS, seed=7)
    assert tok.count(got.context) == target == got.n_tokens and got.haystack_seed == 7
    enc = tok.encode(got.context)
    assert [s.text for s in got.spans] == [f for f, _ in FACTS]  # in the order given
    for span, (_, depth) in zip(got.spans, FACTS, strict=True):
        assert got.context[span.char_start : span.char_end] == span.text and span.depth == depth
        assert enc.offsets[span.token_end - 1][1] == span.char_end
        assert enc.offsets[span.token_start][1] > span.char_start >= enc.offsets[span.token_start][0] - 1
        assert span.actual_depth == span.token_start / target
        if span.char_start > 0:  # after a sentence end or another insertion, never inside a sentence
            before = got.context[: span.char_start]
            assert re.search(r"[.!?\"] $", before) or before.endswith("\n\n"), before[-40:]
    first, second, third, last = got.spans
    assert first.char_start == 0
    assert second.char_end < third.char_start  # same depth: adjacent, in the order given
    assert third.char_end <= last.char_start and last.actual_depth > third.actual_depth
    assert insert_sentences(synthetic, tok, target, FACTS, seed=7) == got  # deterministic


def test_one_inserted_sentence_is_the_needle_doc(bpe_tokenizer, synthetic):
    """build_needle_doc is insert_sentences with one sentence: same context and spans."""
    doc = build_needle_doc(synthetic, bpe_tokenizer, 1024, 0.4, random.Random(3), haystack_seed=11)
    got = insert_sentences(synthetic, bpe_tokenizer, 1024, [(doc.needle, 0.4)], seed=11)
    (span,) = got.spans
    assert got.context == doc.context
    assert (span.char_start, span.char_end) == (doc.needle_start, doc.needle_end)
    assert (span.token_start, span.token_end, span.actual_depth) == (
        doc.needle_token_start,
        doc.needle_token_end,
        doc.actual_depth,
    )


@pytest.mark.parametrize(
    ("sentences", "error", "message"),
    [
        ([], ConfigError, "at least one"),
        ([("", 0.5)], ConfigError, r"sentences\[0\]: expected a \(non-empty sentence, depth\) pair"),
        ([("A fact.", 1.5)], ConfigError, r"sentences\[0\] depth: expected a number from 0.0 to 1.0"),
        ([("A fact.", 0.5), "B"], ConfigError, r"sentences\[1\]"),
        ([("A fact. " * 40, 0.5)], DataError, "too small for the insertions"),
    ],
)
def test_insert_sentences_rejects_bad_input(minilm_tokenizer, synthetic, sentences, error, message):
    with pytest.raises(error, match=message):
        insert_sentences(synthetic, minilm_tokenizer, 100, sentences, seed=0)
