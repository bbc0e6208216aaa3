"""Fact placement for the cross-paragraph task: one haystack, two documents (facts apart or together).

`build_fact_pair` puts a chain's facts into an exact-length haystack twice: `cross` (each fact in another
paragraph, consecutive facts about `distance` tokens apart) and `same` (all facts as adjacent sentences of
one paragraph, where the cross chain's first fact is). Distractor facts sit at the same places in both, so
the two documents differ only in where the chain's later facts are. Distances are measured on the result.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace

from data_builders.haystack.assembly import PARAGRAPH_SEP, Haystack, HaystackSource, fit_length, with_retries
from data_builders.haystack.span_insertion import MIN_HAYSTACK_TOKENS, Span, check_depth, sentence_ends, token_span
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.pieces import TokenOffsets
from longctx_eval.text.tokenizer import Tokenizer

PLACEMENTS = ("cross", "same")
EDGE = 0.02
"""No fact within this share of the haystack's tokens from either end."""


@dataclass(frozen=True)
class Boundary:
    """A sentence end of the haystack: its char offset, the haystack tokens before it, its paragraph's index."""

    char: int
    token: int
    paragraph: int


@dataclass(frozen=True)
class FactDoc:
    """A context of exactly `n_tokens` tokens with a chain's facts (in chain order) and the distractors placed.

    `gaps[i]` counts the tokens strictly between fact i and fact i+1 (token_start of the next minus token_end
    of this one) and `first_to_last` those between the first and the last fact, all measured on `context`.
    `paragraphs[i]` is the index of fact i's paragraph (blank-line separated) in `context`.
    """

    placement: str
    context: str
    facts: tuple[Span, ...]
    distractors: tuple[Span, ...]
    gaps: tuple[int, ...]
    first_to_last: int
    paragraphs: tuple[int, ...]
    n_tokens: int
    haystack_seed: int


def paragraph_index(context: str, char: int) -> int:
    """Index of the blank-line separated paragraph holding `char` in `context`."""
    return context.count(PARAGRAPH_SEP, 0, char)


def boundaries(hay: Haystack, hay_tokens: int) -> list[Boundary]:
    """Every sentence end within the first `hay_tokens` tokens of the haystack, with its paragraph."""
    text, ends = hay.text, hay.token_ends
    out = []
    for a in sentence_ends(text, ends[hay_tokens - 1] + 1):
        t = bisect_right(ends, a)
        if t <= hay_tokens:
            para = 0 if a == 0 else bisect_right(hay.paragraph_starts, a - 1) - 1
            out.append(Boundary(a, t, para))
    return out


def _nearest(cands: Sequence[Boundary], token: float, taken: set[int], n: int = 1) -> list[Boundary]:
    """The `n` free boundaries nearest `token` (nearest first; ties: the earlier one)."""
    i = bisect_right([b.token for b in cands], token)
    out: list[Boundary] = []
    lo, hi = i - 1, i
    while len(out) < n and (lo >= 0 or hi < len(cands)):
        take_lo = hi >= len(cands) or (lo >= 0 and token - cands[lo].token <= cands[hi].token - token)
        b = cands[lo] if take_lo else cands[hi]
        lo, hi = (lo - 1, hi) if take_lo else (lo, hi + 1)
        if b.char not in taken:
            out.append(b)
    return out


FIRST_FACT_TRIES = 24
"""How many boundaries near the first fact's target are tried; the chain whose gaps best match wins. Where none
of them starts a chain (long paragraphs after the target), the next nearest are tried until one does."""
BRANCH = 3
"""For each later fact, how many boundaries (those whose gaps are nearest the distance) the search tries."""


