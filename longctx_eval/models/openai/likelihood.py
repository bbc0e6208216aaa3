"""Log-likelihood of choices through an OpenAI-compatible server: `/v1/completions` with `echo: true, logprobs: 1,
max_tokens: 1` (lm-eval's request), one request per choice, sent in order so a server's prefix cache serves the
shared document once (vLLM, `longctx-eval serve`).

Two ways to find a choice's tokens in the echoed prompt:
- `ids`, where the model's own HF tokenizer is loaded here (`LoadedTokenizer.exact`): the prompt goes as token ids,
  the rendered prompt's ids then the choice's ids taken in context (models/hf/likelihood.py): the very ids `hf:`
  scores, and the choice is the last `len(choice)` echoed positions.
- `text`, otherwise: prompt + choice goes as text and the choice is the echoed tokens whose `text_offset` lies in the
  choice's characters.
A reply without the prompt's log-probabilities (a server that cannot echo them) is a failed prediction naming that;
`unsupported` asks the server once before a task (the log-probabilities come back, and the greedy next token, sent
back, scores as greedy: llama-cpp-python 0.3 with logits_all echoes each token under the next position's
distribution) and the task is skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GREEDY_TOLERANCE = 1e-6
"""A choice token counts as greedy when its log-probability is within this of the best at its position."""
PROBE_TEXT = "The cat sat on the mat. The cat sat on the"
"""What `unsupported` sends to see whether a server echoes prompt log-probabilities, aligned with the tokens."""


@dataclass(frozen=True)
class ChoiceSlot:
    """Where one choice sits in its echoed prompt: positions [start, end) (ids), or characters [start, end) (text)."""

    mode: str
    start: int
    end: int


@dataclass(frozen=True)
class ChoiceScore:
    """One choice read from a reply: summed log-probability, its tokens, whether each was the argmax."""

    logprob: float
    tokens: int
    greedy: bool


def read_choice(logprobs: dict[str, Any] | None, slot: ChoiceSlot) -> ChoiceScore | str:
    """The choice's score from a reply's `logprobs` object, or why it cannot be read (one line)."""
    if not logprobs or not isinstance(logprobs.get("token_logprobs"), list):
        return "the server returned no prompt log-probabilities (completions with echo and logprobs)"
    values = logprobs["token_logprobs"]
    tops = logprobs.get("top_logprobs") or [None] * len(values)
    if slot.mode == "ids":
        idx = list(range(slot.start, slot.end))
    else:
        offsets = logprobs.get("text_offset")
        if not isinstance(offsets, list) or len(offsets) != len(values):
            return "the server's echoed log-probabilities have no text_offset to find the choice's tokens"
        idx = [i for i, at in enumerate(offsets) if isinstance(at, int) and slot.start <= at < slot.end]
    if not idx:
        return "the echoed prompt holds no token of the choice"
    if idx[-1] >= len(values) or any(values[i] is None for i in idx):
        return f"the server echoed {len(values)} log-probabilities, fewer than the prompt's tokens"
    total = float(sum(values[i] for i in idx))
    greedy = True
    for i in idx:
        top = tops[i] if i < len(tops) else None
        best = max(top.values()) if isinstance(top, dict) and top else None
        greedy = greedy and best is not None and values[i] >= best - GREEDY_TOLERANCE
    return ChoiceScore(total, len(idx), greedy)


def plan_ids(prompt_ids: Sequence[int], choice_ids: Sequence[Sequence[int]]) -> list[tuple[list[int], ChoiceSlot]]:
    """Per choice: the token ids to send (prompt then choice) and where the choice is in the echo."""
    n = len(prompt_ids)
    return [(list(prompt_ids) + list(ids), ChoiceSlot("ids", n, n + len(ids))) for ids in choice_ids]


def plan_text(text: str, choices: Sequence[str]) -> list[tuple[str, ChoiceSlot]]:
    """Per choice: the text to send (prompt then choice) and the choice's characters in it."""
    return [(text + c, ChoiceSlot("text", len(text), len(text) + len(c))) for c in choices]
