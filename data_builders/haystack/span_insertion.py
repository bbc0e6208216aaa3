"""Exact-span insertion for task authors: sentences placed at chosen depths of an exact-length haystack.

`insert_sentences` returns a context of exactly `target_tokens` tokens with every inserted sentence at a
sentence boundary and its exact char and token span. The needle task's single needle uses the same code.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from data_builders.haystack.assembly import Haystack, HaystackSource, fit_length, with_retries
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.pieces import TokenOffsets
from longctx_eval.text.tokenizer import Tokenizer

MIN_HAYSTACK_TOKENS = 32
"""Below this much haystack a "needle in a haystack" is just the needle."""


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# A sentence ends at . ! or ? (a period may carry closing quotes), before whitespace and a capital,
# digit or opening quote. "?" or "!" before a closing quote is skipped: fiction goes on with "she asked".
_SENTENCE_END = re.compile(r"(?:\.[\"'\u201d\u2019)\]]?|[!?])(?=\s+[\"'\u201c\u2018(]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(_words("Mr Mrs Ms Dr St Mt Jr Sr Prof Rev Capt Col Gen Lt Sgt No vs etc cf Fig Vol"))


_RESTART = re.compile(r"\n\n(?=\S)")
"""Where a paragraph begins: the scan of sentence ends can restart there (see `sentence_ends`)."""
_MEMO_CHARS = 20_000
"""Shorter texts are scanned whole."""
_ENDS: dict[str, tuple[int, ...]] = {}
_ENDS_MAX = 100_000
"""Paragraphs whose sentence ends are kept (the oldest dropped first): about eight 1M-token haystacks."""


def sentence_ends(text: str, limit: int) -> list[int]:
    """Character positions in text[:limit] right after a sentence or paragraph end, plus 0.

    Long texts are scanned paragraph by paragraph through a memo (`text_sentence_ends` on the whole text gives the
    same list; tested): a paragraph start `c` (after a blank line, before a non-space) is a point where the scan
    restarts unchanged, since no match covers the whitespace before it and a match's look-ahead crosses into the
    next paragraph by at most two characters. So the ends in [lo, hi) between two such starts depend on
    text[lo:hi + 2] alone, and the samples sharing a haystack scan only their new paragraphs."""
    if limit < _MEMO_CHARS:
        return text_sentence_ends(text, limit)
    out, lo = [0], 0
    for m in _RESTART.finditer(text, 0, limit):
        hi = m.end()
        if hi + 2 > limit:
            break
        piece = text[lo : hi + 2]
        got = _ENDS.get(piece)
        if got is None:
            got = tuple(e for e in text_sentence_ends(piece, len(piece)) if 0 < e <= hi - lo)
            _ENDS[piece] = got
            if len(_ENDS) > _ENDS_MAX:  # the oldest first
                del _ENDS[next(iter(_ENDS))]
        out.extend(lo + e for e in got)
        lo = hi
    out.extend(lo + e for e in text_sentence_ends(text[lo:limit], limit - lo) if e > 0)
    return out


def text_sentence_ends(text: str, limit: int) -> list[int]:
    """`sentence_ends` scanning the whole of text[:limit] at once (the reference for the memoised scan)."""
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


@dataclass(frozen=True)
class Span:
    """Where one inserted sentence sits: half-open char span of the context and token span of its encoding."""

    text: str  # context[char_start:char_end] == text
    char_start: int
    char_end: int
    token_start: int  # the first token that ends inside the sentence
    token_end: int  # the first token that starts at or after char_end
    depth: float  # requested, 0..1
    actual_depth: float  # token_start / the context's token count


@dataclass(frozen=True)
class InsertedContext:
    """A context of exactly `n_tokens` tokens with sentences inserted; `spans` follow the order given."""

    context: str
    spans: tuple[Span, ...]
    n_tokens: int
    haystack_seed: int  # with the source and tokenizer, rebuilds the haystack


def check_target_tokens(target_tokens: object) -> None:
    """ConfigError unless `target_tokens` is a positive integer."""
    if isinstance(target_tokens, bool) or not isinstance(target_tokens, int) or target_tokens < 1:
        raise ConfigError(f"target_tokens: expected a positive integer, got {target_tokens!r}")


def check_depth(depth: object, where: str = "depth") -> None:
    """ConfigError unless `depth` is a number from 0 to 1."""
    if isinstance(depth, bool) or not isinstance(depth, int | float) or not 0.0 <= depth <= 1.0:
        raise ConfigError(f"{where}: expected a number from 0.0 to 1.0, got {depth!r}")


def insert_sentences(
    source: HaystackSource,
    tokenizer: Tokenizer,
    target_tokens: int,
    sentences: Sequence[tuple[str, float]],
    seed: int,
) -> InsertedContext:
    """Insert each (sentence, depth) at the sentence boundary nearest its depth; exactly `target_tokens` in all.

    Depths are fractions of the haystack (0 = start, 1 = end); sentences that land on the same boundary
    keep the order given. Deterministic in (source, tokenizer, target_tokens, sentences, seed).
    """
    check_target_tokens(target_tokens)
    if not sentences:
        raise ConfigError("sentences: expected at least one (sentence, depth) pair")
    for i, item in enumerate(sentences):
        if not (isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], str) and item[0].strip()):
            raise ConfigError(f"sentences[{i}]: expected a (non-empty sentence, depth) pair, got {item!r}")
        check_depth(item[1], f"sentences[{i}] depth")
    texts = [s for s, _ in sentences]
    inserted = sum(tokenizer.count(" " + s) for s in texts)
    minimum = inserted + MIN_HAYSTACK_TOKENS
    if target_tokens < minimum:
        raise DataError(
            f"target_tokens={target_tokens} is too small for the insertions: they take {inserted} tokens in "
            f"tokenizer {tokenizer.name!r} and at least {MIN_HAYSTACK_TOKENS} haystack tokens are required, "
            f"so the minimum is about {minimum}"
        )
    depths = [float(d) for _, d in sentences]

    def attempt(hay: Haystack) -> tuple[str, list[int], TokenOffsets]:
        return place(hay, texts, depths, target_tokens - inserted, target_tokens, tokenizer)

    context, starts, enc = with_retries(attempt, source, tokenizer, target_tokens, seed)
    spans = tuple(
        token_span(enc, text, start, depth, target_tokens)
        for text, start, depth in zip(texts, starts, depths, strict=True)
    )
    return InsertedContext(context, spans, target_tokens, seed)


def token_span(enc: TokenOffsets, text: str, start: int, depth: float, n_tokens: int) -> Span:
    """The Span of `text` inserted at char `start` of the context whose token offsets are `enc`."""
    tok_start = _after(enc.ends, start)  # the first token that ends inside the sentence
    return Span(
        text=text,
        char_start=start,
        char_end=start + len(text),
        token_start=tok_start,
        token_end=_before(enc.starts, start + len(text)),
        depth=float(depth),
        actual_depth=tok_start / n_tokens,
    )


def _sorted(a: np.ndarray) -> bool:
    return len(a) < 2 or bool((a[1:] >= a[:-1]).all())


def _after(a: np.ndarray, x: int) -> int:
    """`bisect_right(a, x)`: a binary search where `a` is sorted (offsets always are), else the list's bisect."""
    return int(np.searchsorted(a, x, side="right")) if _sorted(a) else bisect_right(a.tolist(), x)


