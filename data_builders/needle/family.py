"""The needle-family sample layout: several needles at exact spans of one haystack, one or more questions.

Every variant generator (multikey, multivalue, multiquery, lowlex) yields `FamilyCell`s; a cell's `fields()`
are the dataset row (without its context) and `family_sample(fields, context)` turns a row back into the
task's `Sample`, so the task and its dataset builder produce the same samples by construction.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from data_builders.haystack.assembly import HaystackSource
from data_builders.haystack.cluster import haystack_cluster
from data_builders.haystack.prompt_budget import PROMPT_RESERVE, context_tokens
from data_builders.haystack.sharing import by_haystack, spread_haystack
from data_builders.haystack.span_insertion import insert_sentences
from data_builders.needle.grid import depth_grid, haystack_seed, sample_id
from data_builders.needle.insertion import KEY_NOUNS, KEY_QUALIFIERS, make_value
from data_builders.needle.lexical_overlap import Overlap, mean_overlap, measure_overlaps
from longctx_eval.errors import DataError
from longctx_eval.hashing import sha256_json
from longctx_eval.sample import Sample
from longctx_eval.text.tokenizer import Tokenizer


@dataclass(frozen=True)
class NeedleSpec:
    """A needle to insert: its sentence, where, and what it says (key, value) in which role."""

    text: str
    depth: float
    key: str
    value: str
    role: str  # "target", "distractor", "value" (multivalue) or "query" (multiquery)


@dataclass(frozen=True)
class QuestionSpec:
    """A question asked about the document: its answer prefix, gold values, the needles holding them, budget."""

    question: str
    answer_prefix: str
    answers: tuple[str, ...]
    needles: tuple[int, ...]  # indices into the cell's needles, in `answers` order
    max_new_tokens: int


@dataclass(frozen=True)
class FamilyCell:
    """One sample of a needle variant, built: the context and every needle's exact char and token span."""

    id: str
    length: int  # the whole prompt budget (target_tokens)
    rep: int
    seed: int
    depth: float | None  # the grid depth of the target needle; None where needles sit in every quarter
    value_kind: str
    context: str
    haystack_seed: int
    needles: tuple[dict[str, Any], ...]  # text, key, value, role, depth, actual_depth, start, end, token_*
    questions: tuple[dict[str, Any], ...]  # question, answer_prefix, answers, needles, max_new_tokens, overlap_*
    overlap: Overlap  # the sample's overlap: its questions' mean
    context_tokens: int  # the context's exact length: length - reserve

    def fields(self) -> dict[str, Any]:
        """The dataset row of this cell, without its context (see needle_variant_builder)."""
        return {
            "id": self.id,
            "questions": [dict(q) for q in self.questions],
            "needles": [dict(n) for n in self.needles],
            "value_kind": self.value_kind,
            "target_tokens": self.length,
            "context_tokens": self.context_tokens,
            "depth": self.depth,
            "rep": self.rep,
            "seed": self.seed,
            "haystack_seed": self.haystack_seed,
            **self.overlap.metadata(),
        }

    def sample(self, **metadata: Any) -> Sample:
        """The task's Sample of this cell (extra `metadata`, e.g. source, merged in)."""
        return family_sample(self.fields(), self.context, **metadata)


def variant_rng(variant: str, seed: int, length: int, where: float, rep: int) -> random.Random:
    """The generator of one cell of a variant: keys, values, needle depths."""
    return random.Random(sha256_json([variant, seed, length, where, rep]))


def grid_points(lengths: Sequence[int], depths: int, per_cell: int) -> Iterator[tuple[int, int, int, float]]:
    """(length, rep, depth index, depth) in the needle grid's order: length, then repetition, then depth."""
    grid = depth_grid(depths)
    return ((n, r, i, d) for n in lengths for r in range(per_cell) for i, d in enumerate(grid))


def grid_cells(
    lengths: Sequence[int],
    depths: int,
    per_cell: int,
    haystacks: int,
    only: Container[str] | None,
    make: Callable[[int, int, int, float, int], FamilyCell],
) -> Iterator[FamilyCell]:
    """`make(length, rep, depth index, depth, haystack index)` for each point of the needle grid in `only` (all
    when None), in `grid_points` order, one haystack at a time (`sharing.spread_haystack` with `haystacks`)."""

    def hay(p: tuple[int, int, int, float]) -> int:
        return spread_haystack(p[2], p[1], depths, per_cell, haystacks)

    for length in lengths:
        points = [
            p for p in grid_points([length], depths, per_cell) if only is None or sample_id(length, p[3], p[1]) in only
        ]
        yield from by_haystack(points, hay, lambda p: [make(*p, hay(p))])


def per_length_cells(
    lengths: Sequence[int],
    per_length: int,
    tag: str,
    haystacks: int,
    only: Container[str] | None,
    make: Callable[[int, int, int], FamilyCell],
) -> Iterator[FamilyCell]:
    """`make(length, index, haystack index)` for each of `per_length` samples a length in `only` (all when None),
    in index order, one haystack at a time: sample i reads haystack i, or with `haystacks` = h > 0 haystack i % h."""

    def hay(i: int) -> int:
        return i % haystacks if haystacks > 0 else i

    for length in lengths:
        points = [(length, i) for i in range(per_length) if only is None or per_length_id(length, tag, i) in only]
        yield from by_haystack(points, lambda p: hay(p[1]), lambda p: [make(p[0], p[1], hay(p[1]))])


def per_length_id(length: int, tag: str, index: int) -> str:
    """The id of sample `index` of one length in a grid without depths, e.g. "L4096-q2" (tag "q")."""
    return f"L{length}-{tag}{index}"


