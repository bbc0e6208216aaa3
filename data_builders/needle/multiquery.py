"""Multi-query needles: several needles with different keys in one document, each asked as its own request.

The requests share the document (and so a prompt prefix an adapter can cache); one generator for the
`needle_multiquery` task and its dataset builder.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Sequence

from data_builders.haystack.assembly import HaystackSource
from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from data_builders.needle.family import (
    FamilyCell,
    NeedleSpec,
    QuestionSpec,
    build_cell,
    distinct_keys,
    distinct_values,
    per_length_cells,
    per_length_id,
    quarter_depths,
    variant_rng,
)
from data_builders.needle.grid import VALUE_KIND_CYCLE, answer_budget
from data_builders.needle.insertion import MAGIC_TEMPLATES
from longctx_eval.text.tokenizer import Tokenizer

QUERIES = 4


def multiquery_cells(
    source: HaystackSource,
    tokenizer: Tokenizer,
    lengths: Sequence[int],
    per_length: int,
    seed: int,
    reserve: int = PROMPT_RESERVE,
    haystacks: int = 0,
    only: Container[str] | None = None,
) -> Iterator[FamilyCell]:
    """`per_length` samples per length; the questions come in a random order, not the needles' order. Sample i
    reads the haystack of rep i, or with `haystacks` = h > 0 that of rep i % h (as `multivalue_cells`).
    `only`: just the cells of these sample ids (as `needle_cells`)."""

    def make(length: int, i: int, hay: int) -> FamilyCell:
        rng = variant_rng("multiquery", seed, length, i, 0)
        kind = VALUE_KIND_CYCLE[i % len(VALUE_KIND_CYCLE)]
        template = MAGIC_TEMPLATES[kind]
        keys = distinct_keys(rng, QUERIES)
        values = distinct_values(rng, kind, QUERIES)
        needles = [
            NeedleSpec(template.needle.format(key=k, value=v), d, k, v, "query")
            for k, v, d in zip(keys, values, quarter_depths(rng, QUERIES), strict=True)
        ]
        order = list(range(QUERIES))
        rng.shuffle(order)
        questions = [
            QuestionSpec(
                template.question.format(key=keys[j]),
                template.answer_prefix.format(key=keys[j]),
                (values[j],),
                (j,),
                answer_budget(tokenizer, [values[j]]),
            )
            for j in order
        ]
        return build_cell(
            id=per_length_id(length, "q", i),
            source=source,
            tokenizer=tokenizer,
            length=length,
            rep=i,
            seed=seed,
            depth=None,
            value_kind=kind,
            needles=needles,
            questions=questions,
            hay_index=hay,
            reserve=reserve,
        )

    return per_length_cells(lengths, per_length, "q", haystacks, only, make)