def _before(a: np.ndarray, x: int) -> int:
    """`bisect_left(a, x)`, as `_after`."""
    return int(np.searchsorted(a, x, side="left")) if _sorted(a) else bisect_left(a.tolist(), x)


def place(
    hay: Haystack, texts: Sequence[str], depths: Sequence[float], hay_tokens: int, target: int, tokenizer: Tokenizer
) -> tuple[str, list[int], TokenOffsets]:
    """Insert `texts` at the boundaries nearest `depths` and cut the tail so the total is `target` tokens.

    Each text is joined by one space: after it at the very start of the haystack, before it elsewhere.
    Returns the context, each text's char start (in the order given) and the context's token offsets; raises
    NoExactCut (the caller retries with another haystack) when the tail cannot be cut exactly.
    """
    text, ends = hay.text, hay.token_ends
    candidates = [(bisect_right(ends, a), a) for a in sentence_ends(text, ends[hay_tokens - 1] + 1)]
    candidates = [(t, a) for t, a in candidates if t <= hay_tokens]

    def nearest(d: float) -> tuple[int, int]:  # the sentence end nearest depth d (ties: the earlier one)
        return min(candidates, key=lambda ta: (abs(ta[0] - d * hay_tokens), ta[1]))

    chosen = [nearest(d) for d in depths]
    order = sorted(range(len(texts)), key=lambda i: (chosen[i][1], i))
    head, prev, starts = "", 0, [0] * len(texts)
    for i in order:
        a = chosen[i][1]
        head += text[prev:a]
        prev = a
        if a == 0:
            starts[i] = len(head)
            head += texts[i] + " "
        else:
            starts[i] = len(head) + 1
            head += " " + texts[i]
    t, a = chosen[order[-1]]
    lo = 1 if a == 0 else t

    def build(k: int) -> str:
        return head + text[a : max(a, ends[k - 1])]

    context, enc = fit_length(build, hay_tokens, lo, len(ends), target, tokenizer, offsets=True)
    assert enc is not None  # asked for offsets
    return context, starts, enc
