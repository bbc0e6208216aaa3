"""The cross-paragraph grid (length x repetition x distance x hops x placement), its prompt and scoring rule:
one generator for the `cross_paragraph` task and its dataset builder, so both produce the same samples."""

from __future__ import annotations

import random
import re
from collections.abc import Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from data_builders.cross_paragraph.docs import FactDoc, build_fact_pair
from data_builders.cross_paragraph.facts import MAX_HOPS, FactChain, check_hops, invented_words, make_chain
from data_builders.haystack.assembly import HaystackSource, haystack_text
from data_builders.haystack.cluster import haystack_cluster
from data_builders.haystack.prompt_budget import PROMPT_RESERVE, context_tokens
from data_builders.haystack.sharing import by_haystack, spread_haystack
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.hashing import sha256_json
from longctx_eval.sample import RetrievalParams, Sample
from longctx_eval.sample_plan import Planned
from longctx_eval.text.tokenizer import Tokenizer

PROMPT_TEMPLATE = "Read the following text and answer the question after it.\n\n{context}\n\nQuestion: {question}"
"""The generation prompt (one user turn); the reply then starts with the row's `answer_prefix`."""
MAX_NEW_TOKENS = 16
RETRIEVAL = RetrievalParams(chunk_tokens=128, chunk_overlap=16, k=10)
RECALL_KS = (1, 3, 5, 10)
RETRIEVAL_PRIMARY_K = 5
DISTANCE_LADDER = tuple(128 * 2**k for k in range(14))
"""Target tokens between consecutive facts: 128, 256, 512, ... 1M; the same buckets at every length."""
MIN_CONTEXT = 256
"""The shortest context the grid builds (its distance ladder starts at 128 tokens between facts)."""
FIT_SHARE = 0.75
"""A distance is used at a length when the longest chain's facts, that far apart, span at most this share of
the context: (max hops - 1) x distance <= FIT_SHARE x context tokens (so the chain's start can still vary)."""
DEFAULT_HOPS = (2, 3, 4)
PLACEMENT_ORDER = ("cross", "same")
_INT_LIST = re.compile(r"^\s*\d+(\s*,\s*\d+)*\s*$")


def int_list(text: str, name: str) -> tuple[int, ...]:
    """ "2,3,4" -> (2, 3, 4); ConfigError naming the argument otherwise (empty text -> ())."""
    if not text.strip():
        return ()
    if not _INT_LIST.match(text):
        raise ConfigError(f"{name}: expected comma-separated integers such as 2,3,4, got {text!r}")
    values = tuple(int(v) for v in text.split(","))
    if len(set(values)) != len(values):
        raise ConfigError(f"{name}: {text!r} repeats a value; expected each once")
    return values


def distances_for(
    length: int, max_hops: int, reserve: int = PROMPT_RESERVE, ladder: Sequence[int] = DISTANCE_LADDER
) -> list[int]:
    """The ladder's distances whose longest chain fits a length (see FIT_SHARE), smallest first."""
    budget = FIT_SHARE * context_tokens(length, reserve, MIN_CONTEXT)
    return [d for d in sorted(ladder) if (max_hops - 1) * d <= budget]


def haystack_seed(seed: int, length: int, rep: int) -> int:
    """One haystack per (seed, length, repetition): every pair of that repetition shares it (with `haystacks` =
    h > 0, `rep` is the haystack's index 0..h-1, `sharing.spread_haystack`)."""
    return int(sha256_json(["cross-paragraph-haystack", seed, length, rep])[:8], 16)


def pair_id(length: int, hops: int, distance: int, rep: int) -> str:
    """The id shared by a cross sample and its same-paragraph control, e.g. "L4096-h3-D512-r0"."""
    return f"L{length}-h{hops}-D{distance}-r{rep}"


def stratum(hop_index: int, distance_index: int, n_hops: int, placement: str) -> int:
    """What `--limit` spreads over within a length (an order, not a label).

    Cross cells come first, by distance, with the hop counts rotated from one distance to the next (so evenly
    spaced picks cover every hop count and distance), then the same-paragraph controls in the reverse order:
    `--limit` picks strata evenly spaced from both ends, so a cross cell is picked with its control.
    """
    key = distance_index * n_hops + (hop_index - distance_index) % n_hops
    return key if placement == "cross" else 10**6 - key


