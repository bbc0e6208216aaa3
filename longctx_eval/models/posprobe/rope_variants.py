"""Inference-time RoPE variants of the same weights, applied through the model config's rope parameters.

With no fixed factor the scale is s = max(1, L / L_train) for a sequence of L tokens, so every variant is the
unscaled model inside the training window and stretches exactly to the evaluated length beyond it.
`ntk` (static NTK-aware scaling) has no HF rope type of its own: `rope_applied` turns it into plain RoPE with
the base theta * alpha^(d / (d - 2)), d the rotary dimension, alpha = s.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, get_args

import torch

from longctx_eval.errors import ConfigError
from longctx_eval.models.options import RopeVariant

VARIANTS: tuple[str, ...] = get_args(RopeVariant)


def variant_parameters(
    base: dict[str, Any], variant: str, length: int, train_length: int, factor: float | None = None
) -> dict[str, Any]:
    """The rope_parameters dict of `variant` for a sequence of `length` tokens (`base` for 'none')."""
    if variant not in VARIANTS:
        raise ConfigError(f"rope variant {variant!r} is unknown; expected one of {', '.join(VARIANTS)}")
    if variant == "none":
        return dict(base)
    s = float(factor) if factor is not None else max(1.0, length / train_length)
    params = {k: v for k, v in base.items() if k in ("rope_theta", "partial_rotary_factor")}
    if variant == "linear":
        return {**params, "rope_type": "linear", "factor": s}
    if variant == "ntk":
        return {**params, "rope_type": "ntk", "factor": s}
    if variant == "dynamic":
        # HF's dynamic NTK rescales the base from the live sequence length; factor 1 gives plain NTK-aware
        # scaling with s = L / L_train (identical to static NTK for one full forward pass). L_train reaches it
        # through `rope_applied(..., train_length=...)`: HF reads it from max_position_embeddings.
        return {**params, "rope_type": "dynamic", "factor": float(factor) if factor is not None else 1.0}
    yarn = {**params, "rope_type": "yarn", "factor": s, "original_max_position_embeddings": train_length}
    if variant == "yarn_notemp":
        yarn["attention_factor"] = 1.0  # YaRN's sqrt(1/t) = 0.1 ln s + 1 temperature switched off
    return yarn


def rotary_dim(config: Any) -> int:
    """The number of rotated dimensions per head: head_dim x partial_rotary_factor (as HF's RoPE functions)."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return int(head_dim * dict(config.rope_parameters or {}).get("partial_rotary_factor", 1.0))


def ntk_theta(theta: float, alpha: float, dim: int) -> float:
    """Static NTK-aware base: theta * alpha^(d / (d - 2)), so the lowest frequency is stretched by alpha."""
    if dim <= 2 or alpha < 1.0:
        raise ConfigError(f"rope=ntk needs a rotary dimension > 2 and alpha >= 1; got d={dim}, alpha={alpha}")
    return float(theta) * float(alpha) ** (dim / (dim - 2))


def hf_parameters(config: Any, parameters: dict[str, Any]) -> dict[str, Any]:
    """The rope_parameters transformers understands: `ntk` becomes plain RoPE with the NTK-scaled base."""
    if parameters.get("rope_type") != "ntk":
        return parameters
    plain = {k: v for k, v in parameters.items() if k not in ("rope_type", "factor")}
    theta = ntk_theta(parameters["rope_theta"], parameters["factor"], rotary_dim(config))
    return {**plain, "rope_type": "default", "rope_theta": theta}


def check_variant(config: Any, variant: str) -> None:
    """A variant other than 'none' needs plain RoPE to rescale; ALiBi and already-scaled models are refused."""
    if variant == "none":
        return
    rope = dict(getattr(config, "rope_parameters", None) or {})
    if getattr(config, "alibi_slopes", None) is not None or rope.get("rope_type", "default") != "default":
        raise ConfigError(
            f"rope={variant}: the model's position encoding is {rope.get('rope_type', 'unknown')!r}"
            f"{' with ALiBi' if getattr(config, 'alibi_slopes', None) else ''}; RoPE variants need rope_type "
            "'default' (plain RoPE). Use rope=none"
        )
    if variant not in VARIANTS:
        raise ConfigError(f"rope={variant!r} is unknown; expected one of {', '.join(VARIANTS)}")


@contextmanager
def rope_applied(model: Any, parameters: dict[str, Any], train_length: int | None = None) -> Iterator[None]:
    """Within the block the model's rotary embedding uses `parameters` (a fresh module; restored after).

    For `dynamic`, `train_length` is the window the NTK alpha is measured against (HF takes it from
    `max_position_embeddings`, so a model trained on fewer tokens than its config states is scaled from there).
    """
    base = model.base_model
    original = getattr(base, "rotary_emb", None)
    if original is None:
        raise ConfigError(f"{type(model).__name__} has no `rotary_emb`; RoPE variants cannot be applied to it")
    dynamic_window = train_length if parameters.get("rope_type") == "dynamic" else None
    parameters = hf_parameters(model.config, parameters)
    if dict(model.config.rope_parameters) == parameters and dynamic_window is None:
        yield
        return
    cfg = copy.deepcopy(model.config)
    cfg.rope_parameters = parameters
    if dynamic_window is not None:
        cfg.max_position_embeddings = dynamic_window
    with torch.device(_rotary_device(model, original)):  # built where the model's positions are computed
        base.rotary_emb = type(original)(cfg)
    try:
        yield
    finally:
        base.rotary_emb = original


def _rotary_device(model: Any, rotary: torch.nn.Module) -> torch.device:
    """The device of the model's rotary embedding (its inv_freq buffer; under device_map, the first layer's)."""
    buf = getattr(rotary, "inv_freq", None)
    if isinstance(buf, torch.Tensor):
        return buf.device
    return next(model.parameters()).device
