"""What a length means for a task that generates: the whole prompt budget, of which the context gets a fixed share.

A length L is the evaluated model's whole budget in its tokenizer: chat template, instructions, context,
question, answer prefix and generation budget together (RULER's convention). The context is exactly
`L - reserve` tokens; the reserve holds everything else, so a model whose window is L (SmolLM2 at 8192) reads
the whole prompt and still has room to answer. The needle family and cross_paragraph size their contexts here.
"""

from __future__ import annotations

from collections.abc import Mapping

from longctx_eval.errors import ConfigError

PROMPT_RESERVE = 192
"""Tokens of a length kept for the prompt around the context (instructions, question, chat template, answer
prefix, generation budget): the context is `length - reserve` tokens."""
MIN_CONTEXT_TOKENS = 128
"""The shortest context a length may leave after its reserve (a needle sentence and about 100 tokens of
haystack); a task whose layout needs more passes its own minimum (cross_paragraph: 256)."""


def context_tokens(length: int, reserve: int = PROMPT_RESERVE, minimum: int = MIN_CONTEXT_TOKENS) -> int:
    """The context's exact length in tokens for a target length: the length less the prompt reserve."""
    n = length - reserve
    if n < minimum:
        raise ConfigError(
            f"length {length}: the context would be {n} tokens after the {reserve}-token prompt "
            f"reserve; expected a length of at least {reserve + minimum} (or a smaller `reserve`)"
        )
    return n


def reserve_option(options: Mapping[str, str], default: int = PROMPT_RESERVE) -> int:
    """The `--option reserve=N` of a dataset build (default `default`); ConfigError unless a count of tokens."""
    raw = options.get("reserve", str(default))
    try:
        reserve = int(raw)
    except ValueError:
        reserve = -1
    if reserve < 0:
        raise ConfigError(f"--option reserve={raw!r}: expected a non-negative number of tokens")
    return reserve