class _Chainer:
    """Searches where a chain's later facts go: boundaries of later paragraphs whose gaps are nearest the distance."""

    def __init__(self, cands: Sequence[Boundary], placed: Sequence[tuple[Boundary, int]]) -> None:
        self.cands, self.placed = cands, placed
        self.tokens = [b.token for b in cands]
        self.paragraphs = [b.paragraph for b in cands]
        self.slack = sum(n for _, n in placed)

    def gap(self, prev: Boundary, b: Boundary) -> int:
        """Tokens between a fact at `prev` and one at `b`: haystack tokens plus distractors in between."""
        # A distractor at a fact's boundary follows the fact there: one at `prev` is between, one at `b` is not.
        return b.token - prev.token + sum(n for d, n in self.placed if prev.char <= d.char < b.char)

    def options(self, prev: Boundary, distance: int) -> list[Boundary]:
        """The BRANCH boundaries of later paragraphs whose gaps from `prev` are nearest `distance` (gaps
        grow with position, so only the boundaries around the crossing are looked at)."""
        first = bisect_right(self.paragraphs, prev.paragraph)
        j = max(first, bisect_right(self.tokens, prev.token + distance - self.slack) - BRANCH)
        seen: list[tuple[int, int, Boundary]] = []
        beyond = 0
        while j < len(self.cands) and beyond < BRANCH:
            b = self.cands[j]
            j += 1
            g = self.gap(prev, b)
            seen.append((abs(g - distance), b.char, b))
            beyond += g > distance
        return [b for _, _, b in sorted(seen)[:BRANCH]]

    def chain(self, first: Boundary, hops: int, distance: int) -> tuple[tuple[int, int], list[Boundary]] | None:
        """((largest, total) |gap - distance|, boundaries) of the best chain from `first` (a search over the
        BRANCH best boundaries for each later fact), or None when no chain fits."""
        if hops == 1:
            return (0, 0), [first]
        best = None
        for b in self.options(first, distance):
            rest = self.chain(b, hops - 1, distance)
            if rest is None:
                continue
            err = abs(self.gap(first, b) - distance)
            cost = (max(err, rest[0][0]), err + rest[0][1])
            if best is None or cost < best[0]:
                best = (cost, [first, *rest[1]])
        return best


def plan(
    cands: Sequence[Boundary],
    hay_tokens: int,
    chain_tokens: Sequence[int],
    distractor_tokens: Sequence[int],
    distance: int,
    start: float,
    distractor_depths: Sequence[float],
) -> tuple[list[Boundary], list[Boundary]]:
    """Boundaries for the cross chain (in order) and for each distractor.

    Distractors go first, at the boundaries nearest their depths (distinct); a fact may share a distractor's
    boundary (the fact comes first there), so distractors never crowd the chain out. The first fact goes near
    `start` (0..1) of the range where the whole chain fits, each later fact at a boundary of a later paragraph;
    of the chains from the FIRST_FACT_TRIES boundaries nearest that point, the one whose gaps (haystack tokens
    plus distractor tokens in between) are nearest `distance` (smallest largest error, then total) wins; if none
    of those starts a chain, the first that does among the boundaries next nearest.
    """
    margin = EDGE * hay_tokens
    cands = [b for b in cands if margin <= b.token <= hay_tokens - margin]
    if len(cands) < max(len(chain_tokens), len(distractor_tokens)):
        raise DataError(f"the haystack has only {len(cands)} sentence ends; expected one per distractor or more")
    taken: set[int] = set()
    placed: list[tuple[Boundary, int]] = []
    for depth, n in zip(distractor_depths, distractor_tokens, strict=True):
        b = _nearest(cands, margin + depth * (hay_tokens - 2 * margin), taken)[0]
        taken.add(b.char)
        placed.append((b, n))
    span = (len(chain_tokens) - 1) * distance + sum(chain_tokens[:-1])
    hi = max(margin, hay_tokens - margin - span)
    target = margin + start * (hi - margin)
    chainer = _Chainer(cands, placed)
    tried: list[tuple[tuple[int, int], int, list[Boundary]]] = []
    for rank, first in enumerate(_nearest(cands, target, set(), len(cands))):
        if rank >= FIRST_FACT_TRIES and tried:
            break  # beyond the first tries only while none fits: a chain that fitted there is never changed
        found = chainer.chain(first, len(chain_tokens), distance)
        if found is not None:
            tried.append((found[0], rank, found[1]))
    if not tried:
        raise DataError(
            f"no {len(chain_tokens)} sentence ends in successive paragraphs about {distance} tokens apart near "
            f"token {round(target)} of {hay_tokens}; expected a longer context or a shorter distance"
        )
    return min(tried, key=lambda t: t[:2])[2], [b for b, _ in placed]


