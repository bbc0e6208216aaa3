"""posprobe data: the toy reference language and passkey contexts of an exact token length, for the probe.

The same generator feeds the reference models' training (`reference_models/train.py`) and the probe
(`tasks/posprobe.py`), so the references are evaluated on in-distribution filler; real models see the
same filler as word salad, as in the classic passkey test.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from longctx_eval.errors import DataError


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


SPECIAL_TOKENS = ("<pad>", "<bos>", "<unk>")
DIGITS = tuple("0123456789")
PROBE_WORDS = ("the", "pass", "key", "is", ".", "what", "?")
FILLER_WORDS = _words(
    """
    river stone green quiet run apple house light water cloud small bright tree walk night garden old
    road bird open warm song horse field rain window cold paper train blue market wood sing boat door
    silver slow hill sea glass table read friend bread summer north chair lamp dream soft winter yellow
    fire sand letter candle forest ring city happy mountain snow write island moon long bridge wind
    street tower sleep flower white black dark early late sweet red lake farm kitchen rope salt iron
    shadow honey valley clock ship storm copper village cotton music thunder plate basket harbor meadow
    """
)
LANGUAGE_SEED = 20_240_601
"""Fixes the toy language (successors and their weights); changing it changes what the references learned."""
SENTENCE_END = 0.15
COPY_PROB = 0.15
COPY_SPAN = (8, 16)
ANSWER_DIGITS = 5
NEEDLE_PREFIX = " the pass key is "
NEEDLE_SUFFIX = " ."
QUESTION = " what is the pass key ? "
VOCAB_SIZE = 128


def toy_vocabulary() -> list[str]:
    """The reference models' word-level vocabulary, padded with unused tokens to VOCAB_SIZE entries."""
    words = [*SPECIAL_TOKENS, *DIGITS, *PROBE_WORDS, *FILLER_WORDS]
    assert len(set(words)) == len(words) == 120, "the toy vocabulary must have 120 distinct entries"
    return words + [f"<unused{i}>" for i in range(VOCAB_SIZE - len(words))]


class ToyLanguage:
    """A first-order Markov chain over the filler words with sentence ends and verbatim copy events."""

    def __init__(self, seed: int = LANGUAGE_SEED, successors: int = 4) -> None:
        rng = np.random.default_rng(seed)
        n = len(FILLER_WORDS)
        self.successors = np.stack([rng.choice(n, size=successors, replace=False) for _ in range(n)])
        self.weights = rng.dirichlet(np.ones(successors), size=n)

    def words(self, rng: np.random.Generator, n: int) -> list[str]:
        """At least `n` filler tokens (words and '.'); copy events repeat earlier spans verbatim."""
        out: list[str] = []
        while len(out) < n:
            if len(out) > 2 * COPY_SPAN[1] and rng.random() < COPY_PROB:
                span = int(rng.integers(COPY_SPAN[0], COPY_SPAN[1] + 1))
                start = int(rng.integers(0, len(out) - span))
                out.extend(out[start : start + span])
                continue
            word = int(rng.integers(len(FILLER_WORDS)))
            while True:
                out.append(FILLER_WORDS[word])
                if rng.random() < SENTENCE_END:
                    out.append(".")
                    break
                word = int(self.successors[word][rng.choice(len(self.weights[word]), p=self.weights[word])])
        return out


@dataclass(frozen=True)
class PasskeyDoc:
    """One passkey sequence of exactly `length` tokens; positions index `ids`."""

    ids: list[int]
    text: str  # the sequence without its special prefix, as text
    context: str  # filler with the needle, as text (what precedes the question)
    value: str
    needle_positions: list[int]  # p_k: where the k-th answer token sits inside the needle
    answer_positions: list[int]  # where the k-th answer token sits in the teacher-forced answer
    filler_spans: list[tuple[int, int]]  # [start, end) token ranges of filler before and after the needle
    depth: float  # requested needle depth in the filler, 0..1
    actual_depth: float  # needle start / filler tokens, as built

    @property
    def query_positions(self) -> list[int]:
        """q_k: the positions whose next-token prediction is the k-th answer token."""
        return [a - 1 for a in self.answer_positions]


def random_value(rng: np.random.Generator, digits: int = ANSWER_DIGITS) -> str:
    """A passkey of `digits` decimal digits."""
    return "".join(str(int(d)) for d in rng.integers(0, 10, size=digits))


class Codec(Protocol):
    """What the builder needs of a tokenizer: ids of a text (no special tokens) and text of ids."""

    def encode_ids(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


def build_passkey(
    codec: Codec,
    prefix: Sequence[int],
    length: int,
    depth: float,
    rng: np.random.Generator,
    language: ToyLanguage,
) -> PasskeyDoc:
    """prefix + filler + needle + filler + question + answer, exactly `length` tokens of `codec`.

    Pieces are encoded separately, so the answer's tokens are identical to the needle's value tokens.
    """
    value = random_value(rng)
    enc = codec.encode_ids
    needle_head, value_ids, needle_tail, question = enc(NEEDLE_PREFIX), enc(value), enc(NEEDLE_SUFFIX), enc(QUESTION)
    fixed = len(prefix) + len(needle_head) + 2 * len(value_ids) + len(needle_tail) + len(question)
    n_filler = length - fixed
    if n_filler < 1:
        raise DataError(f"passkey length {length} is too short: the needle and question alone take {fixed} tokens")
    filler = filler_ids(codec, language, rng, n_filler)
    cut = min(n_filler, max(0, round(depth * n_filler)))
    body = [*filler[:cut], *needle_head, *value_ids, *needle_tail, *filler[cut:]]
    ids = [*prefix, *body, *question, *value_ids]
    needle_start = len(prefix) + cut + len(needle_head)
    needle_end = needle_start + len(value_ids) + len(needle_tail)
    answer_start = len(ids) - len(value_ids)
    assert len(ids) == length
    return PasskeyDoc(
        ids=ids,
        text=codec.decode(ids[len(prefix) :]),
        context=codec.decode(body),
        value=value,
        needle_positions=list(range(needle_start, needle_start + len(value_ids))),
        answer_positions=list(range(answer_start, length)),
        filler_spans=[(len(prefix), len(prefix) + cut), (needle_end, needle_end + n_filler - cut)],
        depth=depth,
        actual_depth=cut / n_filler,
    )


def filler_ids(codec: Codec, language: ToyLanguage, rng: np.random.Generator, n: int) -> list[int]:
    """Exactly `n` filler token ids (for subword tokenizers the cut may fall inside a word)."""
    words = language.words(rng, n)
    while True:
        ids = codec.encode_ids(" " + " ".join(words))
        if len(ids) >= n:
            return ids[:n]
        words += language.words(rng, n - len(ids) + 8)


class ToyCodec:
    """The toy word-level tokenizer as a plain dict: fast, and identical to reference_models/*/tokenizer.json."""

    def __init__(self) -> None:
        self.vocab = {w: i for i, w in enumerate(toy_vocabulary())}
        self.words = toy_vocabulary()

    def encode_ids(self, text: str) -> list[int]:
        """Whitespace split, punctuation split off, digits split one by one (as the tokenizer.json does)."""
        tokens = re.findall(r"[0-9]|[^\W\d]+|[^\w\s]", text)
        return [self.vocab.get(t, self.vocab["<unk>"]) for t in tokens]

    def decode(self, ids: list[int]) -> str:
        """Tokens joined by single spaces."""
        return " ".join(self.words[i] for i in ids)
