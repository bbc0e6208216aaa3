"""What an `hf:` model is loaded with, decided from its config alone (no weights read): the RoPE parameters the
rope options set, the context window and why, and the refusals that must come before loading.

RoPE scaling applies to generation and the probe alike:
- `rope=X&rope_factor=F` (static): the config's rope parameters are set to the variant's before the weights load,
  as transformers and vLLM apply linear, dynamic, YaRN and static NTK (`rope_parameters`), so generation, the
  probe and the prefix cache all see the same positions. The window becomes F x the original window (the
  training length: `train_length`, else `max_position_embeddings`) unless `max_length` says otherwise.
- `rope=X` without a factor (per length): the probe's own definition, s = max(1, L / L_train) for a sequence of
  L tokens; generation applies it per request (L = prompt + generation budget) and the prefix cache is off,
  since a prefix's keys then depend on the length of the prompt around it. The window is `max_length` or the
  config's.
`rope=` on a model without RoPE (GPT-2, OPT: learned positions; BLOOM: ALiBi), and `max_length` past a learned
position table, are one-line ConfigErrors here, before any weight is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longctx_eval.errors import ConfigError
from longctx_eval.models.attention_layout import attention_layout, source_defaulted
from longctx_eval.models.model_source import load_error
from longctx_eval.models.options import HFOptions
from longctx_eval.models.posprobe.rope_variants import check_variant, hf_parameters, variant_parameters
from longctx_eval.models.references import reference_meta

DEFAULT_TRAIN_LENGTH = 2048
"""Training window assumed when neither the options, a reference.json nor the config state one."""


@dataclass(frozen=True)
class RopePlan:
    """The RoPE variant of a run: the checkpoint's own parameters, and those loaded into the config (static)."""

    variant: str = "none"
    factor: float | None = None
    train_length: int = DEFAULT_TRAIN_LENGTH
    base: dict[str, Any] = field(default_factory=dict)
    """The checkpoint's rope parameters, unscaled (the probe's "variant off" and its per-length base)."""
    static: dict[str, Any] | None = None
    """What the config carries at load when a factor is given (transformers' form), else None."""

    @property
    def scaling(self) -> str:
        """none, static (set before loading) or per_length (s = max(1, L / train_length) per sequence)."""
        if self.variant == "none":
            return "none"
        return "static" if self.static is not None else "per_length"

    def parameters_for(self, length: int) -> dict[str, Any]:
        """The rope parameters (suite form, `ntk` unconverted) the variant uses for a sequence of `length` tokens."""
        return variant_parameters(self.base, self.variant, length, self.train_length, self.factor)

    def record(self) -> dict[str, Any]:
        """What the run file says about it."""
        out: dict[str, Any] = {
            "variant": self.variant,
            "factor": self.factor,
            "train_length": self.train_length,
            "scaling": self.scaling,
            "applies_to": "generation, probe and prefix cache" if self.variant != "none" else "nothing",
        }
        if self.static is not None:
            out["config_rope_parameters"] = self.static
        elif self.variant != "none":
            out["rule"] = "s = max(1, L / train_length), L = prompt + generation budget (probe: sequence length)"
        return out


@dataclass(frozen=True)
class WindowPlan:
    """The context window (prompt + generation tokens) and the reason it is that."""

    tokens: int | None
    source: str

    def record(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "source": self.source}


@dataclass
class LoadPlan:
    """The config to load with (rope already applied), and what was decided from it."""

    config: Any
    rope: RopePlan
    window: WindowPlan
    learned_table: int | None = None
    config_dtype: str | None = None
    attention: dict[str, Any] = field(default_factory=dict)
    """The attention layout (models/attention_layout.py): per layer type its count, window and RoPE parameters."""


def _text_config(config: Any) -> Any:
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _rope_parameters(text: Any) -> dict[str, Any]:
    params = getattr(text, "rope_parameters", None)
    return dict(params) if params else {}


