"""Multi-key needles: the target needle plus distractor needles of the same template with similar keys.

Distractor keys share the target's qualifier or noun ("the Bergmann archive" among "the Bergmann ledger",
"the Corvath archive", ...), so finding the right value needs the whole key; one generator for the
`needle_multikey` task and its dataset builder.
"""

from __future__ import annotations

import random
from collections.abc import Container, Iterator, Sequence

from data_builders.haystack.assembly import HaystackSource
from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from data_builders.needle.family import (
    FamilyCell,
    NeedleSpec,
    QuestionSpec,
    build_cell,
    distinct_values,
    grid_cells,
    variant_rng,
)
from data_builders.needle.grid import answer_budget, sample_id, value_kind_of
from data_builders.needle.insertion import KEY_NOUNS, KEY_QUALIFIERS, MAGIC_TEMPLATES
from longctx_eval.text.tokenizer import Tokenizer

DISTRACTORS = 3


def similar_keys(rng: random.Random) -> list[str]:
    """The target key first, then DISTRACTORS keys: one shares its qualifier, one its noun, one neither."""
    qual, noun = rng.choice(KEY_QUALIFIERS), rng.choice(KEY_NOUNS)
    other_quals = rng.sample([q for q in KEY_QUALIFIERS if q != qual], 2)
    other_nouns = rng.sample([n for n in KEY_NOUNS if n != noun], 2)
    return [
        f"the {qual} {noun}",
        f"the {qual} {other_nouns[0]}",
        f"the {other_quals[0]} {noun}",
        f"the {other_quals[1]} {other_nouns[1]}",
    ]


def multikey_cells(
    source: HaystackSource,
    tokenizer: Tokenizer,
    lengths: Sequence[int],
    depths: int,
    per_cell: int,
    seed: int,
    reserve: int = PROMPT_RESERVE,
    haystacks: int = 0,
    only: Container[str] | None = None,
) -> Iterator[FamilyCell]:
    """The needle grid (length x repetition x depth of the target); distractors at uniform random depths.
    `haystacks`, `only`: as `needle_cells` (keys, values and depths do not depend on `haystacks`)."""

    def make(length: int, rep: int, i: int, depth: float, hay: int) -> FamilyCell:
        rng = variant_rng("multikey", seed, length, depth, rep)
        kind = value_kind_of(i, rep)
        template = MAGIC_TEMPLATES[kind]
        keys = similar_keys(rng)
        values = distinct_values(rng, kind, len(keys))
        where = [depth, *(round(rng.random(), 4) for _ in range(DISTRACTORS))]
        needles = [
            NeedleSpec(template.needle.format(key=k, value=v), d, k, v, "target" if j == 0 else "distractor")
            for j, (k, v, d) in enumerate(zip(keys, values, where, strict=True))
        ]
        question = QuestionSpec(
            template.question.format(key=keys[0]),
            template.answer_prefix.format(key=keys[0]),
            (values[0],),
            (0,),
            answer_budget(tokenizer, [values[0]]),
        )
        return build_cell(
            id=sample_id(length, depth, rep),
            source=source,
            tokenizer=tokenizer,
            length=length,
            rep=rep,
            seed=seed,
            depth=depth,
            value_kind=kind,
            needles=needles,
            questions=[question],
            hay_index=hay,
            reserve=reserve,
        )

    return grid_cells(lengths, depths, per_cell, haystacks, only, make)
