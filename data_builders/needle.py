"""Needle samples: one key-value sentence inserted at a sentence boundary of an exact-length haystack."""

from __future__ import annotations

import random
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from data_builders.haystack import Haystack, HaystackSource, fit_length, with_retries
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.tokenizer import Encoded, Tokenizer

# Below this much haystack a "needle in a haystack" is just the needle.
MIN_HAYSTACK_TOKENS = 32


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Invented names only, so a key never names anything in the synthetic haystack (a test checks this).
KEY_QUALIFIERS = _words(
    """
    Aldermoor Bergmann Corvath Dellacourt Esmark Falkenrath Gorvane Halloran Isenbeck Jarrowby Kestell
    Lorimont Marrowvale Nesbury Orlanski Pellingham Quorvath Rendlesham Sturmfeld Tollemache Ulvenhart
    Varrick Wendelmoor Yarrowfield Zetterlund Ambergast Blythemoor Casparov Dornbach Elsworthy Fenwright
    Gallowmere Hesketh Ivanhoff Jessingrave Korvinsky Lindenmark Mallenholt Northaven Ostrander Pennerow
    Quellington Rostova Saltonstall Thackmoor Umbravel Vandermeer Westerholt Ysolde Zabrowski Arkwright
    Bramhall Cheverell Drummore Eastwick Farrowdale Grisedale Hartigan Illingworth Jorvik
    """
)
KEY_NOUNS = _words(
    """
    archive ledger vault expedition manuscript greenhouse foundry collection survey treaty cipher atlas
    reservoir chronicle laboratory estate bequest orchard charter inquiry regiment tapestry almanac
    """
)
_CODE_WORDS = _words("cobalt saffron juniper quartz falcon meridian tundra lantana obsidian vermilion")


@dataclass(frozen=True)
class NeedleTemplate:
    """A needle sentence and its question, kept together so they always ask about the same thing."""

    needle: str  # with {key} and {value}
    question: str  # with {key}
    value_kind: str = "number"  # "number": 7 digits; "code": word-number, e.g. "quartz-4127"


MAGIC_NUMBER = NeedleTemplate(
    "The special magic number for {key} is {value}.",
    "What is the special magic number for {key}? Answer with the number only.",
)
PASSCODE = NeedleTemplate(
    "The passcode for {key} is {value}.",
    "What is the passcode for {key}? Answer with the passcode only.",
    "code",
)


@dataclass(frozen=True)
class NeedleDoc:
    """A haystack with one needle; spans are half-open, in characters of `context` and in its tokens."""

    context: str  # exactly target_tokens tokens in the tokenizer it was built for
    needle: str
    needle_start: int
    needle_end: int  # context[needle_start:needle_end] == needle
    value: str  # the answer
    key: str  # what the question asks about
    depth: float  # requested, 0..1
    actual_depth: float  # needle_token_start / target_tokens, measured on the final context
    question: str  # the template's question for this key
    needle_token_start: int
    needle_token_end: int
    target_tokens: int
    haystack_seed: int  # drawn from the caller's rng; with source and tokenizer it rebuilds the haystack


def needle_question(doc: NeedleDoc) -> str:
    """The question for a needle doc, phrased by the same template as its needle."""
    return doc.question


def make_key(rng: random.Random) -> str:
    """A random key such as "the Bergmann archive"."""
    return f"the {rng.choice(KEY_QUALIFIERS)} {rng.choice(KEY_NOUNS)}"


def make_value(rng: random.Random, kind: str = "number") -> str:
    """A random answer value: "number" (7 digits, like RULER) or "code" (e.g. "quartz-4127")."""
    if kind == "number":
        return str(rng.randint(1_000_000, 9_999_999))
    if kind == "code":
        return f"{rng.choice(_CODE_WORDS)}-{rng.randint(1000, 9999)}"
    raise ConfigError(f"value_kind: expected 'number' or 'code', got {kind!r}")


