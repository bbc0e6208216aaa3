"""What `decoding=greedy` sends: temperature 0 and the neutral value of every field that can change a greedy reply.

Servers apply defaults of their own when a field is left out: vLLM and SGLang the model's generation_config.json
(Qwen2.5 ships repetition_penalty 1.05), llama.cpp's server repeat_penalty 1.1 in some versions. A penalty
rescales logits before the argmax, so it changes greedy output; every such field is sent at its neutral value.
A top-k, top-p or min-p cut never removes the most likely token, so at temperature 0 it cannot change a reply:
top_p and min_p are sent at their neutral values anyway (every server takes them), top_k is not (its neutral
value differs: -1 for vLLM and SGLang, 0 for llama.cpp, and each refuses the other's).

Two sets (option `neutral`):
- `standard`: fields of the OpenAI API itself (temperature, top_p, presence_penalty, frequency_penalty), which
  hosted APIs accept and which are their defaults anyway;
- `all`: also the self-hosted servers' own fields, in the request body: repetition_penalty (vLLM, SGLang,
  `longctx-eval serve`), repeat_penalty (llama.cpp's name for it), min_p. Servers ignore a field they do not
  know (vLLM logs it); hosted APIs refuse it, so `auto` sends `all` except to hosted APIs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

STANDARD: dict[str, float] = {"temperature": 0.0, "top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
"""OpenAI API fields, neutral: sent as top-level request fields."""
EXTENDED: dict[str, float] = {"repetition_penalty": 1.0, "repeat_penalty": 1.0, "min_p": 0.0}
"""Self-hosted servers' own fields, neutral: sent in the request body (the openai client's extra_body)."""


@dataclass(frozen=True)
class Sampling:
    """The generation fields one request carries: top-level (`fields`) and server-specific (`extra`)."""

    fields: dict[str, float]
    extra: dict[str, float]

    def record(self) -> dict[str, Any]:
        """What the run file's model settings keep: every generation field sent, by name."""
        return dict(sorted({**self.fields, **self.extra}.items()))


def greedy_sampling(neutral: Literal["auto", "standard", "all"], hosted: bool) -> Sampling:
    """The fields `decoding=greedy` sends to a server (`hosted`: an API that refuses unknown fields)."""
    wide = neutral == "all" or (neutral == "auto" and not hosted)
    return Sampling(dict(STANDARD), dict(EXTENDED) if wide else {})
