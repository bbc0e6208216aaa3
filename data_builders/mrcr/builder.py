"""The `mrcr` dataset builder (`longctx-eval build mrcr`): the task's conversations and questions as parquet.

One config per length (`mrcr_<length>`); every row carries the conversation as chat messages (OpenAI MRCR's
shape) and as the transcript the task sends, the question, the prefix, the gold answer and the look-alikes.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby

from datasets import Features, List, Value

from data_builders.dataset.registry import BuildConfig, BuildContext, CardInfo, Part, builder
from data_builders.haystack.prompt_budget import reserve_option
from data_builders.mrcr.grid import (
    DEFAULT_ANSWER_TOKENS,
    DEFAULT_NEEDLES,
    DEFAULT_RESERVE,
    PROMPT_TEMPLATE,
    SCORING,
    grid_size,
    mrcr_cells,
    needle_sizes,
)
from longctx_eval.errors import ConfigError

MRCR_VERSION = "1"

_int, _str, _float = Value("int64"), Value("string"), Value("float64")
ROW_FEATURES = Features(
    {
        "id": _str,
        "conversation": _str,  # shared by the questions asked about one conversation (the cluster)
        "messages": List({"role": _str, "content": _str}),  # the turns, then the question as the last user turn
        "context": _str,  # the turns as one transcript ("User: ...\n\nAssistant: ..."), what the task sends
        "question": _str,
        "prompt": _str,  # the whole text of the one user turn the task sends
        "random_string_to_prepend": _str,
        "answer": _str,  # the prefix followed by the asked answer, as OpenAI MRCR's `answer`
        "n_needles": _int,  # look-alike requests of the asked kind
        "position": _int,  # which of them is asked, 1-based
        "desired_msg_index": _int,  # index in `messages` of the asked answer
        "total_messages": _int,
        "lookalike_request": _str,
        "lookalike_msg_indices": List(_int),
        "lookalike_answers": List(_str),  # in conversation order
        "turns": _int,  # request/answer pairs before the question
        "asked_turn": _int,
        "asked_depth": _float,  # where the asked answer starts, share of the conversation's tokens
        "depth_bucket": _str,
        "max_new_tokens": _int,  # tokens of prefix + answer, plus 16
        "target_tokens": _int,  # the length: the whole prompt budget
        "context_tokens": _int,  # the transcript's tokens in the dataset's tokenizer (at most length - reserve)
        "reserve": _int,
        "rep": _int,
        "seed": _int,
        "conversation_seed": _int,
        "stratum": _int,
    }
)

USAGE = """\
Each row of an `mrcr_<length>` config is one question about one long user/assistant conversation. `messages`
holds the conversation as chat messages, the question last (OpenAI MRCR's `prompt`); `prompt` is the same
conversation as the one user turn this suite sends (the template below), whose tokens with a chat template and
`max_new_tokens` fit `target_tokens` in the tokenizer under Provenance. The reply must start with
`random_string_to_prepend` and reproduce the `position`-th of the `n_needles` identical requests' answers;
`answer` is the gold reply. Rows of one `conversation` share its text (three questions, one per look-alike group).
"""


def _options(config: BuildConfig) -> tuple[tuple[int, ...], int, int]:
    """(look-alike sizes, reserve, answer tokens) from the build's `--option`s."""
    o = config.options
    sizes = needle_sizes(o.get("needles", ",".join(map(str, DEFAULT_NEEDLES))), "--option needles")
    reserve = reserve_option(o, DEFAULT_RESERVE)
    raw = o.get("answer_tokens", str(DEFAULT_ANSWER_TOKENS))
    try:
        answer_tokens = int(raw)
    except ValueError:
        answer_tokens = 0
    if not 16 <= answer_tokens <= 1024:
        raise ConfigError(f"--option answer_tokens={raw!r}: expected a number of tokens from 16 to 1024")
    return sizes, reserve, answer_tokens


def _total(config: BuildConfig) -> int:
    return grid_size(config.lengths, _options(config)[0], config.per_cell)


@builder(
    "mrcr",
    version=MRCR_VERSION,
    features=ROW_FEATURES,
    description="MRCR-style multi-round coreference: reproduce the i-th of 2, 4 or 8 identical requests' answers "
    "in a long user/assistant conversation, prefixed with a random string; answers are prose of the haystack source.",
    total=_total,
    options={
        "needles": "look-alike group sizes, e.g. 2,4 (default 2,4,8)",
        "reserve": f"tokens of each length left for the question and the reply (default {DEFAULT_RESERVE})",
        "answer_tokens": f"the longest answer in tokens (default {DEFAULT_ANSWER_TOKENS})",
    },
    card=CardInfo(
        tags=("long-context", "multi-turn", "coreference", "mrcr"),
        task_categories=("text-generation",),
        usage=USAGE,
        prompt_template=PROMPT_TEMPLATE,
        scoring=SCORING,
    ),
)
def mrcr_parts(ctx: BuildContext) -> Iterator[Part]:
    """One `mrcr_<length>` part per length: the task's cells in the task's order (--depths unused)."""
    cfg = ctx.config
    sizes, reserve, answer_tokens = _options(cfg)
    cells = mrcr_cells(ctx.source, ctx.tokenizer, cfg.lengths, sizes, cfg.per_cell, cfg.seed, reserve, answer_tokens)
    for length, of_length in groupby(cells, key=lambda c: c.length):
        rows = []
        for cell in of_length:
            rows.append(cell.row())
            ctx.advance(1)
        yield Part(f"mrcr_{length}", rows)
