"""KV cache layers that grow in place: each new token's keys are written into a preallocated buffer instead of
concatenated onto a copy of every key before it.

transformers' DynamicLayer appends by `torch.cat`, so every decoded token copies the whole cache of every layer; a
sliding layer that records its past (`prefix_cache.py`) holds the whole prompt too, so for Gemma 3 270M all 18 layers
copy the prompt's keys and values per token (at 8K about 300 MB a token, a quarter of the bytes the weights take).
Here the keys are a view of a buffer with room to spare (half again the length, at least `HEADROOM` tokens), so a token
costs one row written; a cropped view keeps its buffer and the next tokens are written after it. The values are the
same floats in the same layout, so attention, and every generated token, is unchanged. A recording sliding layer cut
back to a prefix keeps its whole past (transformers' keeps one window), so it can be cut back again, further.
Imports transformers: import it where a cache is built, not at module level."""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

HEADROOM = 256
"""Fewest spare token rows a buffer is allocated with (a reply's decode steps fit without growing it)."""


def grown(buffer: Any, held: Any, new: Any) -> tuple[Any, Any]:
    """(`held` with `new` appended along the token axis, the buffer it is a view of): written into `buffer` after
    `held` when `held` is a view of it with room left, else into a new buffer with `held` copied in first."""
    span = _span(buffer, held)
    n = new.shape[-2]
    if span is None or span[1] + n > buffer.shape[-2] or buffer.dtype != new.dtype or buffer.device != new.device:
        length = held.shape[-2] if held.dim() == 4 else 0
        total = length + n
        buffer = torch.empty(
            (*new.shape[:2], total + max(HEADROOM, total // 2), new.shape[-1]), dtype=new.dtype, device=new.device
        )
        if length:
            buffer[:, :, :length].copy_(held)
        span = (0, length)
    start, end = span
    buffer[:, :, end : end + n].copy_(new)
    return buffer[:, :, start : end + n], buffer


def _span(buffer: Any, held: Any) -> tuple[int, int] | None:
    """[start, end) of `held` along the token axis of `buffer` when `held` is a view of it (batch, heads and head
    size whole), else None."""
    if buffer is None or held is None or held.dim() != 4 or held.numel() == 0:
        return None
    if held.untyped_storage().data_ptr() != buffer.untyped_storage().data_ptr():
        return None
    if held.stride() != buffer.stride() or held.shape[:2] != buffer.shape[:2] or held.shape[3] != buffer.shape[3]:
        return None
    offset, row = held.storage_offset() - buffer.storage_offset(), buffer.stride(2)
    if offset < 0 or offset % row:
        return None
    return offset // row, offset // row + held.shape[2]


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer whose keys and values grow in place (see the module doc)."""

    _key_buffer: Any = None
    _value_buffer: Any = None

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys, self._key_buffer = grown(self._key_buffer, self.keys, key_states)
        self.values, self._value_buffer = grown(self._value_buffer, self.values, value_states)
        return self.keys, self.values


class GrowingSlidingLayer(DynamicSlidingWindowLayer):
    """A sliding-window cache layer that, while it records its past, grows in place (see the module doc); not
    recording, it keeps transformers' update (it then copies one window per token, not the prompt)."""

    _key_buffer: Any = None
    _value_buffer: Any = None

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if not self.record_past:
            return super().update(key_states, value_states, *args, **kwargs)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.cumulative_length += key_states.shape[-2]
        keys, self._key_buffer = grown(self._key_buffer, self.keys, key_states)
        values, self._value_buffer = grown(self._value_buffer, self.values, value_states)
        self.keys, self.values = keys, values
        visible = self.sliding_window - 1 + key_states.shape[-2]  # what transformers' update returns
        return keys[:, :, -visible:, :], values[:, :, -visible:, :]

    def crop(self, tokens_to_remove: int) -> None:
        """While recording, drop the last `-tokens_to_remove` positions and keep every earlier one: transformers'
        crop keeps only the window before the cut, so a cache cut back once could never be cut further back (the
        next prompt sharing a shorter prefix reused nothing). `update` shows attention only the window either way."""
        if not self.record_past or tokens_to_remove > 0 or not self.is_initialized:
            super().crop(tokens_to_remove)
            return
        if tokens_to_remove == 0:
            return
        keys: Any = self.keys
        values: Any = self.values
        drop = min(-tokens_to_remove, keys.shape[-2])
        self.keys = keys[:, :, : keys.shape[-2] - drop, :]
        self.values = values[:, :, : values.shape[-2] - drop, :]
        self.cumulative_length -= drop


def growing_layer(layer: Any) -> Any:
    """The in-place-growing version of a fresh transformers cache layer (full attention, or sliding window), or
    `layer` itself for any other kind (linear attention, indexed): those keep their own update."""
    if type(layer) is DynamicLayer:
        return GrowingLayer()
    if type(layer) is DynamicSlidingWindowLayer:
        return GrowingSlidingLayer(sliding_window=layer.sliding_window)
    return layer