_WORD = re.compile(r"[a-z]+")


def _chain_for(rng: random.Random, hops: int, haystack_words: set[str]) -> FactChain:
    """A checked chain none of whose invented names occurs in the haystack (redrawn from `rng` until so)."""
    for _ in range(50):
        try:
            chain = make_chain(rng, hops)
        except DataError:  # names that overlap (check_unambiguous): draw again
            continue
        if not invented_words(chain) & haystack_words:
            return chain
    raise DataError("cross_paragraph: 50 drawn chains all overlap or name a word of the haystack")  # pragma: no cover


@dataclass(frozen=True)
class CrossCell:
    """One sample of the grid: its place (length, hops, distance, repetition, placement), chain and document."""

    length: int
    hops: int
    distance: int
    rep: int
    seed: int
    stratum: int  # see `stratum`
    chain: FactChain
    doc: FactDoc

    @property
    def id(self) -> str:
        return f"{pair_id(self.length, self.hops, self.distance, self.rep)}-{self.doc.placement}"

    def row(self) -> dict[str, Any]:
        """The flat dataset row of this cell (see ROW_FIELDS in the builder); `row_sample` reads it back."""
        c, d = self.chain, self.doc
        same = d.placement == "same"
        return {
            "id": self.id,
            "pair": pair_id(self.length, self.hops, self.distance, self.rep),
            "context": d.context,
            "question": c.question,
            "person": c.person,
            "answer_prefix": c.answer_prefix,
            "answers": [c.answer],
            "intermediates": list(c.intermediates),
            "distractor_answers": list(c.distractor_answers),
            "distractor_entities": list(c.distractor_entities),
            "facts": [s.text for s in d.facts],
            "fact_starts": [s.char_start for s in d.facts],
            "fact_ends": [s.char_end for s in d.facts],
            "fact_token_starts": [s.token_start for s in d.facts],
            "fact_token_ends": [s.token_end for s in d.facts],
            "fact_depths": [round(s.actual_depth, 4) for s in d.facts],
            "fact_paragraphs": list(d.paragraphs),
            "distractors": [s.text for s in d.distractors],
            "distractor_starts": [s.char_start for s in d.distractors],
            "distractor_ends": [s.char_end for s in d.distractors],
            "gaps": list(d.gaps),
            "first_to_last": d.first_to_last,
            "hops": self.hops,
            "placement": d.placement,
            "distance_bucket": 0 if same else self.distance,
            "target_distance": self.distance,
            "family": c.family,
            "target_tokens": self.length,
            "context_tokens": d.n_tokens,
            "rep": self.rep,
            "seed": self.seed,
            "haystack_seed": d.haystack_seed,
            "stratum": self.stratum,
        }

    def sample(self, **metadata: Any) -> Sample:
        """The task's Sample of this cell (extra `metadata`, e.g. source, merged in)."""
        return row_sample(self.row(), **metadata)


def row_sample(row: Mapping[str, Any], **metadata: Any) -> Sample:
    """The task's Sample from one dataset row: gold answers and fact spans, metadata for the slices."""
    facts = [[s, e] for s, e in zip(row["fact_starts"], row["fact_ends"], strict=True)]
    tokens = [[s, e] for s, e in zip(row["fact_token_starts"], row["fact_token_ends"], strict=True)]
    distractors = [[s, e] for s, e in zip(row["distractor_starts"], row["distractor_ends"], strict=True)]
    return Sample(
        id=row["id"],
        context=row["context"],
        question=row["question"],
        gold={
            "answers": list(row["answers"]),
            "person": row["person"],
            "facts": facts,
            "fact_tokens": tokens,
            "fact_sentences": list(row["facts"]),
            "distractor_spans": distractors,
            "intermediates": list(row["intermediates"]),
            "distractor_answers": list(row["distractor_answers"]),
            "distractor_entities": list(row["distractor_entities"]),
        },
        metadata={
            "target_tokens": row["target_tokens"],
            "context_tokens": row["context_tokens"],
            "hops": row["hops"],
            "placement": row["placement"],
            "distance_bucket": row["distance_bucket"],
            "target_distance": row["target_distance"],
            "gaps": list(row["gaps"]),
            "first_to_last": row["first_to_last"],
            "fact_depths": list(row["fact_depths"]),
            "fact_paragraphs": list(row["fact_paragraphs"]),
            "first_depth": row["fact_depths"][0],
            "family": row["family"],
            "pair": row["pair"],
            "stratum": row["stratum"],
            "answer_prefix": row["answer_prefix"],
            "rep": row["rep"],
            "seed": row["seed"],
            "haystack_seed": row["haystack_seed"],
            "cluster": haystack_cluster(row["haystack_seed"]),
            **metadata,
        },
    )


