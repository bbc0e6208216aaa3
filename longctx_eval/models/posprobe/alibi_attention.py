"""ALiBi for Llama-architecture models: the slopes, the bias, and causal attention with it in O(H*B*L) memory.

A Llama with RoPE disabled (`rope_type="proportional", partial_rotary_factor=0`, so cos = 1 and sin = 0) and
these biases added in a registered attention function differs from its RoPE twin only in position encoding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

QUERY_BLOCK = 512
"""Queries per block: the bias of one block is H x 512 x L floats instead of H x L x L."""


def alibi_slopes(n_heads: int) -> list[float]:
    """Press et al.'s geometric slopes 2^(-8/n), 2^(-16/n), ... (for 4 heads: 2^-2, 2^-4, 2^-6, 2^-8)."""
    if n_heads & (n_heads - 1) == 0:
        return [2.0 ** (-8.0 * (i + 1) / n_heads) for i in range(n_heads)]
    # Not a power of two: the paper's interleaving of the next power's slopes.
    low = 2 ** math.floor(math.log2(n_heads))
    return alibi_slopes(low) + alibi_slopes(2 * low)[0::2][: n_heads - low]


def alibi_bias(slopes: torch.Tensor, query_pos: torch.Tensor, key_len: int) -> torch.Tensor:
    """(H, Q, K) additive logits: -slope * (q - k) for k <= q, -inf for future keys."""
    keys = torch.arange(key_len, dtype=torch.float32, device=query_pos.device)
    dist = query_pos[:, None].to(torch.float32) - keys[None, :]
    bias = -slopes.to(device=query_pos.device, dtype=torch.float32)[:, None, None] * dist[None]
    return bias.masked_fill(dist[None] < 0, float("-inf"))


def alibi_causal_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    slopes: torch.Tensor,
    scaling: float,
    block: int = QUERY_BLOCK,
) -> torch.Tensor:
    """Causal attention with ALiBi for (B, H, L, d) query and (B, H, L, d) key/value; returns (B, L, H, d)."""
    length = query.shape[2]
    outs = []
    for start in range(0, length, block):
        end = min(length, start + block)
        pos = torch.arange(start, end, device=query.device)
        bias = alibi_bias(slopes, pos, end).to(query.dtype)  # keys past `end` are all in the future
        outs.append(
            F.scaled_dot_product_attention(
                query[:, :, start:end], key[:, :, :end], value[:, :, :end], attn_mask=bias[None], scale=scaling
            )
        )
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous()
