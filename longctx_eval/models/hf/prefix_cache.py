"""Prefix KV-cache reuse for `hf` greedy generation: consecutive prompts that share a long token prefix (several
questions on one document, served back to back by the runner) prefill only the tokens that differ.

The part after a cached prefix is prefilled in chunks where the attention kernel would otherwise compute it as a
rectangle (see `suffix_chunk`): without them, reuse on this CPU cost more than a fresh prefill for suffixes longer
than the prefix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PREFIX_MIN_TOKENS = 256
"""Shortest shared prefix worth reusing: below it a fresh prefill costs about as much as the bookkeeping."""

SUFFIX_CHUNK_MIN = 512
"""Fewest tokens per prefill step after a cached prefix: smaller steps leave the matrix products too thin."""
SUFFIX_CHUNK_MAX = 2048
"""Most tokens per step: also bounds the explicit mask an sdpa step builds (step x prompt length) on long prompts."""
SUFFIX_CHUNK_STEPS = 16
"""Steps the suffix is cut into between those bounds: each step wastes half a step of keys per query, so the
waste stays under 1/16 of the suffix's own causal attention."""
RECTANGLE_ATTENTION = frozenset({"sdpa", "eager"})
"""Attention implementations that take a cached prefix's causal mask as an explicit mask and so compute every query
against every key; flash-attention kernels align the causal mask to the last key themselves and need no chunks."""


@dataclass
class PrefixStats:
    """What the cache did, for tests and benchmarks (never timing): requests seen, reuses, tokens not prefilled."""

    requests: int = 0
    reused: int = 0
    reused_tokens: int = 0


def shared_prefix(a: list[int], b: list[int]) -> int:
    """Number of leading token ids `a` and `b` have in common."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixCache:
    """The previous prompt's KV cache (a transformers DynamicCache) and its token ids; one prompt at a time."""

    def __init__(self, config: Any, min_tokens: int = PREFIX_MIN_TOKENS) -> None:
        self._config = config
        self.min_tokens = min_tokens
        self._ids: list[int] = []
        self._cache: Any = None
        self.stats = PrefixStats()
        self.enabled = _positions_fixed(config)
        self.chunk_suffix = True
        """Whether the part after a held prefix is prefilled in steps (`suffix_chunk`); a benchmark turns it off."""

    def take(self, ids: list[int]) -> tuple[Any, int]:
        """A cache for prompt `ids`: the previous one cropped to the shared prefix (at least `min_tokens`, always
        leaving the last prompt token to prefill), else a fresh one; and how many tokens it already holds."""
        from transformers import DynamicCache

        self.stats.requests += 1
        cache, held = self._cache, self._ids
        self.clear()  # held again only after a generation succeeds with it
        common = shared_prefix(held, ids[:-1])
        usable = self.enabled and cache is not None and _croppable(cache) and cache.get_seq_length() >= common
        if not usable or common < self.min_tokens:
            return DynamicCache(config=self._config), 0
        cache.crop(common - cache.get_seq_length())  # this transformers' crop takes minus the tokens to drop
        self.stats.reused += 1
        self.stats.reused_tokens += common
        return cache, common

    def keep(self, ids: list[int], cache: Any) -> None:
        """Hold `cache` (prompt `ids` plus what was generated after them) for the next prompt."""
        self._ids, self._cache = list(ids), cache

    def clear(self) -> None:
        """Drop the held cache (frees its memory)."""
        self._ids, self._cache = [], None


def suffix_chunk(suffix_tokens: int, attn_implementation: str | None) -> int | None:
    """Tokens per prefill step for the `suffix_tokens` after a cached prefix, or None to prefill them in one step.

    With a prefix in the cache the queries are fewer than the keys, so sdpa and eager get the causal mask as an
    explicit mask: the kernel then skips no masked block and pays suffix x prompt scores where suffix x prefix plus
    half of suffix x suffix are needed. Prefilled in steps of c, each step pays only its own c x c half extra."""
    if attn_implementation not in RECTANGLE_ATTENTION:
        return None
    chunk = min(SUFFIX_CHUNK_MAX, max(SUFFIX_CHUNK_MIN, -(-suffix_tokens // SUFFIX_CHUNK_STEPS)))
    return chunk if suffix_tokens > chunk else None


def _croppable(cache: Any) -> bool:
    """Only plain full-attention layers keep every past position; sliding or linear layers cannot be cut back."""
    from transformers.cache_utils import DynamicLayer

    layers: Any = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def _positions_fixed(config: Any) -> bool:
    """Whether a token's keys depend on its position only: RoPE that rescales with the sequence length (dynamic
    NTK, LongRoPE) gives the same prefix other keys in a longer prompt, so it is never reused there."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    params = getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None) or {}
    nested = params and all(isinstance(v, dict) for v in params.values())  # one entry per attention type
    kinds = {p.get("rope_type", p.get("type")) for p in (params.values() if nested else [params])}
    return not kinds & {"dynamic", "longrope"}