def cross_cells(
    source: HaystackSource,
    tokenizer: Tokenizer,
    lengths: Sequence[int],
    hops: Sequence[int] = DEFAULT_HOPS,
    per_cell: int = 1,
    seed: int = 0,
    reserve: int = PROMPT_RESERVE,
    ladder: Sequence[int] = DISTANCE_LADDER,
    haystacks: int = 0,
    only: Container[str] | None = None,
) -> Iterator[CrossCell]:
    """Every cell, ordered by length, repetition, distance, hops, then placement (cross before its control).

    Every pair of one (length, repetition) shares one haystack; with `haystacks` = h > 0 a length's pairs spread
    over h haystacks instead (`sharing.spread_haystack`: a pair's two placements always share one), built one
    haystack at a time and yielded in this order. The pair's chain, the first fact's place and the distractors'
    depths come from a generator seeded by (seed, length, repetition, distance, hops).
    `only`: just the cells of these sample ids (a pair is built whole when either of its cells is asked for;
    a haystack only when one of its pairs is), each the same as built with the whole grid.
    """
    words: dict[tuple[int, int], set[str]] = {}  # the words of the haystack being built

    def build(p: _Pair) -> Iterator[CrossCell]:
        nonlocal words
        wanted = [placement for placement in PLACEMENT_ORDER if only is None or p.id(placement) in only]
        hseed = haystack_seed(seed, p.length, p.hay)
        if (p.length, p.hay) not in words:
            words = {
                (p.length, p.hay): set(_WORD.findall(haystack_text(source, tokenizer, p.context, hseed).text.lower()))
            }
        rng = random.Random(sha256_json(["cross-paragraph", seed, p.length, p.rep, p.distance, p.hops]))
        chain = _chain_for(rng, p.hops, words[p.length, p.hay])
        start = rng.random()
        depths = [rng.random() for _ in chain.distractors]
        docs = build_fact_pair(
            source,
            tokenizer,
            p.context,
            [f.sentence for f in chain.facts],
            [f.sentence for f in chain.distractors],
            p.distance,
            start,
            depths,
            hseed,
        )
        for placement in wanted:
            yield CrossCell(p.length, p.hops, p.distance, p.rep, seed, p.stratum(placement), chain, docs[placement])

    for length in lengths:
        pairs = [
            p
            for p in _pairs([length], hops, per_cell, reserve, ladder, haystacks)
            if only is None or any(p.id(placement) in only for placement in PLACEMENT_ORDER)
        ]
        yield from by_haystack(pairs, lambda p: p.hay, build)


def cross_plan(
    lengths: Sequence[int],
    hops: Sequence[int] = DEFAULT_HOPS,
    per_cell: int = 1,
    seed: int = 0,
    reserve: int = PROMPT_RESERVE,
    ladder: Sequence[int] = DISTANCE_LADDER,
    haystacks: int = 0,
) -> Iterator[Planned]:
    """The ids and strata of `cross_cells` in its order, nothing built (a limit chooses among them first)."""
    for p in _pairs(lengths, hops, per_cell, reserve, ladder, haystacks):
        cluster = haystack_cluster(haystack_seed(seed, p.length, p.hay))
        for placement in PLACEMENT_ORDER:
            meta = {"target_tokens": p.length, "stratum": p.stratum(placement), "cluster": cluster}
            yield Planned(p.id(placement), meta)


@dataclass(frozen=True)
class _Pair:
    """One (length, repetition, distance, hops) place of the grid: a chain asked cross and same paragraph."""

    length: int
    context: int  # the context's tokens
    rep: int
    distance: int
    d_index: int
    hops: int
    h_index: int
    n_hops: int
    hay: int  # the haystack's index: the repetition, or with `haystacks` its `spread_haystack`

    def id(self, placement: str) -> str:
        return f"{pair_id(self.length, self.hops, self.distance, self.rep)}-{placement}"

    def stratum(self, placement: str) -> int:
        return stratum(self.h_index, self.d_index, self.n_hops, placement)


