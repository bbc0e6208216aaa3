"""Low-lexical-overlap needles: a curated needle whose question shares no content word with it.

"Yes, Avrielle lives right next to the Prado." answers "Which character has been to Madrid?": the model
must link them by association, not by matching words. One generator for the `needle_lowlex` task and its
dataset builder; the pairs are in `needle_lowlex_pairs`.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Sequence

from data_builders.haystack.assembly import HaystackSource
from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from data_builders.needle.family import FamilyCell, NeedleSpec, QuestionSpec, build_cell, grid_cells, variant_rng
from data_builders.needle.grid import answer_budget, sample_id
from data_builders.needle.lowlex_pairs import NAMES, PAIRS
from longctx_eval.text.tokenizer import Tokenizer


def lowlex_cells(
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
    """The needle grid (length x repetition x depth); each cell draws a pair and a name from its generator.
    `haystacks`, `only`: as `needle_cells` (the pair and name do not depend on `haystacks`)."""

    def make(length: int, rep: int, i: int, depth: float, hay: int) -> FamilyCell:
        rng = variant_rng("lowlex", seed, length, depth, rep)
        pair = rng.choice(PAIRS)
        name = rng.choice(NAMES)
        needle = NeedleSpec(pair.needle.format(name=name), depth, pair.predicate, name, "target")
        question = QuestionSpec(pair.question(), pair.answer_prefix(), (name,), (0,), answer_budget(tokenizer, [name]))
        return build_cell(
            id=sample_id(length, depth, rep),
            source=source,
            tokenizer=tokenizer,
            length=length,
            rep=rep,
            seed=seed,
            depth=depth,
            value_kind="name",
            needles=[needle],
            questions=[question],
            hay_index=hay,
            reserve=reserve,
        )

    return grid_cells(lengths, depths, per_cell, haystacks, only, make)
