"""Learned absolute position embeddings for a Llama whose RoPE is disabled (the `tiny-learned` reference).

A table of `learned_position_embeddings` vectors (config.json) is added to the token embeddings before the
first layer, by a forward pre-hook on the decoder that reads the positions the decoder itself would use
(`position_ids`, else the KV cache length + 0..L-1), so full forwards and cached generation agree. The
table is `learned_positions.safetensors` (tensor `weight`) beside `model.safetensors`, so a plain
`from_pretrained` loads a clean Llama and the suite attaches the table on load (`attach_learned_positions`).

Past its table the model has no embedding for a position: positions >= N are clamped to N - 1 (every such
token gets the last trained vector), explicitly, and every forward records how many were clamped
(`clamp_record`), which the probe stores as `pe_clamped_share`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

CONFIG_KEY = "learned_position_embeddings"
"""config.json key: the number of learned positions (the table's rows); absent for other models."""
TABLE_FILE = "learned_positions.safetensors"
BEYOND_TABLE = "clamped"
"""What happens to positions past the table: they take the last row (recorded in reference.json and runs)."""


@dataclass
class ClampCounter:
    """Positions seen and clamped by the most recent forward, for the probe's records."""

    last_positions: int = 0
    last_clamped: int = 0

    def add(self, positions: int, clamped: int) -> None:
        """Count one forward."""
        self.last_positions, self.last_clamped = positions, clamped


class LearnedPositions(torch.nn.Module):
    """The (N, hidden) table; `forward(position_ids)` returns the rows, positions >= N clamped to N - 1."""

    def __init__(self, n_positions: int, hidden: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_positions, hidden) * init_std)
        self.counter = ClampCounter()

    @property
    def n_positions(self) -> int:
        """Rows of the table (the trained positions 0..N-1)."""
        return self.weight.shape[0]

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        """Rows of `position_ids` (any shape), clamped to the table; the clamp is counted."""
        last = self.n_positions - 1
        self.counter.add(int(position_ids.numel()), int((position_ids > last).sum()))
        return torch.nn.functional.embedding(position_ids.clamp(min=0, max=last), self.weight)


def _positions(decoder: Any, kwargs: dict[str, Any], length: int, device: torch.device) -> torch.Tensor:
    """The decoder's own position ids: the given ones, else the cache length + 0..length-1 (as LlamaModel does)."""
    if kwargs.get("position_ids") is not None:
        return kwargs["position_ids"]
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    past = cache.get_seq_length() if cache is not None else 0
    return (torch.arange(length, device=device) + past).unsqueeze(0)


def _add_positions(decoder: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Forward pre-hook: replace input_ids by inputs_embeds = token embedding + table[position]."""
    kwargs = dict(kwargs)
    if args:  # input_ids passed positionally
        kwargs["input_ids"], args = args[0], args[1:]
    ids, embeds = kwargs.get("input_ids"), kwargs.get("inputs_embeds")
    if embeds is None:
        if ids is None:
            return args, kwargs  # the decoder raises its own error
        embeds = decoder.embed_tokens(ids)
    pos = _positions(decoder, kwargs, embeds.shape[1], embeds.device)
    kwargs["input_ids"] = None
    kwargs["inputs_embeds"] = embeds + decoder.learned_positions(pos).to(embeds.dtype)
    return args, kwargs


def add_learned_positions(model: Any, n_positions: int, init_std: float = 0.02) -> LearnedPositions:
    """Give a RoPE-free Llama a fresh table (training) and the hook that adds it; returns the table."""
    decoder = model.base_model
    rope = dict(getattr(model.config, "rope_parameters", None) or {})
    if rope.get("partial_rotary_factor", 1.0) != 0.0:
        raise ValueError(
            f"learned positions need RoPE disabled (rope_type 'proportional', partial_rotary_factor 0); "
            f"the config has rope_parameters={rope}"
        )
    if getattr(decoder, "learned_positions", None) is not None:
        raise ValueError("the model already has learned positions attached")
    table = LearnedPositions(n_positions, model.config.hidden_size, init_std)
    decoder.learned_positions = table
    decoder.register_forward_pre_hook(_add_positions, with_kwargs=True)
    model.config.learned_position_embeddings = n_positions
    return table


def attach_learned_positions(model: Any, folder: Path | None) -> LearnedPositions | None:
    """Load `learned_positions.safetensors` into a model whose config names a table; None for other models."""
    n = getattr(model.config, CONFIG_KEY, None)
    if n is None:
        return None
    path = Path(folder) / TABLE_FILE if folder is not None else None
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"config.json sets {CONFIG_KEY}={n} but {path or TABLE_FILE} is missing; "
            f"expected the learned position table beside model.safetensors"
        )
    from safetensors.torch import load_file

    weight = load_file(str(path))["weight"]
    if tuple(weight.shape) != (int(n), model.config.hidden_size):
        raise ValueError(f"{path}: table shape {tuple(weight.shape)}, expected ({n}, {model.config.hidden_size})")
    table = add_learned_positions(model, int(n))
    param = model.base_model.embed_tokens.weight  # the table is added to these embeddings, on their device
    with torch.no_grad():
        table.weight.copy_(weight.to(dtype=param.dtype))
    table.to(param.device)
    table.requires_grad_(False)
    return table


def save_learned_positions(model: Any, folder: Path) -> None:
    """Write the table to folder/learned_positions.safetensors (save_pretrained must not see it: detach first)."""
    from safetensors.torch import save_file

    save_file({"weight": model.base_model.learned_positions.weight.detach().contiguous()}, str(folder / TABLE_FILE))


def learned_positions(model: Any) -> LearnedPositions | None:
    """The attached table, or None."""
    return getattr(model.base_model, "learned_positions", None)


def clamp_record(model: Any) -> dict[str, Any]:
    """For the probe's prediction data: table size and the share of positions clamped in the last forward."""
    table = learned_positions(model)
    if table is None:
        return {}
    c = table.counter
    return {
        "pe_table": table.n_positions,
        "pe_clamped_share": c.last_clamped / c.last_positions if c.last_positions else 0.0,
    }


def settings(model: Any) -> dict[str, Any]:
    """What the run records about the model's learned positions ({} without a table)."""
    table = learned_positions(model)
    if table is None:
        return {}
    return {"learned_positions": table.n_positions, "beyond_table": BEYOND_TABLE}
