"""One needle (a key-value sentence) at an exact span of an exact-length haystack: for the needle task and builder."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from data_builders.haystack.assembly import Haystack, HaystackSource, with_retries
from data_builders.haystack.span_insertion import (
    MIN_HAYSTACK_TOKENS,
    check_depth,
    check_target_tokens,
    place,
    token_span,
)
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.pieces import TokenOffsets
from longctx_eval.text.tokenizer import Tokenizer


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
# "word" values are hyphenated adjective-noun pairs (like RULER's), e.g. "velvet-harpoon": a pair no prose uses.
WORD_ADJECTIVES = _words(
    """
    amber brittle copper dappled elastic frosted gilded hollow indigo jagged knotted lacquered molten nimble
    opaline pewter quilted rusted silken tawny umber velvet woolen zigzag
    """
)
WORD_NOUNS = _words(
    """
    anvil bellows compass dirigible easel funnel gondola harpoon inkwell kettle lantern metronome nutcracker
    oboe pendulum quiver sextant thimble ukulele valise windlass xylophone yardarm zither
    """
)


@dataclass(frozen=True)
class NeedleTemplate:
    """A needle sentence and its question, kept together so they always ask about the same thing."""

    needle: str  # with {key} and {value}
    question: str  # with {key}
    value_kind: str = "number"  # see make_value
    answer_prefix: str = ""  # with {key}: the text the reply starts with, e.g. "... for {key} ... is"


def _magic(what: str, kind: str) -> NeedleTemplate:
    """The RULER-style template of one value kind: question and answer prefix name the key the same way."""
    return NeedleTemplate(
        f"The special magic {what} for {{key}} is {{value}}.",
        f"What is the special magic {what} for {{key}} mentioned in the provided text?",
        kind,
        f"The special magic {what} for {{key}} mentioned in the provided text is",
    )


MAGIC_NUMBER = _magic("number", "number")
MAGIC_WORD = _magic("word", "word")
MAGIC_UUID = _magic("UUID", "uuid")
MAGIC_TEMPLATES = {"number": MAGIC_NUMBER, "word": MAGIC_WORD, "uuid": MAGIC_UUID}
"""The needle family's template per value kind."""
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
    answer_prefix: str  # the template's answer prefix for this key ("" when it has none)
    value_kind: str
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


VALUE_KINDS = ("number", "word", "uuid", "code")


def make_value(rng: random.Random, kind: str = "number") -> str:
    """A random answer value: "number" (7 digits, like RULER), "word" (e.g. "velvet-harpoon"),
    "uuid" (a version-4 UUID drawn from `rng`) or "code" (e.g. "quartz-4127")."""
    if kind == "number":
        return str(rng.randint(1_000_000, 9_999_999))
    if kind == "word":
        return f"{rng.choice(WORD_ADJECTIVES)}-{rng.choice(WORD_NOUNS)}"
    if kind == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if kind == "code":
        return f"{rng.choice(_CODE_WORDS)}-{rng.randint(1000, 9999)}"
    raise ConfigError(f"value_kind: expected one of {list(VALUE_KINDS)}, got {kind!r}")


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
    check_target_tokens(target_tokens)
    check_depth(depth)
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

    def attempt(hay: Haystack) -> tuple[str, list[int], TokenOffsets]:
        return place(hay, [needle], [float(depth)], hay_tokens, target_tokens, tokenizer)

    context, (start,), enc = with_retries(attempt, source, tokenizer, target_tokens, haystack_seed)
    span = token_span(enc, needle, start, depth, target_tokens)
    return NeedleDoc(
        context=context,
        needle=needle,
        needle_start=span.char_start,
        needle_end=span.char_end,
        value=value,
        key=key,
        depth=float(depth),
        actual_depth=span.actual_depth,
        question=template.question.format(key=key),
        answer_prefix=template.answer_prefix.format(key=key),
        value_kind=template.value_kind,
        needle_token_start=span.token_start,
        needle_token_end=span.token_end,
        target_tokens=target_tokens,
        haystack_seed=haystack_seed,
    )
