"""Multi-value needles: one key with several values, one needle each in a different quarter of the document.

All values are asked at once ("What are all the special magic numbers for X ...?"); one generator for the
`needle_multivalue` task and its dataset builder.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Sequence

from data_builders.haystack.assembly import HaystackSource
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
from data_builders.needle.grid import NEW_TOKENS_MARGIN, VALUE_KIND_CYCLE
from data_builders.needle.insertion import MAGIC_TEMPLATES
from longctx_eval.text.tokenizer import Tokenizer

VALUES = 4
RESERVE = 320
"""This variant's prompt reserve: its reply lists four values (four UUIDs take about 150 of SmolLM2's tokens),
so the prompt around the context needs more than the family's PROMPT_RESERVE."""
PLURAL = {"number": "numbers", "word": "words", "uuid": "UUIDs"}


def all_values_question(key: str, kind: str) -> tuple[str, str]:
    """(question, answer prefix) asking for every value of `key`."""
    what = f"special magic {PLURAL[kind]} for {key} mentioned in the provided text"
    return f"What are all the {what}?", f"The {what} are"


def list_budget(tokenizer: Tokenizer, values: list[str]) -> int:
    """max_new_tokens for all values: room for them as a numbered list (":" then "\n1. v1", ...) plus the margin."""
    listed = ":" + "".join(f"\n{i}. {v}" for i, v in enumerate(values, 1))
    return tokenizer.count(listed) + NEW_TOKENS_MARGIN


def multivalue_cells(
    source: HaystackSource,
    tokenizer: Tokenizer,
    lengths: Sequence[int],
    per_length: int,
    seed: int,
    reserve: int = RESERVE,
    haystacks: int = 0,
    only: Container[str] | None = None,
) -> Iterator[FamilyCell]:
    """`per_length` samples per length; sample i has kind VALUE_KIND_CYCLE[i % 3] and the haystack of rep i, or
    with `haystacks` = h > 0 that of rep i % h (h haystacks shared by the samples: a dense retriever embeds each
    once; the samples' keys, values and depths are as without it; built one haystack at a time). `only`: just
    the cells of these sample ids (as `needle_cells`)."""

    def make(length: int, i: int, hay: int) -> FamilyCell:
        rng = variant_rng("multivalue", seed, length, i, 0)
        kind = VALUE_KIND_CYCLE[i % len(VALUE_KIND_CYCLE)]
        template = MAGIC_TEMPLATES[kind]
        (key,) = distinct_keys(rng, 1)
        values = distinct_values(rng, kind, VALUES)
        needles = [
            NeedleSpec(template.needle.format(key=key, value=v), d, key, v, "value")
            for v, d in zip(values, quarter_depths(rng, VALUES), strict=True)
        ]
        question, prefix = all_values_question(key, kind)
        budget = list_budget(tokenizer, values)
        return build_cell(
            id=per_length_id(length, "v", i),
            source=source,
            tokenizer=tokenizer,
            length=length,
            rep=i,
            seed=seed,
            depth=None,
            value_kind=kind,
            needles=needles,
            questions=[QuestionSpec(question, prefix, tuple(values), tuple(range(VALUES)), budget)],
            hay_index=hay,
            reserve=reserve,
        )

    return per_length_cells(lengths, per_length, "v", haystacks, only, make)
