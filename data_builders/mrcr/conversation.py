"""One MRCR-style conversation: look-alike request groups and distractor requests, each answered with distinct
prose, filling a token budget; the look-alike turns sit at seeded random places among the distractors."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from data_builders.haystack.assembly import HaystackSource
from data_builders.mrcr.answers import Excerpts
from data_builders.mrcr.requests import Kind, distractor_kind, lookalike_kinds, request_text
from longctx_eval.errors import ConfigError
from longctx_eval.text.tokenizer import Tokenizer

TURN_SEP = "\n\n"
_FILL_TRIES = 64  # sentences tried for the last, shorter distractor answer that closes the budget


@dataclass(frozen=True)
class Turn:
    """One user request and the assistant's answer; `group` is its look-alike group, -1 for a distractor."""

    request: str
    answer: str
    group: int
    tokens: int  # of `text()`, measured

    def text(self) -> str:
        return f"User: {self.request}{TURN_SEP}Assistant: {self.answer}"


@dataclass(frozen=True)
class Conversation:
    """The turns in order, the kind of each look-alike group, the transcript's measured tokens."""

    kinds: tuple[Kind, ...]
    turns: tuple[Turn, ...]
    tokens: int
    sep_tokens: int

    def transcript(self) -> str:
        """The conversation as text: "User: ...\\n\\nAssistant: ..." turns separated by blank lines."""
        return TURN_SEP.join(t.text() for t in self.turns)

    def occurrences(self, group: int) -> list[int]:
        """Indices of the turns of a look-alike group, in conversation order (the 1st, 2nd, ... request)."""
        return [i for i, t in enumerate(self.turns) if t.group == group]

    def depth_of(self, turn: int) -> float:
        """Where a turn starts, as a share of the transcript's tokens (from the per-turn counts)."""
        before = sum(t.tokens + self.sep_tokens for t in self.turns[:turn])
        return min(1.0, before / max(1, self.tokens))


def build_conversation(
    source: HaystackSource,
    tokenizer: Tokenizer,
    budget: int,
    sizes: Sequence[int],
    seed: int,
    answer_tokens: int,
) -> Conversation:
    """A conversation of at most `budget` tokens with one look-alike group of each size in `sizes` (e.g. 2, 4, 8
    requests of one kind each) and as many distractor turns as fit; ConfigError when fewer distractor turns
    than half the look-alike turns would fit."""
    rng = random.Random(seed)
    kinds = lookalike_kinds(rng, len(sizes))
    excerpts = Excerpts(source, tokenizer, rng.getrandbits(32), answer_tokens)
    sep = tokenizer.count(TURN_SEP)
    used: set[str] = set()

    def turn(kind: Kind, group: int, limit: int | None = None, tries: int | None = None) -> Turn | None:
        request = request_text(kind)
        while True:
            got = excerpts.take(limit, tries)
            if got is None:
                return None
            if got[0] not in used:  # a source that ran out repeats text: never an answer twice
                used.add(got[0])
                t = Turn(request, got[0], group, 0)
                return Turn(request, got[0], group, tokenizer.count(t.text()))

    looks: list[Turn] = []
    for group, size in enumerate(sizes):
        for _ in range(size):
            t = turn(kinds[group], group)
            assert t is not None  # no limit, no tries: the stream always yields
            looks.append(t)
    remaining = budget - sum(t.tokens + sep for t in looks)
    distractors: list[Turn] = []
    while remaining > 0:
        kind = distractor_kind(rng, kinds)
        overhead = tokenizer.count(Turn(request_text(kind), "", -1, 0).text()) + sep + 1
        room = remaining - overhead
        t = turn(kind, -1) if room >= answer_tokens else turn(kind, -1, room, _FILL_TRIES)
        if t is None or t.tokens + sep > remaining:
            break
        distractors.append(t)
        remaining -= t.tokens + sep
    if 2 * len(distractors) < len(looks):
        cost = sum(t.tokens + sep for t in looks)
        raise ConfigError(
            f"a conversation of {budget} tokens holds {len(looks)} look-alike turns ({cost} tokens) but only "
            f"{len(distractors)} distractor turns; expected at least half as many distractors as look-alikes: give a "
            "longer length, fewer look-alikes (`needles`) or shorter answers (`answer_tokens`)"
        )
    n = len(looks) + len(distractors)
    places = set(rng.sample(range(n), len(looks)))
    rng.shuffle(looks)
    pending_looks, pending_distractors = iter(looks), iter(distractors)
    turns = [next(pending_looks) if i in places else next(pending_distractors) for i in range(n)]
    return _fit_measured(tuple(kinds), turns, tokenizer, budget, sep)


def _fit_measured(
    kinds: tuple[Kind, ...], turns: list[Turn], tokenizer: Tokenizer, budget: int, sep: int
) -> Conversation:
    """The conversation without its last k distractor turns (in conversation order), for the least k whose
    measured transcript fits `budget`. The per-turn counts undercount a joined transcript by about a token a turn,
    so k is found by galloping from the estimate and bisecting (a transcript's tokens fall as k grows): a few
    measurements of the whole text instead of one per dropped turn."""
    trailing = [i for i, t in enumerate(turns) if t.group < 0][::-1]  # distractor turns, last first
    measured: dict[int, int] = {}

    def tokens(k: int) -> int:
        if k not in measured:
            dropped = set(trailing[:k])
            conv = Conversation(kinds, tuple(t for i, t in enumerate(turns) if i not in dropped), 0, sep)
            measured[k] = tokenizer.count(conv.transcript())
        return measured[k]

    if tokens(0) > budget:
        over, k = 0, 0  # tokens(over) > budget
        excess = tokens(0) - budget
        while excess > 0 and k < len(trailing):  # the estimate: drop turns until their counts cover the excess
            excess -= turns[trailing[k]].tokens + sep
            k += 1
        step = 1
        while k < len(trailing) and tokens(k) > budget:  # gallop until it fits
            over, k, step = k, min(len(trailing), k + step), 2 * step
        if tokens(k) > budget:
            raise ConfigError(f"a conversation of {budget} tokens: no transcript of its look-alike turns fits it")
        fits = k
        while fits - over > 1:  # bisect to the least k that fits
            mid = (over + fits) // 2
            over, fits = (mid, fits) if tokens(mid) > budget else (over, mid)
        k = fits
    else:
        k = 0
    dropped = set(trailing[:k])
    kept = tuple(t for i, t in enumerate(turns) if i not in dropped)
    return Conversation(kinds, kept, tokens(k), sep)
