"""Prefix KV-cache reuse for `hf` greedy generation: consecutive prompts that share a long token prefix (several
questions on one document, served back to back by the runner) prefill only the tokens that differ.

The part after a cached prefix is prefilled in chunks where the attention kernel would otherwise compute it as a
rectangle (see `suffix_chunk`): without them, reuse on this CPU cost more than a fresh prefill for suffixes longer
than the prefix.

Sliding-window layers (Gemma 3: 15 of 18 layers) keep only their last window of keys, so a cache past the window
cannot be cut back to an earlier prefix. Their caches are made to record their past (transformers'
`activate_past_recording`: every key is kept, as a full-attention layer keeps it, and each forward still attends
within the window), so they can be cut back as far as the keys they still hold reach: a cut at n needs the window
of keys before n. Memory: those layers then hold the whole prompt, like the global ones (Gemma 3 270M at 32K: about
1.2 GB instead of 0.2 GB in fp32). A cache of any other layer kind (linear attention, state-space) is never reused,
and the run file says why (`model.runtime.prefix_cache`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longctx_eval.models.attention_layout import FULL, SLIDING, layer_types

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
        kinds = set(layer_types(config))
        self.sliding = SLIDING in kinds
        """Whether sliding-window layers record their past (see the module doc)."""
        self.why_not: str | None = None
        """Why no prefix is ever reused with this model, None when prefixes are."""
        if not _positions_fixed(config):
            self.why_not = "its RoPE rescales with the sequence length, so a prefix's keys depend on the whole prompt"
        elif kinds - {FULL, SLIDING}:
            self.why_not = f"its {', '.join(sorted(kinds - {FULL, SLIDING}))} layers cannot be cut back to a prefix"
        self.enabled = self.why_not is None
        self.refused: str | None = None
        """Why the last `take` reused nothing though its prompt shared at least `min_tokens` with the previous."""
        self.chunk_suffix = True
        """Whether the part after a held prefix is prefilled in steps (`suffix_chunk`); a benchmark turns it off."""
        self.grow_in_place = True
        """Whether cache layers grow in place (`growing_cache.py`); a benchmark turns it off to time the copy."""

    def take(self, ids: list[int]) -> tuple[Any, int]:
        """A cache for prompt `ids`: the previous one cropped to the shared prefix (at least `min_tokens`, always
        leaving the last prompt token to prefill), else a fresh one; and how many tokens it already holds."""
        self.stats.requests += 1
        cache, held = self._cache, self._ids
        self.clear()  # held again only after a generation succeeds with it
        common = shared_prefix(held, ids[:-1])
        self.refused = None
        earliest = _earliest_cut(cache) if cache is not None else None
        usable = self.enabled and earliest is not None and earliest <= common <= cache.get_seq_length()
        if not usable or common < self.min_tokens:
            if self.enabled and cache is not None and common >= self.min_tokens:
                self.refused = (
                    f"the held cache reaches back to token {earliest} only, past the {common} shared tokens"
                    if earliest is not None
                    else "the held cache has layers that cannot be cut back"
                )
            return self.fresh(), 0
        cache.crop(common - cache.get_seq_length())  # this transformers' crop takes minus the tokens to drop
        self.stats.reused += 1
        self.stats.reused_tokens += common
        return cache, common

    def fresh(self) -> Any:
        """An empty cache for this model, its sliding-window layers recording their past (see the module doc), its
        attention layers growing in place (`growing_cache.py`: a decoded token no longer copies the whole cache)."""
        from transformers import DynamicCache

        from longctx_eval.models.hf.growing_cache import growing_layer

        cache = DynamicCache(config=self._config)
        if self.grow_in_place and isinstance(getattr(cache, "layers", None), list):
            cache.layers = [growing_layer(layer) for layer in cache.layers]
        if self.enabled and self.sliding:
            for layer in getattr(cache, "layers", None) or []:
                if hasattr(layer, "activate_past_recording"):
                    layer.activate_past_recording()
        return cache

    def record(self) -> dict[str, Any]:
        """The run file's `model.runtime.prefix_cache`: whether prefixes are reused, how, and why not."""
        out: dict[str, Any] = {"reuse": self.enabled, "min_tokens": self.min_tokens}
        if self.why_not is not None:
            out["why_not"] = self.why_not
        elif self.sliding:
            out["sliding_layers"] = "record their past so they can be cut back (they hold the whole prompt)"
        return out

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


def has_sliding_layers(config: Any) -> bool:
    """Whether some attention layer of the model attends through a sliding window (see `window_chunk`)."""
    return SLIDING in set(layer_types(config))


def window_chunk(prompt_tokens: int, attn_implementation: str | None) -> int | None:
    """Tokens per prefill step for a prompt of a model with sliding-window layers, or None for one step.

    sdpa and eager get a sliding layer's window as an explicit mask and compute every query against every key: a
    prefill of L tokens in one step costs L x L per sliding layer where L x window is needed. In steps of c, a
    sliding layer's cache hands each step only the window before it (c x (window + c)); the global layers pay a
    rectangle as after a cached prefix (`suffix_chunk`). Gemma 3 270M at 8K: 51 s in one step, 27 s in steps of
    2048, the same tokens."""
    if attn_implementation not in RECTANGLE_ATTENTION or prompt_tokens <= SUFFIX_CHUNK_MAX:
        return None
    return SUFFIX_CHUNK_MAX


def _earliest_cut(cache: Any) -> int | None:
    """The shortest prefix `cache` can be cut back to: 0 when every layer keeps every past position (full attention,
    or a sliding layer that recorded its past from the start); a sliding layer whose oldest keys are gone can go back
    only as far as a whole window of keys remains before the cut. None when some layer cannot be cut back at all."""
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    from longctx_eval.models.hf.growing_cache import GrowingLayer, GrowingSlidingLayer

    layers: Any = getattr(cache, "layers", None)
    if not layers:
        return None
    earliest = 0
    for layer in layers:
        if type(layer) in (DynamicLayer, GrowingLayer):
            continue
        if type(layer) not in (DynamicSlidingWindowLayer, GrowingSlidingLayer) or not getattr(layer, "record_past", 0):
            return None
        if layer.keys is None or not layer.is_initialized:
            continue
        first = layer.get_seq_length() - layer.keys.shape[-2]  # the oldest position it still holds
        if first > 0:
            earliest = max(earliest, first + layer.sliding_window - 1)
    return earliest


def _positions_fixed(config: Any) -> bool:
    """Whether a token's keys depend on its position only: RoPE that rescales with the sequence length (dynamic
    NTK, LongRoPE) gives the same prefix other keys in a longer prompt, so it is never reused there."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    params = getattr(text, "rope_parameters", None) or getattr(text, "rope_scaling", None) or {}
    nested = params and all(isinstance(v, dict) for v in params.values())  # one entry per attention type
    kinds = {p.get("rope_type", p.get("type")) for p in (params.values() if nested else [params])}
    return not kinds & {"dynamic", "longrope"}
