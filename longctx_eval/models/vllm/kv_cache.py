"""The memory `vllm:` asks vLLM to reserve for its KV cache, who chose it, and the one-line refusal when it is not free.

On CPU vLLM's default (gpu_memory_utilization 0.92 of the memory node) refuses to start once a few GB of the machine
are in use; unless the spec sets gpu_memory_utilization or the environment VLLM_CPU_KVCACHE_SPACE, the suite asks for
the KV cache of KV_SEQUENCES sequences as long as the window (kv_cache_memory_bytes). On a GPU vLLM's default holds.
Imports no vLLM: the arithmetic is testable without the engine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from longctx_eval.errors import ConfigError
from longctx_eval.models.options import VLLMOptions

KV_SEQUENCES = 4
"""Sequences as long as the window that the suite's reservation holds at once (shorter prompts: proportionally more);
vLLM itself refuses to start with room for less than one."""
KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
"""vLLM's CPU setting: the KV cache in GiB (an integer); when set it replaces any other reservation."""
GIB = 1 << 30
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class Reservation:
    """What the engine is asked to reserve: `chosen_by` suite, spec (gpu_memory_utilization), VLLM_CPU_KVCACHE_SPACE
    or vllm (its default); `kv_bytes` the KV cache asked for where it is a size, `sized_for` how the suite sized it."""

    chosen_by: str
    kv_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    sized_for: dict[str, int] | None = None

    def engine_kwargs(self) -> dict[str, Any]:
        """The LLM(...) keyword the suite adds: kv_cache_memory_bytes, only for its own choice."""
        return {"kv_cache_memory_bytes": self.kv_bytes} if self.chosen_by == "suite" else {}


def kv_bytes_per_token(config: Any, dtype: str) -> int:
    """KV-cache bytes one token takes over all layers: K and V of each KV head (MLA: one latent), at the model's dtype
    (`auto`: the config's). Sliding-window layers count as full ones (an upper bound)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    size = DTYPE_BYTES.get(dtype) or DTYPE_BYTES.get(str(getattr(text, "dtype", None)).removeprefix("torch."), 4)
    layers = int(text.num_hidden_layers)
    if getattr(text, "kv_lora_rank", None):  # multi-head latent attention: one compressed entry per token and layer
        return layers * (int(text.kv_lora_rank) + int(text.qk_rope_head_dim)) * size
    heads = int(getattr(text, "num_key_value_heads", None) or text.num_attention_heads)
    head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads)
    return 2 * layers * heads * head_dim * size


def context_window(o: VLLMOptions, config: Any, rope: dict[str, Any] | None) -> int:
    """The window vLLM will run at: max_model_len, else the RoPE override's (settings.rope_override), else the
    config's max_position_embeddings."""
    if o.max_model_len is not None:
        return o.max_model_len
    if rope is not None:
        stretch = rope["rope_parameters"].get("factor", 1.0) if o.rope in ("linear", "dynamic") else 1.0
        return math.ceil(rope["max_position_embeddings"] * stretch)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text.max_position_embeddings)


def plan_reservation(
    o: VLLMOptions, config: Any, rope: dict[str, Any] | None, *, cpu: bool, environ: Mapping[str, str]
) -> Reservation:
    """Who sizes the KV cache: VLLM_CPU_KVCACHE_SPACE (CPU), else the spec's gpu_memory_utilization, else on CPU the
    suite (KV_SEQUENCES x the window x bytes per token), else vLLM's default."""
    if cpu and environ.get(KV_ENV, "") != "":
        value = environ[KV_ENV]
        if not value.isdigit():
            raise ConfigError(f"{KV_ENV}={value!r} is invalid; expected a whole number of GiB (vLLM's KV cache on CPU)")
        return Reservation(KV_ENV, kv_bytes=int(value) * GIB)
    if o.gpu_memory_utilization is not None:
        return Reservation("spec", gpu_memory_utilization=o.gpu_memory_utilization)
    return suite_reservation(o, config, rope) if cpu else Reservation("vllm")


def suite_reservation(o: VLLMOptions, config: Any, rope: dict[str, Any] | None) -> Reservation:
    """The suite's own choice: the KV cache of KV_SEQUENCES sequences as long as the window."""
    window, per_token = context_window(o, config, rope), kv_bytes_per_token(config, o.dtype)
    sized_for = {"sequences": KV_SEQUENCES, "tokens_each": window, "bytes_per_token": per_token}
    return Reservation("suite", kv_bytes=KV_SEQUENCES * window * per_token, sized_for=sized_for)


def memory_refusal(plan: Reservation, suite: Reservation, total: int, available: int) -> str | None:
    """The one-line refusal when the CPU memory node cannot give what `plan` asks (vLLM's own startup check, made
    before the engine starts); None when it can. `suite` is what the suite reserves when left to choose."""
    free = f"{available / GIB:.2f} GiB of this memory node's {total / GIB:.2f} GiB are free"
    fallback = f"leave it unset (the suite then reserves {(suite.kv_bytes or 0) / GIB:.2f} GiB of KV cache)"
    if plan.chosen_by == "spec" and plan.gpu_memory_utilization is not None:
        asked = math.ceil(total * plan.gpu_memory_utilization)
        if asked <= available:
            return None
        fits = math.floor(100 * available / total) / 100
        lower = f"set gpu_memory_utilization={fits:g} or lower, or " if fits > 0 else ""
        return (
            f"gpu_memory_utilization={plan.gpu_memory_utilization:g} asks vLLM on CPU to reserve "
            f"{asked / GIB:.2f} GiB and {free}; {lower}{fallback}"
        )
    if plan.kv_bytes is None or plan.kv_bytes <= available:
        return None
    if plan.chosen_by == KV_ENV:
        return f"{KV_ENV}={plan.kv_bytes // GIB} asks for that many GiB of KV cache and {free}; lower it, or {fallback}"
    sized = plan.sized_for or {}
    return (
        f"the KV cache for {sized.get('sequences')} sequences of {sized.get('tokens_each')} tokens "
        f"({plan.kv_bytes / GIB:.2f} GiB) is more than the {available / GIB:.2f} GiB free on this memory node; set "
        f"max_model_len=N (a shorter window), or {KV_ENV}=GiB, or gpu_memory_utilization=F (vLLM's share of the node)"
    )


def recorded(plan: Reservation, blocks: int | None, block_size: int, utilization: float) -> dict[str, Any]:
    """The run file's model.runtime.kv_cache: who chose the reservation, what was asked (bytes, or the share of memory)
    and what vLLM allocated (blocks of block_size tokens)."""
    out: dict[str, Any] = {"chosen_by": plan.chosen_by}
    if plan.kv_bytes is not None:
        out["requested_bytes"] = plan.kv_bytes
    else:
        out["gpu_memory_utilization"] = utilization
    if plan.sized_for is not None:
        out["sized_for"] = plan.sized_for
    if blocks is not None:
        out["blocks"] = int(blocks)
        out["tokens"] = int(blocks) * block_size
    return out
