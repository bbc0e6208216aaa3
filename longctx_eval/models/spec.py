"""The model-spec grammar `KIND[:TARGET][?key=value&...]` and the embedded short names.

    hf:<path-or-hub-id>[?dtype=float32&max_length=8192&chat=auto&revision=main&gguf_file=F&batch_size=1]
    retriever:<sentence-transformers path | minilm>[?batch_size=64&device=cpu]
    bm25[?k1=1.5&b=0.75]
    oracle
Short names: smollm2-135m, minilm, bm25, oracle, and the position-encoding references tiny-rope,
tiny-rope-{linear,dynamic,yarn,yarn-notemp}, tiny-alibi; `default` = minilm,bm25,smollm2-135m.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from longctx_eval.errors import ConfigError, did_you_mean
from longctx_eval.models.base import ModelAdapter


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: the adapter kind, its target (path, hub id, packaged name) and its options."""

    raw: str
    kind: str
    target: str
    options: dict[str, str]
    name: str


@dataclass(frozen=True)
class AdapterKind:
    """One adapter family: which options it accepts and how to load it."""

    kind: str
    options: frozenset[str]
    needs_target: bool
    load: Callable[[ModelSpec], ModelAdapter]
    example: str


EMBEDDED = {
    "smollm2-135m": "hf:smollm2-135m",
    "minilm": "retriever:minilm",
    "bm25": "bm25",
    "oracle": "oracle",
    # Position-encoding references (reference_models/): probed far past their 128-token training window,
    # hence the large max_length; each RoPE variant is its own name so runs and leaderboard rows stay apart.
    "tiny-rope": "hf:tiny-rope?max_length=65536",
    "tiny-rope-linear": "hf:tiny-rope?rope=linear&max_length=65536",
    "tiny-rope-dynamic": "hf:tiny-rope?rope=dynamic&max_length=65536",
    "tiny-rope-yarn": "hf:tiny-rope?rope=yarn&max_length=65536",
    "tiny-rope-yarn-notemp": "hf:tiny-rope?rope=yarn_notemp&max_length=65536",
    "tiny-alibi": "hf:tiny-alibi?max_length=65536",
}
DEFAULT_MODELS = ("minilm", "bm25", "smollm2-135m")
_KINDS: dict[str, AdapterKind] = {}


def register_kind(kind: AdapterKind) -> None:
    """Make an adapter family available to the spec grammar."""
    _KINDS[kind.kind] = kind


def known_forms() -> str:
    """One line listing every adapter form and short name, for error messages."""
    forms = [k.example for k in sorted(_KINDS.values(), key=lambda k: k.kind)]
    return f"known adapters: {', '.join(forms)}; short names: {', '.join(EMBEDDED)}"


def parse_spec(raw: str) -> ModelSpec:
    """Parse one spec; an unknown kind, a missing target or an unknown option is a one-line ConfigError."""
    _ensure_builtin_kinds()
    text = raw.strip()
    if not text:
        raise ConfigError(f"empty model spec; {known_forms()}")
    short = text.split("?", 1)[0]
    name = short if short in EMBEDDED else None
    if name:
        extra = text[len(short) + 1 :] if "?" in text else ""
        base = EMBEDDED[short]
        text = base + (("&" if "?" in base else "?") + extra if extra else "")
    body, _, query = text.partition("?")
    kind, sep, target = body.partition(":")
    if kind not in _KINDS:
        raise ConfigError(f"unknown model spec {raw!r}.{did_you_mean(kind, [*_KINDS, *EMBEDDED])} {known_forms()}")
    adapter = _KINDS[kind]
    if adapter.needs_target and not target:
        raise ConfigError(f"model spec {raw!r} lacks a target; expected {adapter.example}")
    if not adapter.needs_target and sep:
        raise ConfigError(f"model spec {raw!r}: {kind!r} takes no ':target'; expected {adapter.example}")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigError(f"model spec {raw!r}: malformed options {query!r}; expected key=value&key=value") from None
    options = dict(pairs)
    for key in options:
        if key not in adapter.options:
            hint = did_you_mean(key, adapter.options)
            raise ConfigError(f"model spec {raw!r}: unknown option {key!r} for {kind!r}.{hint}")
    if name:
        display = name
    elif kind in ("hf", "retriever"):  # a path or hub id: its last component names the model
        display = target.rstrip("/").rsplit("/", 1)[-1]
    else:
        display = f"{kind}-{target}" if target else kind
    return ModelSpec(raw=raw.strip(), kind=kind, target=target, options=options, name=display)


def expand_models(arg: str) -> list[str]:
    """Split a comma-separated --model argument; `default` expands to the embedded default systems."""
    specs = [s.strip() for s in arg.split(",") if s.strip()]
    out: list[str] = []
    for s in specs:
        out.extend(DEFAULT_MODELS if s == "default" else [s])
    if not out:
        raise ConfigError(f"--model is empty; {known_forms()}")
    return out


def load_model(raw: str) -> ModelAdapter:
    """Parse a spec and load its adapter."""
    spec = parse_spec(raw)
    return _KINDS[spec.kind].load(spec)


def option_int(spec: ModelSpec, key: str, default: int | None) -> int | None:
    """An integer option, with an error naming the spec and key when it is not one."""
    if key not in spec.options:
        return default
    try:
        return int(spec.options[key])
    except ValueError:
        raise ConfigError(f"model spec {spec.raw!r}: option {key}={spec.options[key]!r} is not an integer") from None


def option_float(spec: ModelSpec, key: str, default: float) -> float:
    """A float option, with an error naming the spec and key when it is not one."""
    if key not in spec.options:
        return default
    try:
        return float(spec.options[key])
    except ValueError:
        raise ConfigError(f"model spec {spec.raw!r}: option {key}={spec.options[key]!r} is not a number") from None


def _ensure_builtin_kinds() -> None:
    if not _KINDS:
        from longctx_eval.models import builtin  # noqa: F401  (registers hf, retriever, bm25, oracle)
