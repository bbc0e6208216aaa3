"""Whether a loaded transformers model can serve the position probe (`attention`), answered from its class and
config before any request is sent, so a refused architecture is one skip with its reason, never a failure
per sample.

The probe captures exact attention rows through a registered AttentionInterface function over one unpadded
causal sequence and sets positions through the model's rotary embedding (`models/posprobe/forward.py`,
`attention_rows.py`, `rope_variants.py`); each check below names the part of that path a model lacks.
"""

from __future__ import annotations

from typing import Any

from longctx_eval.models.attention_layout import global_layers, text_config


def sliding_window_of(config: Any) -> int | None:
    """The sliding window EVERY layer of the model attends through, None when some layer has full attention.

    Qwen2-style configs name the window per layer (`layer_types`); Mistral-style ones apply `sliding_window`
    to every layer. A hybrid model (Gemma 3: sliding layers and global ones) is probed on its global layers."""
    window = getattr(text_config(config), "sliding_window", None)
    if not window or global_layers(config):
        return None
    return int(window)


def probe_refusal(model: Any) -> str | None:
    """Why the position probe cannot run on `model` (a loaded transformers causal LM), None when it can."""
    name = type(model).__name__
    can_dispatch = getattr(type(model), "_can_set_attn_implementation", None)
    if can_dispatch is None or not can_dispatch():
        return (
            f"{name} does not dispatch attention through transformers' AttentionInterface, so its exact rows "
            "cannot be probed; expected e.g. a Llama, Qwen2 or Mistral-family model"
        )
    config = model.config
    window = sliding_window_of(config)
    if window is not None:
        return (
            f"{name} attends through a sliding window of {window} tokens in every layer; the probe needs full causal "
            "attention rows in at least one layer (a hybrid model is probed on its full-attention layers)"
        )
    has_rotary = getattr(model.base_model, "rotary_emb", None) is not None
    if not has_rotary and getattr(config, "alibi_slopes", None) is None:
        return (
            f"{name} has no rotary position embedding (learned absolute positions); the probe sets positions "
            "through RoPE (plain or with a variant), expected e.g. a Llama, Qwen2, Mistral or GPT-NeoX-family model"
        )
    return None