def _pairs(
    lengths: Sequence[int], hops: Sequence[int], per_cell: int, reserve: int, ladder: Sequence[int], haystacks: int = 0
) -> Iterator[_Pair]:
    """The grid's pairs in order: length, repetition, distance, hops (the arguments checked first); pair j of a
    repetition reads haystack `spread_haystack(j, rep, pairs a repetition, per_cell, haystacks)`."""
    for length, n, distances in _lengths_distances(lengths, hops, per_cell, reserve, ladder):
        for rep in range(per_cell):
            for d_index, distance in enumerate(distances):
                for h_index, h in enumerate(sorted(hops)):
                    hay = spread_haystack(
                        d_index * len(hops) + h_index, rep, len(distances) * len(hops), per_cell, haystacks
                    )
                    yield _Pair(length, n, rep, distance, d_index, h, h_index, len(hops), hay)


def _lengths_distances(
    lengths: Sequence[int], hops: Sequence[int], per_cell: int, reserve: int, ladder: Sequence[int]
) -> Iterator[tuple[int, int, list[int]]]:
    """(length, context tokens, distances) per length, the grid's arguments checked first."""
    if not hops:
        raise ConfigError("hops: expected at least one hop count from 2 to 4")
    for h in hops:
        check_hops(h)
    if isinstance(per_cell, bool) or not isinstance(per_cell, int) or per_cell < 1:
        raise ConfigError(f"per_cell: expected a positive integer, got {per_cell!r}")
    for length in lengths:
        n = context_tokens(length, reserve, MIN_CONTEXT)
        distances = distances_for(length, max(hops), reserve, ladder)
        if not distances:
            raise ConfigError(
                f"length {length}: no distance of {sorted(ladder)[:3]}... fits {max(hops)} hops in a "
                f"{n}-token context; expected a longer length (or smaller distances, fewer hops)"
            )
        yield length, n, list(distances)


def grid_size(lengths: Sequence[int], hops: Sequence[int], per_cell: int, reserve: int = PROMPT_RESERVE) -> int:
    """How many samples `cross_cells` yields (for a progress bar)."""
    top = max(hops) if hops else MAX_HOPS
    return sum(len(distances_for(n, top, reserve)) for n in lengths) * len(hops) * len(PLACEMENT_ORDER) * per_cell


SCORING = f"""\
- **Generation**: the model's reply continues `answer_prefix` (greedy decoding, at most {MAX_NEW_TOKENS} new
  tokens). `score` is normalized containment of the final answer: reply and gold are normalized (Unicode NFKC,
  casefolded, ASCII punctuation and `‘ ’ “ ” – —` to spaces, whitespace collapsed, trimmed) and the reply
  scores 1 when `" " + normalize(gold) + " "` occurs in `" " + normalize(reply) + " "`. `exact` is 1 when the
  parsed answer (the reply's first line up to its first `.` `!` `?` `;` `,` or `:` before a space, normalized,
  a leading "the" dropped) equals the normalized gold. `empty`: nothing left after normalization.
  `intermediate`: the reply names an entity between the person and the answer (`intermediates`) but not the
  answer. `distractor`: it names an entity of the distractor facts (`distractor_entities`) but not the answer.
- **Retrieval**: the retriever ranks chunks of the context ({RETRIEVAL.chunk_tokens} tokens,
  {RETRIEVAL.chunk_overlap} shared, top {RETRIEVAL.k}) with the question as query. A fact is covered at k when
  one of the top-k chunks contains its whole char span `[fact_starts[i], fact_ends[i])`. `all_facts@k` is 1
  when every fact of the chain is covered at k, `fact_recall@k` is the share covered (k =
  {", ".join(map(str, RECALL_KS))}); `all_facts@{RETRIEVAL_PRIMARY_K}` is the headline.
- Metrics are means over samples per length, per hop count, per distance bucket and per placement; the
  `cross_paragraph_drop` contrast is `score` on `same` samples minus `score` on `cross` samples.
"""
"""The scoring rule in words, for the dataset card."""
