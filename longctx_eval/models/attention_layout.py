"""The attention layout of a transformers config: per layer type its count, window and RoPE parameters, and which of
those values came from the library's defaults rather than the model's own files.

A hybrid model (Gemma 3: 15 of 18 layers sliding at 512 tokens, RoPE base 1e4; 3 global layers at 1e6) and a
full-attention model of the same window are different systems; the run file records this (`model.runtime.attention`)
for `hf:` and `vllm:`, and the board's models table shows it (`sliding 512 in 15/18 layers`). Imports no torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FULL = "full_attention"
SLIDING = "sliding_attention"
LAYER_TYPE_KEYS = ("layer_types", "sliding_window_pattern", "_sliding_window_pattern", "use_sliding_window")
"""Config keys any of which states (or derives) the per-layer attention types in a config file."""
LOCAL_THETA_KEYS = ("rope_local_base_freq",)
"""Older config files' name for the sliding layers' RoPE base (Gemma 2/3 before per-type rope_parameters)."""


def text_config(config: Any) -> Any:
    """The text part of a (possibly multimodal) config."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def layer_types(config: Any) -> list[str]:
    """Each layer's attention type: the config's `layer_types`, else every layer sliding where the config names a
    sliding window it uses (Mistral-style), else every layer full attention."""
    text = text_config(config)
    n = int(getattr(text, "num_hidden_layers", 0) or 0)
    types = getattr(text, "layer_types", None)
    if types:
        return [str(t) for t in types]
    sliding = getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True) is not False
    return [SLIDING if sliding else FULL] * n


def global_layers(config: Any) -> list[int]:
    """Indices of the full-attention layers (every position attends to every earlier one)."""
    return [i for i, t in enumerate(layer_types(config)) if t == FULL]


def _window(text: Any, layer_type: str) -> int | None:
    if layer_type == SLIDING:
        window = getattr(text, "sliding_window", None)
        return int(window) if window else None
    if layer_type == "chunked_attention":
        chunk = getattr(text, "attention_chunk_size", None)
        return int(chunk) if chunk else None
    return None


def rope_of(config: Any, layer_type: str) -> dict[str, Any]:
    """The RoPE parameters a layer type uses (per-type parameters where the config has them, else the shared ones)."""
    params = dict(getattr(text_config(config), "rope_parameters", None) or {})
    if params and all(isinstance(v, dict) for v in params.values()):
        return dict(params.get(layer_type) or {})
    return params


def attention_layout(config: Any, defaulted: list[str] | None = None) -> dict[str, Any]:
    """{"layers", "types": {type: {"count", "window", "rope_theta"[, "rope"]}}, "global_layers", "defaulted"}.

    `defaulted` names the values the model's files did not state (None: not known, e.g. a hub id not cached)."""
    text = text_config(config)
    types = layer_types(config)
    out: dict[str, Any] = {}
    for kind in dict.fromkeys(types):
        rope = rope_of(config, kind)
        entry: dict[str, Any] = {"count": types.count(kind), "window": _window(text, kind)}
        entry["rope_theta"] = rope.get("rope_theta")
        scaled = {k: v for k, v in rope.items() if k != "rope_theta" and v is not None}
        if scaled.get("rope_type", "default") != "default":
            entry["rope"] = scaled
        out[kind] = entry
    return {"layers": len(types), "types": out, "global_layers": global_layers(config), "defaulted": defaulted}


def layout_defaulted(config: Any, raw: dict[str, Any]) -> list[str]:
    """The layout values of `config` that the file's own config dict `raw` does not state (transformers filled them
    from its defaults for the architecture): `layer_types`, `sliding_window`, each type's `rope_theta`."""
    text = text_config(config)
    raw = dict(raw.get("text_config") or raw) if isinstance(raw.get("text_config"), dict) else dict(raw)
    types = layer_types(config)
    out = []
    if getattr(text, "layer_types", None) and len(set(types)) > 1 and not any(k in raw for k in LAYER_TYPE_KEYS):
        out.append("layer_types")
    if SLIDING in types and "sliding_window" not in raw:
        out.append("sliding_window")
    file_rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    file_rope = file_rope if isinstance(file_rope, dict) else {}
    nested = bool(file_rope) and all(isinstance(v, dict) for v in file_rope.values())
    flat_theta = "rope_theta" in raw or (not nested and "rope_theta" in file_rope)
    params = dict(getattr(text, "rope_parameters", None) or {})
    if params and all(isinstance(v, dict) for v in params.values()):
        for kind in dict.fromkeys(types):
            stated = nested and "rope_theta" in (file_rope.get(kind) or {})
            stated = (
                stated or (kind == FULL and flat_theta) or (kind == SLIDING and any(k in raw for k in LOCAL_THETA_KEYS))
            )
            if not stated:
                out.append(f"rope_parameters.{kind}.rope_theta")
    elif params and not flat_theta:
        out.append("rope_theta")
    return out


def gguf_config(path: Path) -> dict[str, Any]:
    """The config fields a GGUF file itself holds (transformers' reading of its metadata; no tensor is read)."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    return dict(load_gguf_checkpoint(str(path), return_tensors=False).get("config") or {})


def source_defaulted(config: Any, source: Path | str, gguf_file: str | None = None) -> list[str] | None:
    """Which layout values the model's files leave to library defaults: a converted folder's record of its GGUF, the
    GGUF's own metadata, or the folder's config.json; None where the files cannot be read here (a hub id)."""
    folder = Path(str(source))
    if not folder.is_dir():
        return None
    marker = folder / "longctx_source.json"
    if marker.is_file():
        recorded = json.loads(marker.read_text(encoding="utf-8")).get("config_defaulted")
        return list(recorded) if isinstance(recorded, list) else None
    if gguf_file and (folder / gguf_file).is_file():
        return layout_defaulted(config, gguf_config(folder / gguf_file))
    path = folder / "config.json"
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return layout_defaulted(config, raw) if isinstance(raw, dict) else None
