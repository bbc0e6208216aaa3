"""`batch_size=auto` on CUDA: requests packed into batches by a token budget, equal-length prompts together.

A padded batch builds an attention mask over every padded position, which at 32K+ tokens costs more than the
batch saves; so a batch whose widest prompt is longer than PAD_MAX_TOKENS holds prompts of exactly one length
(no padding at all), and only short prompts of different lengths share a batch (left-padded). Each batch keeps
its prompts plus the generation budget within `max_batch_tokens`; a prompt longer than the budget goes alone.
On the CPU, auto is batch 1 (options.HF_BATCH_SIZE: measured fastest there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PAD_MAX_TOKENS = 2048
"""Widest prompt of a batch that may mix lengths (left padding); longer batches hold one prompt length."""
AUTO_MAX_REQUESTS = 64
"""At most this many prompts per packed batch (and per runner batch handed to the adapter under auto)."""
AUTO_BUDGET_CAP = 131_072
"""Upper bound of the automatic token budget (prompt + generation tokens per batch)."""
AUTO_BUDGET_FLOOR = 8192
"""Lower bound of the automatic token budget."""
FREE_SHARE = 0.5
"""Share of the free device memory (after loading) the automatic budget plans to fill with KV cache and
activations; the rest absorbs the allocator's fragmentation and the prefill's transient peaks."""


def pack(
    lengths: Sequence[int], budgets: Sequence[int], max_tokens: int, max_requests: int = AUTO_MAX_REQUESTS
) -> list[list[int]]:
    """Index groups of the requests with prompt `lengths` and generation `budgets`: sorted by length (stable); a
    group is prompts of one length, or, when its widest prompt is at most PAD_MAX_TOKENS, of several; a group's
    count x (widest prompt + largest budget) stays within `max_tokens` (a lone request may exceed it)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    groups: list[list[int]] = []
    cur: list[int] = []
    gen = 0
    for i in order:
        if cur:
            width = lengths[i]  # ascending order: the newcomer is the widest
            mixes = width != lengths[cur[-1]]
            gen_i = max(gen, budgets[i])
            fits = (len(cur) + 1) * (width + gen_i) <= max_tokens and len(cur) < max_requests
            if fits and (not mixes or width <= PAD_MAX_TOKENS):
                cur.append(i)
                gen = gen_i
                continue
            groups.append(cur)
        cur, gen = [i], budgets[i]
    if cur:
        groups.append(cur)
    return groups


def per_token_bytes(config: Any, dtype_bytes: int) -> int:
    """Device bytes one token of a batch holds during generation: its keys and values in every layer plus a
    prefill activation allowance (hidden and MLP width, twice)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = int(getattr(text, "num_hidden_layers", 1) or 1)
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    hidden = int(getattr(text, "hidden_size", 0) or 0)
    head_dim = int(getattr(text, "head_dim", None) or (hidden // heads if heads else 0))
    mlp = int(getattr(text, "intermediate_size", None) or 4 * hidden)
    kv = 2 * layers * kv_heads * head_dim * dtype_bytes
    return max(1, kv + 2 * (hidden + mlp) * dtype_bytes)


def auto_budget(model: Any, devices: Sequence[Any]) -> int:
    """The token budget of a packed batch on CUDA: FREE_SHARE of the free memory over `per_token_bytes`,
    within [AUTO_BUDGET_FLOOR, AUTO_BUDGET_CAP]."""
    import torch

    free = min(torch.cuda.mem_get_info(d)[0] for d in devices) if devices else 0
    dtype_bytes = model.dtype.itemsize
    budget = int(FREE_SHARE * free / per_token_bytes(model.config, dtype_bytes))
    return max(AUTO_BUDGET_FLOOR, min(AUTO_BUDGET_CAP, budget))
