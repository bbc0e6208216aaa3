"""A registered transformers attention function that also yields exact softmax rows of chosen queries.

`longctx_rows` computes each layer's output like SDPA (plus ALiBi when the config carries `alibi_slopes`)
and, inside `capture_rows(positions)`, the fp32 softmax rows of only those query positions from the
post-position-encoding query and key the layer received: O(H*R*L) memory, never the O(H*L^2) that
`output_attentions` needs (which SDPA silently ignores in transformers 5.x).

A sliding-window layer of a hybrid model (Gemma 3: transformers passes it `sliding_window`, and no mask, to a
registered function) attends in blocks of queries to the keys within its window (`sliding_attention`, O(L*W)), and
its captured rows are within-window rows: zero outside the last W positions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

from longctx_eval.models.posprobe.alibi_attention import alibi_bias, alibi_causal_attention

ATTENTION_NAME = "longctx_rows"


@dataclass
class RowCapture:
    """The query positions to capture and, after a forward, one (H, R, L) fp32 row tensor per layer."""

    positions: torch.Tensor
    rows: dict[int, torch.Tensor] = field(default_factory=dict)

    def stacked(self, layers: int | Sequence[int]) -> torch.Tensor:
        """(len(layers), H, R, L) of the given layer indices (an int n: layers 0..n-1); raises when one of them did
        not go through this attention function."""
        wanted = list(range(layers)) if isinstance(layers, int) else list(layers)
        missing = [i for i in wanted if i not in self.rows]
        if missing:
            raise RuntimeError(
                f"attention rows captured for {len(wanted) - len(missing)} of {len(wanted)} layers (missing "
                f"{missing[:5]}); expected every layer to dispatch through the registered attention function "
                f"{ATTENTION_NAME!r}"
            )
        first = self.rows[wanted[0]].device  # layers spread over GPUs (device_map) meet on the first one's
        return torch.stack([self.rows[i].to(first) for i in wanted])


_ACTIVE: ContextVar[RowCapture | None] = ContextVar("longctx_row_capture", default=None)


@contextmanager
def capture_rows(positions: Sequence[int], device: torch.device | str | None = None) -> Iterator[RowCapture]:
    """Within this block, every `longctx_rows` layer stores the softmax rows of `positions` (an index tensor on
    `device`, the model's; each layer moves it to its own device if the model is spread over several)."""
    cap = RowCapture(torch.tensor(list(positions), dtype=torch.long, device=device if device is not None else "cpu"))
    token = _ACTIVE.set(cap)
    try:
        yield cap
    finally:
        _ACTIVE.reset(token)


def exact_rows(
    query: torch.Tensor,
    key: torch.Tensor,
    positions: torch.Tensor,
    scaling: float,
    slopes: torch.Tensor | None = None,
    softcap: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """fp32 causal softmax rows (H, R, L) of batch item 0 for query `positions`; key heads repeated for GQA. With a
    sliding `window`, query i sees keys j with i - window < j <= i only (transformers' sliding mask)."""
    groups = query.shape[1] // key.shape[1]
    positions = positions.to(query.device)
    q = query[0, :, positions, :].to(torch.float32)
    k = repeat_kv(key[:1], groups)[0].to(torch.float32)
    logits = torch.matmul(q, k.transpose(-1, -2)) * scaling
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    if slopes is not None:
        logits = logits + alibi_bias(slopes.to(query.device), positions, k.shape[1])
    else:
        keys = torch.arange(k.shape[1], device=query.device)[None, :]
        hidden = keys > positions[:, None]
        if window is not None:
            hidden = hidden | (keys <= positions[:, None] - window)
        logits = logits.masked_fill(hidden[None], float("-inf"))
    return torch.softmax(logits, dim=-1)


def sliding_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float, window: int
) -> torch.Tensor:
    """Causal attention within a sliding `window` (query i sees keys i - window < j <= i), output (B, L, H, D) as
    sdpa_attention_forward returns it: SDPA per block of `window` queries over only the keys they can see."""
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    n = query.shape[2]
    out = torch.empty_like(query)
    for a in range(0, n, window):
        b = min(n, a + window)
        k0 = max(0, a - window + 1)
        rows = torch.arange(a, b, device=query.device)[:, None]
        cols = torch.arange(k0, b, device=query.device)[None, :]
        mask = (cols <= rows) & (cols > rows - window)
        out[:, :, a:b] = torch.nn.functional.scaled_dot_product_attention(
            query[:, :, a:b], key[:, :, k0:b], value[:, :, k0:b], attn_mask=mask, scale=scaling
        )
    return out.transpose(1, 2).contiguous()


def _slopes(module: Any, device: torch.device) -> torch.Tensor | None:
    """The layer's ALiBi slopes on `device` (its query's), built once per layer and device; None without ALiBi."""
    cached = getattr(module, "_longctx_alibi_slopes", None)
    if cached is None or cached.device != device:
        values = getattr(module.config, "alibi_slopes", None)
        if values is None:
            return None
        cached = torch.tensor(values, dtype=torch.float32, device=device)
        module._longctx_alibi_slopes = cached
    return cached


def rows_attention_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """SDPA (or ALiBi, or a sliding window) attention output; under `capture_rows`, also the exact rows of the
    chosen queries (within the window for a sliding layer)."""
    window = kwargs.get("sliding_window")
    if attention_mask is not None:
        raise ValueError(
            f"{ATTENTION_NAME}: expected one unpadded causal sequence (got attention_mask="
            f"{type(attention_mask).__name__})"
        )
    scaling = module.scaling if scaling is None else scaling
    slopes = _slopes(module, query.device)
    if window is not None and slopes is not None:
        raise ValueError(f"{ATTENTION_NAME}: a sliding window with ALiBi is not supported")
    cap = _ACTIVE.get()
    if cap is not None and query.shape[2] > 1:
        softcap = kwargs.get("softcap")
        rows = exact_rows(query, key, cap.positions, scaling, slopes, softcap, window)
        cap.rows[module.layer_idx] = rows.detach()
    if window is not None and query.shape[2] > 1:
        if query.shape[2] != key.shape[2]:
            raise ValueError(f"{ATTENTION_NAME}: sliding-window layers support full-sequence forwards only")
        return sliding_attention(query, key, value, scaling, int(window)), None
    if slopes is None:
        return sdpa_attention_forward(module, query, key, value, None, dropout=dropout, scaling=scaling, **kwargs)
    if query.shape[2] != key.shape[2]:
        raise ValueError(f"{ATTENTION_NAME}: ALiBi supports full-sequence forwards only (no KV cache)")
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    return alibi_causal_attention(query, key, value, slopes, scaling), None


AttentionInterface.register(ATTENTION_NAME, rows_attention_forward)
