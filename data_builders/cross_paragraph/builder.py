"""The `cross_paragraph` dataset builder (`longctx-eval build cross_paragraph`): the task's grid as parquet.

One config per length (`cross_paragraph_<length>`); every row carries its full context, the chain's fact
sentences with their exact char and token spans, the measured distances and the slice fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby

from datasets import Features, List, Value

from data_builders.cross_paragraph.grid import (
    DEFAULT_HOPS,
    DISTANCE_LADDER,
    PROMPT_TEMPLATE,
    SCORING,
    cross_cells,
    grid_size,
    int_list,
)
from data_builders.dataset.registry import BuildConfig, BuildContext, CardInfo, Part, builder
from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from longctx_eval.errors import ConfigError

CROSS_PARAGRAPH_VERSION = "1"

_int, _str, _float = Value("int64"), Value("string"), Value("float64")
ROW_FEATURES = Features(
    {
        "id": _str,
        "pair": _str,  # shared by a cross sample and its same-paragraph control
        "context": _str,
        "question": _str,
        "person": _str,  # the one entity the question names
        "answer_prefix": _str,  # the reply starts with this (rendered after the chat template's generation prompt)
        "answers": List(_str),
        "intermediates": List(_str),  # entities between the person and the answer
        "distractor_answers": List(_str),  # where following the look-alike person (or organisation) leads
        "distractor_entities": List(_str),  # every entity named only by distractor facts
        "facts": List(_str),  # the chain's sentences, in chain order
        "fact_starts": List(_int),  # half-open char spans: context[fact_starts[i]:fact_ends[i]] == facts[i]
        "fact_ends": List(_int),
        "fact_token_starts": List(_int),  # half-open token spans in the context's tokenization
        "fact_token_ends": List(_int),
        "fact_depths": List(_float),  # fact_token_starts[i] / context_tokens
        "fact_paragraphs": List(_int),  # index of each fact's blank-line separated paragraph
        "distractors": List(_str),
        "distractor_starts": List(_int),
        "distractor_ends": List(_int),
        "gaps": List(_int),  # tokens between consecutive facts, measured
        "first_to_last": _int,  # tokens between the first fact and the last, measured
        "hops": _int,
        "placement": _str,  # cross | same
        "distance_bucket": _int,  # the target distance; 0 for same
        "target_distance": _int,  # the pair's target distance (also on the same-paragraph control)
        "family": _str,  # work | study | train
        "target_tokens": _int,  # the length: context + prompt reserve
        "context_tokens": _int,  # the context is exactly this many tokens in the dataset's tokenizer
        "rep": _int,
        "seed": _int,
        "haystack_seed": _int,
        "stratum": _int,  # the order `--limit` spreads over (see cross_paragraph_grid.stratum)
    }
)

USAGE = """\
Each row of a `cross_paragraph_<length>` config is one question with its full `context`, exactly
`context_tokens` tokens (the length less a prompt reserve) in the tokenizer under Provenance. The model sees
the prompt template below as one user turn and its reply starts with `answer_prefix` (e.g. "Dalia Ferrow
works in the city of"; without a chat template, append it after a newline). The chain's facts are
`facts`, at `context[fact_starts[i]:fact_ends[i]]`, tokens `fact_token_starts[i]:fact_token_ends[i]`;
`gaps` and `first_to_last` are measured token distances. Rows come in pairs (`pair`): the `cross` row
puts each fact in its own paragraph about `target_distance` tokens after the previous one, the `same` row
puts them as adjacent sentences where the cross chain's first fact is; haystack and distractors are the
same in both.
"""


def _options(config: BuildConfig) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(hops, distance ladder, reserve) from the build's `--option`s."""
    o = config.options
    hops = int_list(o.get("hops", ""), "--option hops") or DEFAULT_HOPS
    ladder = int_list(o.get("distances", ""), "--option distances") or DISTANCE_LADDER
    try:
        reserve = int(o.get("reserve", str(PROMPT_RESERVE)))
    except ValueError:
        raise ConfigError(f"--option reserve={o['reserve']!r}: expected a number of tokens") from None
    return hops, ladder, reserve


def _total(config: BuildConfig) -> int:
    hops, _, reserve = _options(config)
    return grid_size(config.lengths, hops, config.per_cell, reserve)


@builder(
    "cross_paragraph",
    version=CROSS_PARAGRAPH_VERSION,
    features=ROW_FEATURES,
    description="Chains of 2-4 facts (invented entities) across paragraphs or in one, distance-controlled, "
    "with look-alike distractors; length x hops x distance x placement grid.",
    total=_total,
    options={
        "hops": "chain lengths, e.g. 2,3 (default 2,3,4)",
        "distances": "target tokens between consecutive facts, e.g. 256,1024 (default 128, 256, 512, ... as fits)",
        "reserve": f"tokens of each length left for the prompt around the context (default {PROMPT_RESERVE})",
    },
    card=CardInfo(
        tags=("long-context", "multi-hop", "question-answering", "retrieval"),
        task_categories=("question-answering",),
        usage=USAGE,
        prompt_template=PROMPT_TEMPLATE,
        scoring=SCORING,
    ),
)
def cross_paragraph_parts(ctx: BuildContext) -> Iterator[Part]:
    """One `cross_paragraph_<length>` part per length: the task's cells, in the task's order (--depths unused)."""
    cfg = ctx.config
    hops, ladder, reserve = _options(cfg)
    cells = cross_cells(ctx.source, ctx.tokenizer, cfg.lengths, hops, cfg.per_cell, cfg.seed, reserve, ladder)
    for length, of_length in groupby(cells, key=lambda c: c.length):
        rows = []
        for cell in of_length:
            rows.append(cell.row())
            ctx.advance(1)
        yield Part(f"cross_paragraph_{length}", rows)
