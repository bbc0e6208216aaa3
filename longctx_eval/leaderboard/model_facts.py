"""What the board says about a model: its parameter count and its context window with the attention layout."""

from __future__ import annotations

from longctx_eval.results import ModelMeta
from longctx_eval.scoring.labels import DASH


def format_params(params: int | None) -> str:
    """134515008 -> '134.5M'."""
    if params is None:
        return DASH
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale:
            return f"{params / scale:.1f}{suffix}"
    return str(params)


def context_window_text(model: ModelMeta) -> str:
    """'8,192 tokens, full attention (why, from runtime.window.source)', '32,768 tokens, sliding 512 in 15/18 layers
    (...)' from runtime.attention where recorded, or 'none' for a model without a window (retrievers)."""
    if model.context_window is None:
        return "none"
    runtime = model.runtime if isinstance(model.runtime, dict) else {}
    window, layout = runtime.get("window"), runtime.get("attention")
    source = window.get("source") if isinstance(window, dict) else None
    layout = layout if isinstance(layout, dict) else {}
    types = layout.get("types")
    slides = [
        f"sliding {t['window']} in {t.get('count')}/{layout.get('layers')} layers"
        for t in (types.values() if isinstance(types, dict) else ())
        if isinstance(t, dict) and t.get("window")
    ]
    attention = (", ".join(slides) or "full attention") if isinstance(types, dict) else None
    text = f"{model.context_window:,} tokens" + (f", {attention}" if attention else "")
    return text + (f" ({source})" if source else "")
