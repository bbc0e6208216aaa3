"""The prompt's own log-probabilities for `/v1/completions` with `echo: true, logprobs: N` (OpenAI's legacy form, as
vLLM and lm-eval use it to score choices): each prompt token's log-probability given the tokens before it, the N
most likely tokens at each position, and with `max_tokens: 1` the greedy next token.

One prefill per document: the previous prompt's KV cache and its per-position results are kept, so a prompt that
shares at least 256 leading tokens with it (the same document, another question or choice) computes only the rest
(models/hf/prefix_cache.py; the same cache rules as the `hf` adapter's generation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from longctx_eval.models.hf.likelihood import prompt_token_logprobs
from longctx_eval.models.hf.prefix_cache import PrefixCache


@dataclass
class PromptScores:
    """Per prompt token after the first: its log-probability and the top ids at its position; the greedy next id."""

    logprobs: list[float]
    top: list[list[tuple[int, float]]]
    next_id: int
    next_logprob: float
    next_top: list[tuple[int, float]] = field(default_factory=list)
    cached_tokens: int = 0


class PromptScorer:
    """Scores prompts one at a time on one model (callers serialise, as generation does), reusing a shared prefix."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.cache = PrefixCache(model.config)
        self._held: tuple[list[float], list[list[tuple[int, float]]], int] | None = None

    def score(self, ids: list[int], top_n: int) -> PromptScores:
        """Log-probabilities of `ids[1:]`, the top `top_n` at each of those positions, and the greedy next token."""
        import torch

        held_lp, held_top, held_n = self._held or ([], [], -1)
        self._held = None
        with torch.no_grad():
            cache, common = self.cache.take(ids) if self.cache.enabled else (self.cache.fresh(), 0)
            if common and held_n != top_n:  # the held positions kept another number of top tokens
                cache, common = self.cache.fresh(), 0
            held = max(0, common - 1)  # recompute the last shared position: its distribution scores ids[common]
            if common:
                cache.crop(-1)
            lps, tops, last = prompt_token_logprobs(self.model, ids, cache, held, top_n)
            lps, tops = held_lp[:held] + lps, held_top[:held] + tops
            self.cache.keep(ids, cache)
            self._held = (lps, tops, top_n)
            vals, idx = last.topk(max(1, top_n))
        nxt = list(zip(idx.tolist(), vals.tolist(), strict=True))
        return PromptScores(lps, tops, nxt[0][0], nxt[0][1], nxt[:top_n], cached_tokens=held)

    def clear(self) -> None:
        """Drop the held cache (after generation used the model, nothing is stale, but memory is freed)."""
        self.cache.clear()
        self._held = None
