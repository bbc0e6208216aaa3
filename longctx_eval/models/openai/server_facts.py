"""What a served model's server says about itself before any task: its context window and how many requests it
serves at once (its slots), each with where it was read.

vLLM's `/v1/models` gives `max_model_len`; llama.cpp's `llama-server` gives `GET /props`
(`default_generation_settings.n_ctx`: the tokens of one slot, and `total_slots`). llama-cpp-python's server and hosted
APIs report neither: the window then comes from `max_length=` or the table of known models, the slots from
`max_in_flight=` (docs/served.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServerFacts:
    """A server's own figures (None where it reports none) and the endpoint each was read from."""

    window: int | None = None
    window_source: str | None = None
    slots: int | None = None
    slots_source: str | None = None

    def record(self) -> dict[str, Any]:
        """What the run file's `model.runtime.server` says."""
        return {
            "window": self.window,
            "window_source": self.window_source,
            "slots": self.slots,
            "slots_source": self.slots_source,
        }


WINDOW_KEYS = ("max_model_len", "context_length", "context_window", "n_ctx")
"""Fields of a `/v1/models` entry that state the served window (vLLM, SGLang, `longctx-eval serve`, others)."""


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def window_of_models(entries: list[dict[str, Any]], model: str) -> tuple[int, str] | None:
    """The window a `/v1/models` entry of `model` states, and the field it was read from."""
    for m in entries:
        if m.get("id") == model:
            for k in WINDOW_KEYS:
                if _positive(m.get(k)):
                    return int(m[k]), f"/v1/models {k}"
    return None


def facts_of_props(props: dict[str, Any]) -> ServerFacts:
    """llama.cpp's `/props`: the per-slot window (`default_generation_settings.n_ctx`, else a top-level `n_ctx`) and
    `total_slots`."""
    settings = props.get("default_generation_settings")
    n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    source = "/props default_generation_settings.n_ctx"
    if n_ctx is None and _positive(props.get("n_ctx")):
        n_ctx, source = int(props["n_ctx"]), "/props n_ctx"
    slots = _positive(props.get("total_slots"))
    return ServerFacts(
        window=n_ctx,
        window_source=source if n_ctx else None,
        slots=slots,
        slots_source="/props total_slots" if slots else None,
    )


def combined(models: tuple[int, str] | None, props: ServerFacts) -> ServerFacts:
    """`/v1/models`' window where it states one (the model's own entry), else `/props`'; slots from `/props`."""
    if models is None:
        return props
    return ServerFacts(models[0], models[1], props.slots, props.slots_source)


def smallest(facts: list[ServerFacts]) -> ServerFacts:
    """Several servers of one model: the smallest window and the fewest slots any of them reports."""
    windows = [f for f in facts if f.window is not None]
    slots = [f for f in facts if f.slots is not None]
    w = min(windows, key=lambda f: f.window or 0) if windows else ServerFacts()
    s = min(slots, key=lambda f: f.slots or 0) if slots else ServerFacts()
    return ServerFacts(w.window, w.window_source, s.slots, s.slots_source)


@dataclass(frozen=True)
class WindowSource:
    """The window prompts are checked against (prompt + answer budget + thinking budget), and why it is that."""

    tokens: int | None
    source: str

    def record(self) -> dict[str, Any]:
        """The run file's `model.runtime.window` (as `hf:` records it)."""
        return {"tokens": self.tokens, "source": self.source}


def served_window(max_length: int | None, facts: ServerFacts, known: int | None) -> WindowSource:
    """`max_length=` when given, else what the server reports, else the known-model table's; else no limit."""
    if max_length:
        return WindowSource(max_length, "max_length option")
    if facts.window is not None:
        return WindowSource(facts.window, f"the server's {facts.window_source}")
    if known is not None:
        return WindowSource(known, "the table of known hosted models")
    return WindowSource(None, "none stated: the server reports no window and no max_length was given")
