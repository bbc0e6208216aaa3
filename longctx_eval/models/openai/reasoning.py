"""Reasoning stripped from a served reply before scoring: the server's separate reasoning field, or a
`<think>...</think>` block in the content (DeepSeek-R1, Qwen3, QwQ). The raw reply is kept beside the answer."""

from __future__ import annotations

import re
from dataclasses import dataclass

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass(frozen=True)
class Reply:
    """A reply split into the answer that is scored and the reasoning that is not."""

    answer: str
    reasoning: str | None
    truncated: bool
    """The reasoning never closed (the thinking budget ran out): there is no answer."""


def split_reasoning(text: str, reasoning: str | None = None) -> Reply:
    """Split `text` at its `</think>` (a `<think>` that never closes is all reasoning); `reasoning` is the
    server's separate reasoning field, put first. Text without think tags is all answer."""
    parts = [reasoning] if reasoning else []
    close = text.find(THINK_CLOSE)
    if close >= 0:  # the template may have put <think> in the prompt: the reply then starts inside it
        head = text[:close]
        start = head.find(THINK_OPEN)
        parts.append(head[start + len(THINK_OPEN) :] if start >= 0 else head)
        return Reply(text[close + len(THINK_CLOSE) :].lstrip(), "".join(parts).strip() or None, False)
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        parts.append(stripped[len(THINK_OPEN) :])
        return Reply("", "".join(parts).strip() or None, True)
    return Reply(text, "".join(parts).strip() or None, False)


def strip_echoed_prefix(answer: str, prefix: str) -> str:
    """`answer` without a leading copy of `prefix` (whitespace and case aside), for replies whose answer prefix
    could not be prefilled: the model often starts by repeating it."""
    if not prefix.strip():
        return answer
    want = " ".join(prefix.split()).casefold()
    got: list[str] = []
    for match in re.finditer(r"\S+", answer):
        got.append(match.group())
        joined = " ".join(got).casefold()
        if joined == want:
            return answer[match.end() :]
        if not want.startswith(joined):
            break
    return answer