# A sentence ends at . ! or ? (a period may carry closing quotes), before whitespace and a capital,
# digit or opening quote. "?" or "!" before a closing quote is skipped: fiction goes on with "she asked".
_SENTENCE_END = re.compile(r"(?:\.[\"'\u201d\u2019)\]]?|[!?])(?=\s+[\"'\u201c\u2018(]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(_words("Mr Mrs Ms Dr St Mt Jr Sr Prof Rev Capt Col Gen Lt Sgt No vs etc cf Fig Vol"))


def sentence_ends(text: str, limit: int) -> list[int]:
    """Character positions in text[:limit] right after a sentence or paragraph end, plus 0."""
    ends = [0]
    for m in _SENTENCE_END.finditer(text, 0, limit):
        i = j = m.start()
        while i > 0 and text[i - 1].isalpha():
            i -= 1
        word = text[i:j]
        if text[j] == "." and (word in _ABBREVIATIONS or (len(word) == 1 and word.isupper())):
            continue  # "Mr." or an initial, not the end of a sentence
        ends.append(m.end())
    pos = text.find("\n\n", 1, limit)
    while pos != -1:
        if not text[pos - 1].isspace():
            ends.append(pos)
        pos = text.find("\n\n", pos + 2, limit)
    return sorted(set(ends))


def build_needle_doc(
    source: HaystackSource,
    tokenizer: Tokenizer,
    target_tokens: int,
    depth: float,
    rng: random.Random,
    *,
    template: NeedleTemplate = MAGIC_NUMBER,
    haystack_seed: int | None = None,
) -> NeedleDoc:
    """A needle inserted at the sentence boundary nearest `depth`, in a context of exactly target_tokens.

    `haystack_seed` (default: drawn from `rng`) lets several needles share one haystack, as the HF export does.
    """
    if isinstance(target_tokens, bool) or not isinstance(target_tokens, int) or target_tokens < 1:
        raise ConfigError(f"target_tokens: expected a positive integer, got {target_tokens!r}")
    if isinstance(depth, bool) or not isinstance(depth, int | float) or not 0.0 <= depth <= 1.0:
        raise ConfigError(f"depth: expected a number from 0.0 to 1.0, got {depth!r}")
    key = make_key(rng)
    value = make_value(rng, template.value_kind)
    drawn = rng.getrandbits(32)  # drawn even when given, so `rng` advances the same either way
    haystack_seed = drawn if haystack_seed is None else haystack_seed
    needle = template.needle.format(key=key, value=value)
    needle_tokens = tokenizer.count(" " + needle)
    minimum = needle_tokens + MIN_HAYSTACK_TOKENS
    if target_tokens < minimum:
        raise DataError(
            f"target_tokens={target_tokens} is too small for a needle: the needle takes {needle_tokens} "
            f"tokens in tokenizer {tokenizer.name!r} and at least {MIN_HAYSTACK_TOKENS} haystack tokens "
            f"are required, so the minimum is about {minimum} (it varies slightly with key and value)"
        )
    hay_tokens = target_tokens - needle_tokens

    def attempt(hay: Haystack) -> tuple[str, int, Encoded]:
        return _insert(hay, needle, hay_tokens, depth, target_tokens, tokenizer)

    context, start, enc = with_retries(attempt, source, tokenizer, target_tokens, haystack_seed)
    token_ends = [end for _, end in enc.offsets]
    token_starts = [s for s, _ in enc.offsets]
    tok_start = bisect_right(token_ends, start)  # the first token that ends inside the needle
    return NeedleDoc(
        context=context,
        needle=needle,
        needle_start=start,
        needle_end=start + len(needle),
        value=value,
        key=key,
        depth=float(depth),
        actual_depth=tok_start / target_tokens,
        question=template.question.format(key=key),
        needle_token_start=tok_start,
        needle_token_end=bisect_left(token_starts, start + len(needle)),
        target_tokens=target_tokens,
        haystack_seed=haystack_seed,
    )


def _insert(
    hay: Haystack, needle: str, hay_tokens: int, depth: float, target: int, tokenizer: Tokenizer
) -> tuple[str, int, Encoded]:
    """Insert `needle` at the boundary nearest `depth` and cut the tail so the total is `target` tokens.

    Returns the context, the needle's char start and the context's encoding.
    """
    text, ends = hay.text, hay.token_ends
    candidates = [(bisect_right(ends, a), a) for a in sentence_ends(text, ends[hay_tokens - 1] + 1)]
    candidates = [(t, a) for t, a in candidates if t <= hay_tokens]
    t, a = min(candidates, key=lambda ta: (abs(ta[0] - depth * hay_tokens), ta[1]))
    if a == 0:
        head, lo, start = needle + " ", 1, 0
    else:
        head, lo, start = text[:a] + " " + needle, t, a + 1

    def build(k: int) -> str:
        return head + text[a : max(a, ends[k - 1])]

    # A NoExactCut here is about the tail, not the boundary: the caller retries with another haystack.
    context, enc = fit_length(build, hay_tokens, lo, len(ends), target, tokenizer, offsets=True)
    assert enc is not None  # asked for offsets
    return context, start, enc
