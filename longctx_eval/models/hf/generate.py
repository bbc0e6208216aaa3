"""Greedy that is greedy, and what one `generate` call took: the `hf` adapter's (and `serve`'s) decoding settings.

transformers fills every generation field a call leaves unset from the model's generation_config.json (Qwen2.5
ships repetition_penalty 1.05), so passing do_sample=False is not enough. `neutral_generation_config` replaces the
model's generation config by one whose every sampling and penalty field is neutral (only the special token ids
are kept); the run file records the effective settings and each neutralised value the checkpoint shipped.
"""

from __future__ import annotations

import time
from typing import Any

from longctx_eval.models.devices import synchronize

NEUTRAL: dict[str, Any] = {
    "do_sample": False,
    "num_beams": 1,
    "num_beam_groups": 1,
    "num_return_sequences": 1,
    "temperature": 1.0,
    "top_k": None,
    "top_p": 1.0,
    "min_p": None,
    "top_h": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "length_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "bad_words_ids": None,
    "sequence_bias": None,
    "force_words_ids": None,
    "constraints": None,
    "min_length": 0,
    "min_new_tokens": None,
    "max_time": None,
    "stop_strings": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "exponential_decay_length_penalty": None,
    "renormalize_logits": False,
    "remove_invalid_values": False,
    "guidance_scale": None,
    "watermarking_config": None,
    "diversity_penalty": 0.0,
    "penalty_alpha": None,
    "dola_layers": None,
    "low_memory": None,
    "token_healing": False,
    "early_stopping": False,
    "cache_implementation": None,
    "prefill_chunk_size": None,
    "use_cache": True,
    "output_scores": False,
    "output_logits": False,
    "output_attentions": False,
    "output_hidden_states": False,
}
"""Every generation field that changes which token greedy decoding picks, or when it stops, at its neutral value."""
KEPT = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
"""What is kept of the model's own generation config: its special token ids."""
RECORDED = (
    "do_sample",
    "num_beams",
    "temperature",
    "top_k",
    "top_p",
    "repetition_penalty",
    "no_repeat_ngram_size",
    "length_penalty",
    "min_new_tokens",
    "min_length",
    "bad_words_ids",
    "suppress_tokens",
)
"""The effective settings written to the run file (the rest of NEUTRAL is off as well)."""


def neutral_generation_config(model: Any) -> dict[str, Any]:
    """Replace `model.generation_config` by a neutral greedy one (special token ids kept); returns the run-file
    record: the effective settings and the values of the model's own config that were neutralised."""
    from transformers import GenerationConfig

    shipped = model.generation_config.to_dict() if getattr(model, "generation_config", None) is not None else {}
    keep = {k: shipped[k] for k in KEPT if shipped.get(k) is not None}
    known = set(GenerationConfig().to_dict())
    model.generation_config = GenerationConfig(**{k: v for k, v in NEUTRAL.items() if k in known}, **keep)
    overridden = {
        k: shipped[k]
        for k, v in NEUTRAL.items()
        if k in shipped and shipped[k] is not None and shipped[k] != v and not k.startswith("output_")
    }
    return {
        "decoding": "greedy",
        "settings": {k: NEUTRAL[k] for k in RECORDED},
        "neutralised_from_model": dict(sorted(overridden.items())),
    }


class FirstTokenClock:
    """A stopping criterion that never stops: it notes when the first generated token exists (time to first token,
    the end of the prefill); the device is synchronised at that one call so the time is real."""

    def __init__(self) -> None:
        self.first: float | None = None

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        if self.first is None:
            synchronize(input_ids.device)
            self.first = time.perf_counter()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def timing(t0: float, first: float | None, end: float, n: int) -> dict[str, Any]:
    """One prediction's share of a `generate` call of `n` prompts that started at t0: prefill and decode seconds
    (the call's split divided by n, so a task's sums add up to its seconds) and the time to first token it saw."""
    ttft = (first if first is not None else end) - t0
    return {
        "ttft_s": round(ttft, 6),
        "prefill_s": round(ttft / n, 6),
        "decode_s": round(max(end - t0 - ttft, 0.0) / n, 6),
        "batch": n,
    }