def distinct_values(rng: random.Random, kind: str, n: int) -> list[str]:
    """`n` different random values of one kind."""
    out: list[str] = []
    while len(out) < n:
        value = make_value(rng, kind)
        if value not in out:
            out.append(value)
    return out


def distinct_keys(rng: random.Random, n: int) -> list[str]:
    """`n` keys such as "the Bergmann archive", no two sharing a qualifier or a noun."""
    quals = rng.sample(KEY_QUALIFIERS, n)
    nouns = rng.sample(KEY_NOUNS, n)
    return [f"the {q} {k}" for q, k in zip(quals, nouns, strict=True)]


def quarter_depths(rng: random.Random, n: int = 4) -> list[float]:
    """One depth in each of `n` equal slices of the document, uniform within it (rounded to 4 decimals)."""
    return [round((j + rng.random()) / n, 4) for j in range(n)]


def build_cell(
    *,
    id: str,
    source: HaystackSource,
    tokenizer: Tokenizer,
    length: int,
    rep: int,
    seed: int,
    depth: float | None,
    value_kind: str,
    needles: Sequence[NeedleSpec],
    questions: Sequence[QuestionSpec],
    hay_index: int,
    reserve: int = PROMPT_RESERVE,
) -> FamilyCell:
    """Insert `needles` into the haystack of (seed, length, hay_index) and measure each question's overlap.

    `length` is the whole prompt budget: the context is exactly `length - reserve` tokens (`prompt_budget`)."""
    hseed = haystack_seed(seed, length, hay_index)
    n_context = context_tokens(length, reserve)
    try:
        doc = insert_sentences(source, tokenizer, n_context, [(n.text, n.depth) for n in needles], seed=hseed)
    except DataError as exc:
        raise DataError(
            f"length {length} (a {n_context}-token context after the {reserve}-token reserve): {exc}"
        ) from None
    placed: tuple[dict[str, Any], ...] = tuple(
        {
            "text": n.text,
            "key": n.key,
            "value": n.value,
            "role": n.role,
            "depth": float(n.depth),
            "actual_depth": round(s.actual_depth, 4),
            "start": s.char_start,
            "end": s.char_end,
            "token_start": s.token_start,
            "token_end": s.token_end,
        }
        for n, s in zip(needles, doc.spans, strict=True)
    )
    all_spans = [(p["start"], p["end"]) for p in placed]
    pairs = [(q.question, all_spans[i]) for q in questions for i in q.needles]
    measured = measure_overlaps([p[0] for p in pairs], doc.context, [p[1] for p in pairs], all_spans)
    asked: list[dict[str, Any]] = []
    at = 0
    for q in questions:
        own = mean_overlap(measured[at : at + len(q.needles)])
        at += len(q.needles)
        asked.append(
            {
                "question": q.question,
                "answer_prefix": q.answer_prefix,
                "answers": list(q.answers),
                "needles": list(q.needles),
                "max_new_tokens": q.max_new_tokens,
                "overlap_bm25": own.bm25,
                "overlap_cosine": own.cosine,
            }
        )
    overlap = mean_overlap([Overlap(a["overlap_bm25"], a["overlap_cosine"]) for a in asked])
    return FamilyCell(
        id, length, rep, seed, depth, value_kind, doc.context, hseed, placed, tuple(asked), overlap, n_context
    )


def family_sample(fields: Mapping[str, Any], context: str, **metadata: Any) -> Sample:
    """A needle-family Sample from a row's fields and its context (checked: every needle at its span).

    gold: `answers` (every value asked, in order), `spans` (their needles' char spans), `parts` (one per
    request: question, answer_prefix, max_new_tokens, answers, spans), `needles` (every inserted needle),
    `distractors` (values of distractor needles); single-answer samples also carry `span`.
    """
    needles = [dict(n) for n in fields["needles"]]
    for n in needles:
        if context[n["start"] : n["end"]] != n["text"]:
            raise DataError(
                f"needle sample {fields['id']!r}: needle {n['text']!r} is not at [{n['start']}, {n['end']}) "
                "of the context; the row and its document do not match"
            )
    spans = [[n["start"], n["end"]] for n in needles]
    parts = [
        {
            "question": q["question"],
            "answer_prefix": q["answer_prefix"],
            "max_new_tokens": q["max_new_tokens"],
            "answers": list(q["answers"]),
            "spans": [spans[i] for i in q["needles"]],
        }
        for q in fields["questions"]
    ]
    answers = [a for p in parts for a in p["answers"]]
    gold: dict[str, Any] = {
        "answers": answers,
        "spans": [s for p in parts for s in p["spans"]],
        "parts": parts,
        "needles": needles,
        "distractors": [n["value"] for n in needles if n["role"] == "distractor"],
    }
    if len(answers) == 1:
        gold["span"] = gold["spans"][0]
    first = needles[fields["questions"][0]["needles"][0]]
    meta: dict[str, Any] = {"target_tokens": fields["target_tokens"], "context_tokens": fields["context_tokens"]}
    if fields["depth"] is not None:
        meta["depth"] = fields["depth"]
    else:
        meta["stratum"] = fields["value_kind"]  # --limit spreads over the value kinds
    meta.update(
        {
            "actual_depth": first["actual_depth"],
            "seed": fields["seed"],
            "value_kind": fields["value_kind"],
            "cluster": haystack_cluster(fields["haystack_seed"]),
            "overlap_bm25": fields["overlap_bm25"],
            "overlap_cosine": fields["overlap_cosine"],
            "overlap_bucket": fields["overlap_bucket"],
            **metadata,
        }
    )
    return Sample(
        id=fields["id"],
        context=context,
        question="\n".join(p["question"] for p in parts),
        gold=gold,
        metadata=meta,
    )