def learned_table_size(config: Any) -> int | None:
    """Rows of a learned absolute position table (GPT-2's `wpe`, OPT's `embed_positions`), found on a meta-device
    instance of the architecture (no memory, no weights); None when the model has none or cannot be built so."""
    import torch
    from transformers import AutoModelForCausalLM

    limit = getattr(_text_config(config), "max_position_embeddings", None)
    if not limit:
        return None
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception:  # an architecture that cannot be built from its config alone: no check, as before
        return None
    tokens = model.get_input_embeddings()
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding) and module is not tokens:
            rows = module.num_embeddings - int(getattr(module, "offset", 0) or 0)
            if rows == limit:
                return rows
    return None


def _position_kind(text: Any, table: int | None) -> str:
    if table is not None:
        return f"learned absolute positions (a table of {table})"
    if getattr(text, "alibi_slopes", None) is not None or getattr(text, "model_type", "") in ("bloom", "mpt", "falcon"):
        return "ALiBi"
    return "no RoPE parameters in its config"


def plan_load(spec_raw: str, options: HFOptions, source: Path | str, kwargs: dict[str, Any]) -> LoadPlan:
    """Read the config (no weights), refuse what cannot run, and set the rope parameters the options ask for."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(source), **kwargs)
    except (OSError, ValueError) as exc:
        raise load_error(str(source), exc) from exc
    text = _text_config(config)
    folder = Path(str(source)) if Path(str(source)).is_dir() else None
    meta = reference_meta(folder) if folder is not None else None
    config_window = getattr(text, "max_position_embeddings", None)
    train_length = int(
        options.train_length or (meta or {}).get("train_length") or config_window or DEFAULT_TRAIN_LENGTH
    )
    base = _rope_parameters(text)
    variant = options.rope
    model_type = getattr(text, "model_type", type(text).__name__)
    table = None
    if not base and (variant != "none" or options.max_length):
        table = learned_table_size(config)
    if variant != "none":
        if not base:
            raise ConfigError(
                f"model spec {spec_raw!r}: rope={variant}, but {model_type} has no rotary position embedding "
                f"({_position_kind(text, table)}); RoPE scaling applies to RoPE models only. Use rope=none"
            )
        if all(isinstance(v, dict) for v in base.values()):
            raise ConfigError(
                f"model spec {spec_raw!r}: rope={variant}, but {model_type} has RoPE parameters per attention type "
                f"({', '.join(base)}); the rope option scales one set. Use rope=none"
            )
        check_variant(text, variant)
    if table is not None and options.max_length and options.max_length > table:
        raise ConfigError(
            f"model spec {spec_raw!r}: max_length={options.max_length} is past {model_type}'s learned position table "
            f"({table} positions): later positions have no embedding. Use max_length <= {table}"
        )
    static = None
    if variant != "none" and options.rope_factor is not None:
        suite_form = variant_parameters(base, variant, train_length, train_length, options.rope_factor)
        static = hf_parameters(text, suite_form)
        text.rope_parameters = dict(static)
        if variant == "dynamic" and config_window and config_window != train_length:
            text.max_position_embeddings = train_length  # HF's dynamic NTK measures the length against it
    rope = RopePlan(variant, options.rope_factor, train_length, base, static)
    window = _window(options, rope, config_window, table, "train_length" in options.model_fields_set)
    dtype = getattr(config, "dtype", None) or getattr(text, "dtype", None)
    layout = attention_layout(config, source_defaulted(config, source, kwargs.get("gguf_file")))
    return LoadPlan(config, rope, window, table, str(dtype).removeprefix("torch.") if dtype else None, layout)


def _window(
    options: HFOptions, rope: RopePlan, config_window: int | None, table: int | None, given: bool
) -> WindowPlan:
    if options.max_length:
        return WindowPlan(options.max_length, "max_length option")
    if rope.static is not None:
        original = "train_length option" if given else "the config's max_position_embeddings"
        tokens = int(round(float(rope.factor or 1.0) * rope.train_length))
        return WindowPlan(
            tokens,
            f"rope={rope.variant} rope_factor={rope.factor:g} x original window {rope.train_length} ({original})",
        )
    if table is not None:
        return WindowPlan(table, "learned position table")
    if config_window:
        return WindowPlan(int(config_window), "the config's max_position_embeddings")
    return WindowPlan(None, "the config states no window (e.g. ALiBi): no limit")
