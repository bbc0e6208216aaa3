"""A registered transformers attention function that also yields exact softmax rows of chosen queries.

`longctx_rows` computes each layer's output like SDPA (plus ALiBi when the config carries `alibi_slopes`)
and, inside `capture_rows(positions)`, the fp32 softmax rows of only those query positions from the
post-position-encoding query and key the layer received: O(H*R*L) memory, never the O(H*L^2) that
`output_attentions` needs (which SDPA silently ignores in transformers 5.x).
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

    def stacked(self, n_layers: int) -> torch.Tensor:
        """(n_layers, H, R, L); raises when a layer did not go through this attention function."""
        missing = [i for i in range(n_layers) if i not in self.rows]
        if missing:
            raise RuntimeError(
                f"attention rows captured for {n_layers - len(missing)} of {n_layers} layers (missing {missing[:5]}); "
                f"expected every layer to dispatch through the registered attention function {ATTENTION_NAME!r}"
            )
        first = self.rows[0].device  # layers spread over GPUs (device_map) meet on the first one's
        return torch.stack([self.rows[i].to(first) for i in range(n_layers)])


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
) -> torch.Tensor:
    """fp32 causal softmax rows (H, R, L) of batch item 0 for query `positions`; key heads repeated for GQA."""
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
        future = torch.arange(k.shape[1], device=query.device)[None, :] > positions[:, None]
        logits = logits.masked_fill(future[None], float("-inf"))
    return torch.softmax(logits, dim=-1)


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
    """SDPA (or ALiBi) attention output; under `capture_rows`, also the exact rows of the chosen queries."""
    if attention_mask is not None or kwargs.get("sliding_window") is not None:
        raise ValueError(
            f"{ATTENTION_NAME}: expected one unpadded causal sequence without a sliding window "
            f"(got attention_mask={type(attention_mask).__name__}, sliding_window={kwargs.get('sliding_window')})"
        )
    scaling = module.scaling if scaling is None else scaling
    slopes = _slopes(module, query.device)
    cap = _ACTIVE.get()
    if cap is not None and query.shape[2] > 1:
        softcap = kwargs.get("softcap")
        cap.rows[module.layer_idx] = exact_rows(query, key, cap.positions, scaling, slopes, softcap).detach()
    if slopes is None:
        return sdpa_attention_forward(module, query, key, value, None, dropout=dropout, scaling=scaling, **kwargs)
    if query.shape[2] != key.shape[2]:
        raise ValueError(f"{ATTENTION_NAME}: ALiBi supports full-sequence forwards only (no KV cache)")
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    return alibi_causal_attention(query, key, value, slopes, scaling), None


AttentionInterface.register(ATTENTION_NAME, rows_attention_forward)