def insert_at(
    hay: Haystack,
    items: Sequence[tuple[str, int]],
    hay_tokens: int,
    target: int,
    tokenizer: Tokenizer,
) -> tuple[str, list[int], TokenOffsets]:
    """Insert each (text, char) at that haystack boundary and cut the tail to exactly `target` tokens.

    Texts at one boundary keep the order given (adjacent sentences). Each is joined by one space: after it
    at the very start, before it elsewhere. Returns the context, each text's char start and its token offsets.
    """
    text, ends = hay.text, hay.token_ends
    order = sorted(range(len(items)), key=lambda i: (items[i][1], i))
    head, prev, starts = "", 0, [0] * len(items)
    for i in order:
        piece, a = items[i]
        head += text[prev:a]
        prev = a
        if a == 0:
            starts[i] = len(head)
            head += piece + " "
        else:
            starts[i] = len(head) + 1
            head += " " + piece
    a = items[order[-1]][1]
    lo = 1 if a == 0 else bisect_right(ends, a)

    def build(k: int) -> str:
        return head + text[a : max(a, ends[k - 1])]

    context, enc = fit_length(build, hay_tokens, lo, len(ends), target, tokenizer, offsets=True)
    assert enc is not None  # asked for offsets
    return context, starts, enc


def _doc(
    placement: str,
    hay: Haystack,
    facts: Sequence[str],
    fact_at: Sequence[int],
    distractors: Sequence[str],
    distractor_at: Sequence[int],
    hay_tokens: int,
    n_tokens: int,
    tokenizer: Tokenizer,
    seed: int,
) -> FactDoc:
    items = [*zip(facts, fact_at, strict=True), *zip(distractors, distractor_at, strict=True)]
    context, starts, enc = insert_at(hay, items, hay_tokens, n_tokens, tokenizer)
    # Placed by distance, not by a requested depth: a span's `depth` is its actual depth.
    spans = [token_span(enc, t, s, 0.0, n_tokens) for (t, _), s in zip(items, starts, strict=True)]
    spans = [replace(sp, depth=sp.actual_depth) for sp in spans]
    chain, others = tuple(spans[: len(facts)]), tuple(spans[len(facts) :])
    gaps = tuple(b.token_start - a.token_end for a, b in zip(chain, chain[1:], strict=False))
    return FactDoc(
        placement=placement,
        context=context,
        facts=chain,
        distractors=others,
        gaps=gaps,
        first_to_last=chain[-1].token_start - chain[0].token_end,
        paragraphs=tuple(paragraph_index(context, sp.char_start) for sp in chain),
        n_tokens=n_tokens,
        haystack_seed=seed,
    )


def build_fact_pair(
    source: HaystackSource,
    tokenizer: Tokenizer,
    n_tokens: int,
    facts: Sequence[str],
    distractors: Sequence[str],
    distance: int,
    start: float,
    distractor_depths: Sequence[float],
    seed: int,
) -> dict[str, FactDoc]:
    """The `cross` and `same` documents of one chain on the haystack `seed`, each exactly `n_tokens` long.

    `start` (0..1) places the first fact within the range where the cross chain fits; `distractor_depths`
    (0..1 each) place the distractors. Deterministic in all arguments.
    """
    if len(facts) < 2:
        raise ConfigError(f"facts: expected a chain of at least 2 facts, got {len(facts)}")
    if isinstance(distance, bool) or not isinstance(distance, int) or distance < 1:
        raise ConfigError(f"distance: expected a positive number of tokens, got {distance!r}")
    if len(distractor_depths) != len(distractors):
        raise ConfigError(f"distractor_depths: expected {len(distractors)} depths, got {len(distractor_depths)}")
    check_depth(start, "start")
    for d in distractor_depths:
        check_depth(d, "distractor depth")
    chain_tokens = [tokenizer.count(" " + s) for s in facts]
    other_tokens = [tokenizer.count(" " + s) for s in distractors]
    inserted = sum(chain_tokens) + sum(other_tokens)
    hay_tokens = n_tokens - inserted
    if hay_tokens < MIN_HAYSTACK_TOKENS:
        raise DataError(
            f"n_tokens={n_tokens} is too small for {len(facts) + len(distractors)} facts of {inserted} tokens "
            f"in tokenizer {tokenizer.name!r}; the minimum is about {inserted + MIN_HAYSTACK_TOKENS}"
        )

    def attempt(hay: Haystack) -> dict[str, FactDoc]:
        cands = boundaries(hay, hay_tokens)
        chain, others = plan(cands, hay_tokens, chain_tokens, other_tokens, distance, start, distractor_depths)
        at_others = [b.char for b in others]
        common = (distractors, at_others, hay_tokens, n_tokens, tokenizer, seed)
        return {
            "cross": _doc("cross", hay, facts, [b.char for b in chain], *common),
            "same": _doc("same", hay, facts, [chain[0].char] * len(facts), *common),
        }

    return with_retries(attempt, source, tokenizer, n_tokens, seed)
