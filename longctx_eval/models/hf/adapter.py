"""Local transformers causal LMs (`hf:`): greedy generation with the model's chat template, exact lengths.

Placement (`device`, `device_map`, `max_memory`, `dtype`, `attn_implementation`) is decided before the weights
load, and every tensor the adapter builds is built on the model's device (that of its input embeddings); text
and numbers come back to the host only at the end of a call. RoPE options reach generation through the config
(models/hf/config.py); decoding is greedy with every sampling and penalty field neutral (models/hf/generate.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError
from longctx_eval.hashing import cached_file_sha256, canonical_json
from longctx_eval.models.base import ModelAdapter, model_meta
from longctx_eval.models.devices import (
    DevicePeak,
    cuda_devices,
    device_name,
    free_device_memory,
    model_device,
    resolve_device,
)
from longctx_eval.models.hf.batching import AUTO_MAX_REQUESTS, auto_budget, pack
from longctx_eval.models.hf.config import LoadPlan, plan_load
from longctx_eval.models.hf.generate import FirstTokenClock, neutral_generation_config, timing
from longctx_eval.models.hf.likelihood import (
    CHOICE_CACHE,
    LEAD_TOKENS,
    PACKED_ATTENTION,
    ChoiceIds,
    all_choice_ids,
    packable_layers,
    prefill_last,
    score_after_prefill,
    score_full,
    score_packed,
)
from longctx_eval.models.hf.prefix_cache import (
    PrefixCache,
    _positions_fixed,
    has_sliding_layers,
    suffix_chunk,
    window_chunk,
)
from longctx_eval.models.model_files import model_files
from longctx_eval.models.model_source import hf_source, hf_tokenizer_pair, load_error
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import HF_BATCH_SIZE, HFOptions
from longctx_eval.sample import Prediction, Request

RENDER_CACHE = 64
"""Rendered prompts kept: the runner measures a batch's prompts, then sends the batch."""
PREFILL_CHUNK = 2048
"""Tokens per prefill step when a request is retried with chunked prefill after running out of memory."""


class HFCausalLM(ModelAdapter):
    """`hf:<folder-or-hub-id>`: serves 'generate', 'loglikelihood' and 'attention'; prompts that don't fit are
    reported, never cut."""

    capabilities = frozenset({Capability.GENERATE, Capability.LOGLIKELIHOOD, Capability.ATTENTION})

    def __init__(self, spec: ModelSpec) -> None:
        import torch
        from safetensors import SafetensorError
        from transformers import AutoModelForCausalLM

        self._torch = torch
        if not os.environ.get("OMP_NUM_THREADS"):  # a thread count the user set is kept (shared machines)
            torch.set_num_threads(max(1, os.cpu_count() or 1))
        o = cast("HFOptions", spec.options)
        hf_tok, tok = hf_tokenizer_pair(spec)
        template = getattr(hf_tok, "chat_template", None)
        source = hf_source(spec.target, o.revision)
        files = model_files(source)  # before loading: config, tokenizer and chat template, by content
        kwargs: dict[str, Any] = {k: v for k, v in (("revision", o.revision), ("gguf_file", o.gguf_file)) if v}
        plan = plan_load(spec.raw, o, source, kwargs)  # the config alone: refusals come before any weight is read
        self.device = resolve_device(o.device)
        placement = _placement(spec.raw, o, self.device, plan)
        if plan.rope.static is not None:
            kwargs["config"] = plan.config  # the rope parameters the options set, in place before loading
        try:
            self.model = AutoModelForCausalLM.from_pretrained(str(source), **placement, **kwargs).eval()
        except (OSError, ValueError, ImportError, SafetensorError) as exc:  # missing or corrupt weights, no kernel
            raise load_error(spec.target, exc) from exc
        self.generation = neutral_generation_config(self.model)  # greedy is greedy: no shipped penalty applies
        self.hf_tok = hf_tok
        from longctx_eval.models.posprobe import learned_position
        from longctx_eval.models.posprobe.forward import AttentionProbe, probe_config

        folder = Path(str(source)) if Path(str(source)).is_dir() else None
        try:  # a RoPE-free Llama with a learned position table (tiny-learned): the table rides on a hook
            learned_position.attach_learned_positions(self.model, folder)
        except (OSError, ValueError) as exc:
            raise load_error(spec.target, exc) from exc
        self.rope = plan.rope
        probe = probe_config(o, self.model.config, folder, train_length=plan.rope.train_length, checked=True)
        self.probe: AttentionProbe | None = AttentionProbe(self.model, probe, base=plan.rope.base)
        if self.probe.config.attention_only:  # the toy-vocabulary references are probes, not generators
            self.capabilities = frozenset({Capability.ATTENTION})
        self.use_chat = uses_chat(spec, hf_tok)
        self._cuda = cuda_devices(self.model)
        self.input_device = model_device(self.model)
        self.batch_size, self.packed, self.max_batch_tokens = self._batching(o)
        self.eos_ids = self._eos_ids()
        explicit = {k: v for k, v in self.probe.config.settings().items() if k in o.model_fields_set}
        self.prefix_cache = PrefixCache(self.model.config) if o.prefix_cache == "true" else None
        if self.prefix_cache is not None and plan.rope.scaling == "per_length":
            self.prefix_cache.enabled = False  # a prefix's keys depend on the length of the prompt around it
            self.prefix_cache.why_not = "rope= scales per length: a prefix's keys depend on the prompt's length"
        self.chunkable = _positions_fixed(self.model.config) and plan.rope.variant != "dynamic"
        self._window_chunks = self.chunkable and has_sliding_layers(self.model.config)  # see window_chunk
        self._cache_kwarg = _generate_cache_kwarg()
        self._attn_implementation: str | None = getattr(self.model.config, "_attn_implementation", None)
        self._pack_choices = self._attn_implementation in PACKED_ATTENTION and packable_layers(self.model.config)
        """Whether a request's choices are scored in one forward (`score_packed`) rather than one forward each."""
        if "prefix_cache" in o.model_fields_set:  # outputs are the same either way; only a set value is recorded
            explicit["prefix_cache"] = o.prefix_cache == "true"
        if plan.rope.variant != "none" and Capability.GENERATE in self.capabilities:
            # generation now runs under the variant (it did not before): earlier predictions of this spec are stale
            explicit["rope_generation"] = plan.rope.scaling
        dtype = str(self.model.dtype).removeprefix("torch.")
        self._warn_dtype(o, dtype, plan)
        meta = model_meta(
            spec,
            tok,
            self.capabilities,
            revision=str(o.revision or getattr(self.model.config, "_commit_hash", None) or source),
            sha256=weights_sha256(Path(str(source)), o.gguf_file),
            params=sum(p.numel() for p in self.model.parameters()),
            dtype=dtype,
            chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else None,
            context_window=plan.window.tokens,
            # probe and prefix-cache settings enter the identity only when set, so keys of existing runs stay valid
            settings={
                "decoding": "greedy",
                "chat": self.use_chat,
                **explicit,
                **learned_position.settings(self.model),
                **files.setting(),
            },
            runtime={**self._runtime(o, dtype, plan), **files.runtime()},
        )
        super().__init__(meta, tok)
        self._rendered: dict[tuple[str, str], list[int]] = {}
        self._choices: dict[tuple[str, str, tuple[str, ...]], ChoiceIds] = {}
        self._scratch = PrefixCache(self.model.config)  # fresh caches for scoring when prefix_cache=false

    # -- setup --------------------------------------------------------------------------------------------
    def _batching(self, o: HFOptions) -> tuple[int, bool, int | None]:
        """(prompts per runner batch, packed by a token budget?, the budget): auto is 1 on the CPU, packed on CUDA."""
        if o.batch_size != "auto":
            return int(o.batch_size), False, None
        if not self._cuda:
            return HF_BATCH_SIZE, False, None
        return AUTO_MAX_REQUESTS, True, o.max_batch_tokens or auto_budget(self.model, self._cuda)

    def _runtime(self, o: HFOptions, dtype: str, plan: LoadPlan) -> dict[str, Any]:
        """How the model runs here (the run file's model.runtime; never part of the identity)."""
        where: dict[str, Any] = {"device": str(self.input_device), "device_name": device_name(str(self.input_device))}
        if o.device_map is not None:
            per_device: dict[str, int] = {}
            for param in self.model.parameters():
                per_device[str(param.device)] = per_device.get(str(param.device), 0) + param.numel()
            where |= {"device_map": o.device_map, "params_per_device": per_device, "max_memory": o.max_memory}
        out = {
            **where,
            "dtype": dtype,
            "attn_implementation": getattr(self.model.config, "_attn_implementation", None),
            "batch_size": "auto" if o.batch_size == "auto" else int(o.batch_size),
            "batch_size_effective": self.batch_size if not self.packed else f"packed, <= {AUTO_MAX_REQUESTS}",
            "max_batch_tokens": self.max_batch_tokens,
            "generation": self.generation,
            "window": plan.window.record(),
            "attention": plan.attention,
            "choices_in_one_forward": self._pack_choices,
        }
        if plan.rope.variant != "none":
            out["rope"] = plan.rope.record()
        if self.prefix_cache is not None:
            out["prefix_cache"] = self.prefix_cache.record()
        return out

    def _warn_dtype(self, o: HFOptions, dtype: str, plan: LoadPlan) -> None:
        if self._cuda and "dtype" not in o.model_fields_set and plan.config_dtype not in (None, "float32", dtype):
            from longctx_eval.progress import console, console_text

            text = (
                f"{plan.config_dtype} checkpoint loaded in {dtype} (the default) on {self.input_device}: "
                f"?dtype=auto loads it as {plan.config_dtype}, half the memory"
            )
            console.print(f"[yellow]warning[/yellow] {console_text(text)}", highlight=False)

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.hf_tok.eos_token_id
        return [ids] if isinstance(ids, int) else list(ids or [])

    # -- prompts -----------------------------------------------------------------------------------------
    def render(self, request: Request) -> list[int]:
        """The exact token ids sent for `request` (chat template applied when the model has one)."""
        return cached_render(self._rendered, self.hf_tok, self.use_chat, request)

    def prompt_tokens(self, request: Request) -> int:
        if "input_ids" in request.extra:  # a probe request is sent as these exact ids, no template
            return len(request.extra["input_ids"])
        return len(self.render(request))

    def choice_tokens(self, request: Request) -> int:
        """Tokens of the longest choice, as scored: in context after the rendered prompt (models/hf/likelihood.py)."""
        return max((len(ids) for ids in self._choice_ids(request).ids), default=0)

    def _choice_ids(self, request: Request) -> ChoiceIds:
        return cached_choices(self._choices, self.hf_tok, self.use_chat, request)

    def unsupported(self, capability: Capability) -> str | None:
        """The probe's architecture refusal (BLOOM, GPT-2, sliding windows) before any request is sent."""
        from longctx_eval.models.posprobe.support import probe_refusal

        return probe_refusal(self.model) if capability is Capability.ATTENTION else None

    def attention_stats(self, requests: Sequence[Request]) -> list[Prediction]:
        """Teacher-forced passkey probes with exact attention rows (see models/posprobe/forward.py)."""
        assert self.probe is not None  # None only after close()
        return self.probe.run(requests)

    # -- log-likelihood ----------------------------------------------------------------------------------
    def loglikelihood(self, requests: Sequence[Request]) -> list[Prediction]:
        """Each request's choices scored one request at a time, in the order given (models/hf/likelihood.py): the
        prompt prefilled once, reusing the previous request's KV cache for their shared prefix (`prefix_cache=true`,
        at least 256 tokens), then each choice's own tokens; `data.cached_tokens` as for generation."""
        return [self._score(r) for r in requests]

    def _score(self, request: Request) -> Prediction:
        torch = self._torch
        t0 = time.perf_counter()
        prompt = self.render(request)
        if not request.choices:
            return Prediction(
                status="error", prompt_tokens=len(prompt), error="loglikelihood: the request has no choices"
            )
        choices = self._choice_ids(request)
        empty = [i for i, ids in enumerate(choices.ids) if not ids]
        if empty:
            return Prediction(
                status="error", prompt_tokens=len(prompt), error=f"loglikelihood: choice {empty[0]} has no tokens"
            )
        data: dict[str, Any] = {}
        try:
            with torch.no_grad(), self._positions(request):
                if not self._scratch.enabled:  # the cache cannot be cut back to the prompt: a forward per choice
                    scores = score_full(self.model, prompt, choices.ids)
                else:
                    pc = self.prefix_cache
                    cache, held = pc.take(prompt) if pc is not None else (self._scratch.fresh(), 0)
                    # packed: the prompt's last LEAD_TOKENS go into the choices' forward; the rest is prefilled first
                    start = max(held, len(prompt) - LEAD_TOKENS) if self._pack_choices else len(prompt)
                    chunk = self._prefill_chunk(start - held, held)
                    last = prefill_last(self.model, prompt[:start], cache, held, chunk) if start > held else None
                    if self._pack_choices:
                        scores = score_packed(self.model, prompt, start, choices.ids, cache)
                    else:
                        assert last is not None  # `take` always leaves the last prompt token to prefill
                        scores = score_after_prefill(self.model, last, len(prompt), choices.ids, cache)
                    if pc is not None:
                        pc.keep(prompt, cache)
                        data["cached_tokens"] = held
                        if pc.refused:
                            data["prefix_cache_refused"] = pc.refused
                    if chunk is not None:
                        data["prefill_chunk"] = chunk
        except torch.OutOfMemoryError:
            self._free()
            n = len(prompt) + max(len(ids) for ids in choices.ids)
            return Prediction(status="error", prompt_tokens=len(prompt), error=f"out of memory at {n} tokens")
        data = {
            "logprobs": scores.logprobs,
            "choice_tokens": [len(ids) for ids in choices.ids],
            "greedy": scores.greedy,
            **data,
        }
        if choices.alone:
            data["choice_tokenized_alone"] = list(choices.alone)
        seconds = time.perf_counter() - t0
        return Prediction(prompt_tokens=len(prompt), completion_tokens=0, seconds=seconds, data=data)

    def _prefill_chunk(self, tokens: int, held: int, suffix: bool = True) -> int | None:
        """Tokens per prefill step for `tokens` after `held` cached ones: `suffix_chunk` after a cached prefix (unless
        `suffix` is off), else `window_chunk` for a model with sliding-window layers (only their window per step),
        else one step."""
        chunk = suffix_chunk(tokens, self._attn_implementation) if held and suffix else None
        if chunk is None and self._window_chunks:
            chunk = window_chunk(tokens, self._attn_implementation)
        return chunk

    # -- generation --------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        """Greedy completions, `batch_size` prompts of similar length per forward; the same text as one by one.

        At batch_size 1, in the order given, a prompt sharing at least 256 leading tokens with the previous one
        reuses that prefix's KV cache (`prefix_cache=true`, the default) and prefills only the rest. Under
        batch_size=auto on CUDA, requests are packed by `max_batch_tokens` (models/hf/batching.py)."""
        if self.packed:
            return self._generate_packed(requests)
        if self.batch_size == 1:
            return [self._run([r], reuse=self.prefix_cache is not None)[0] for r in requests]
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        order = sorted(range(len(requests)), key=lambda i: len(self.render(requests[i])))
        out: dict[int, Prediction] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out.update(zip(chunk, self._run([requests[i] for i in chunk]), strict=True))
        return [out[i] for i in range(len(requests))]

    def _generate_packed(self, requests: Sequence[Request]) -> list[Prediction]:
        lengths = [len(self.render(r)) for r in requests]
        groups = pack(lengths, [r.max_new_tokens for r in requests], int(self.max_batch_tokens or 1))
        out: dict[int, Prediction] = {}
        for group in groups:
            alone = len(group) == 1 and self.prefix_cache is not None
            if not alone and self.prefix_cache is not None:
                self.prefix_cache.clear()  # a held cache would only take memory from the batch
            out.update(zip(group, self._run([requests[i] for i in group], reuse=alone), strict=True))
        return [out[i] for i in range(len(requests))]

    def _run(self, requests: Sequence[Request], reuse: bool = False) -> list[Prediction]:
        """Generate one batch (split where per-length RoPE gives its prompts different positions); on an
        out-of-memory error the cache is freed and each request is retried alone, then with chunked prefill."""
        keys = [self._rope_key(r) for r in requests]
        if len(set(keys)) > 1:
            out: list[Prediction | None] = [None] * len(requests)
            for key in dict.fromkeys(keys):
                idx = [i for i, k in enumerate(keys) if k == key]
                for i, p in zip(idx, self._run([requests[i] for i in idx]), strict=True):
                    out[i] = p
            return [p for p in out if p is not None]
        try:
            return self._generate_batch(requests, reuse=reuse)
        except self._torch.OutOfMemoryError:
            self._free()
            return [self._after_oom(r, batched=len(requests) > 1) for r in requests]

    def _after_oom(self, request: Request, batched: bool) -> Prediction:
        n = len(self.render(request))
        tried = ["alone" if batched else "again after freeing the cache"]
        try:
            return _with_oom(self._generate_batch([request])[0], tried)
        except self._torch.OutOfMemoryError:
            self._free()
        if self.chunkable and n > PREFILL_CHUNK:
            tried.append(f"chunked prefill ({PREFILL_CHUNK} tokens per step)")
            try:
                return _with_oom(self._generate_batch([request], prefill_chunk=PREFILL_CHUNK)[0], tried)
            except self._torch.OutOfMemoryError:
                self._free()
        return Prediction(
            status="error", prompt_tokens=n, error=f"out of memory at {n} tokens", data={"oom": {"retried": tried}}
        )

    def _free(self) -> None:
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        free_device_memory()

    def _rope_key(self, request: Request) -> str | None:
        """Requests with equal keys share RoPE parameters (always, except per-length scaling past the window)."""
        if self.rope.scaling != "per_length":
            return None
        return canonical_json(self.rope.parameters_for(len(self.render(request)) + request.max_new_tokens))

    @contextmanager
    def _positions(self, request: Request) -> Iterator[None]:
        """Per-length RoPE: the variant's parameters for this request's length, for the block (else nothing)."""
        if self.rope.scaling != "per_length":
            yield
            return
        from longctx_eval.models.posprobe.rope_variants import rope_applied

        params = self.rope.parameters_for(len(self.render(request)) + request.max_new_tokens)
        with rope_applied(self.model, params, self.rope.train_length):
            yield

    def _generate_batch(
        self, requests: Sequence[Request], reuse: bool = False, prefill_chunk: int | None = None
    ) -> list[Prediction]:
        torch = self._torch
        from transformers import StoppingCriteriaList

        t0 = time.perf_counter()
        rows = [self.render(r) for r in requests]
        cache_kw: dict[str, Any] = {}
        cached: int | None = None
        if reuse and self.prefix_cache is not None:  # batch of one: no padding, so cached positions line up
            cache_kw[self._cache_kwarg], cached = self.prefix_cache.take(rows[0])
        if prefill_chunk is None and len(rows) == 1:
            suffix = self.prefix_cache is None or self.prefix_cache.chunk_suffix
            prefill_chunk = self._prefill_chunk(len(rows[0]) - (cached or 0), cached or 0, suffix)
        if prefill_chunk is not None:
            cache_kw["prefill_chunk_size"] = prefill_chunk
        width = max(len(r) for r in rows)
        pad = self.hf_tok.pad_token_id if self.hf_tok.pad_token_id is not None else (self.eos_ids or [0])[0]
        # left padding keeps every prompt's last token adjacent to its first generated token; prompts of one
        # length (what packing groups at long lengths) have no padding at all
        device = self.input_device
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)
        budget = max(r.max_new_tokens for r in requests)
        clock = FirstTokenClock()
        with torch.no_grad(), self._positions(requests[0]), DevicePeak(self._cuda) as peak:
            gen = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=budget,
                pad_token_id=pad,
                eos_token_id=self.eos_ids or None,
                return_dict_in_generate=True,
                stopping_criteria=StoppingCriteriaList([clock]),
                **cache_kw,
            )
            new_ids = gen.sequences[:, width:].tolist()  # the host boundary (waits for the device)
        end = time.perf_counter()
        name = self._cache_kwarg
        if name in cache_kw and self.prefix_cache is not None:
            self.prefix_cache.keep(rows[0], getattr(gen, name, None) or cache_kw[name])
        seconds = (end - t0) / len(requests)
        data: dict[str, Any] = {"timing": timing(t0, clock.first, end, len(requests))}
        if cached is not None:  # prompt tokens the prefix cache held (not prefilled), as `vllm:` reports them
            data["cached_tokens"] = cached
            if self.prefix_cache is not None and self.prefix_cache.refused:  # a shared prefix it could not cut to
                data["prefix_cache_refused"] = self.prefix_cache.refused
        if prefill_chunk is not None:  # tokens per prefill step, where the prompt was prefilled in steps
            data["prefill_chunk"] = prefill_chunk
        if peak.megabytes is not None:
            data["peak_device_mb"] = peak.megabytes
        preds = []
        for req, row, new in zip(requests, rows, new_ids, strict=True):
            text, n = self._completion(new[: req.max_new_tokens])
            preds.append(
                Prediction(text=text, prompt_tokens=len(row), completion_tokens=n, seconds=seconds, data=dict(data))
            )
        return preds

    def _completion(self, new: list[int]) -> tuple[str, int]:
        """The reply text (up to the first end-of-sequence token) and the tokens generated for it: the text's
        tokens plus that end token when the model emitted one (a decode step like any other); padding after it
        in a batch is not counted."""
        return completion_of(self.hf_tok, self.eos_ids, new)

    def close(self) -> None:
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        del self.model
        self.probe = None
        free_device_memory()


def _with_oom(pred: Prediction, tried: list[str]) -> Prediction:
    """`pred`, recorded as recovered from an out-of-memory error by the steps `tried`."""
    return replace(pred, data={**(pred.data or {}), "oom": {"retried": list(tried), "recovered": True}})


def _placement(raw: str, o: HFOptions, device: str, plan: LoadPlan) -> dict[str, Any]:
    """from_pretrained's dtype, device_map, max_memory and attn_implementation; impossible combinations are
    one-line ConfigErrors before loading. On the CPU nothing is added (the load is the one it always was)."""
    import torch

    kw: dict[str, Any] = {"dtype": "auto" if o.dtype == "auto" else getattr(torch, o.dtype)}
    if o.device_map is not None:
        kw["device_map"] = o.device_map
        if o.max_memory:
            kw["max_memory"] = _max_memory(o.max_memory)
    elif device != "cpu":
        kw["device_map"] = device
    if o.attn_implementation is not None:
        if o.attn_implementation == "flash_attention_2":
            if device == "cpu" and o.device_map is None:
                raise ConfigError(f"model spec {raw!r}: attn_implementation=flash_attention_2 needs a CUDA device")
            loaded = plan.config_dtype if o.dtype == "auto" else o.dtype
            if loaded in (None, "float32"):
                raise ConfigError(
                    f"model spec {raw!r}: attn_implementation=flash_attention_2 runs in bfloat16 or float16, not "
                    f"{loaded or 'float32'}; add dtype=bfloat16"
                )
        kw["attn_implementation"] = o.attn_implementation
    return kw


def _max_memory(text: str) -> dict[int | str, str]:
    """`0:70GiB,1:70GiB,cpu:100GiB` -> {0: '70GiB', 1: '70GiB', 'cpu': '100GiB'} (accelerate's form)."""
    out: dict[int | str, str] = {}
    for part in text.split(","):
        key, _, value = part.partition(":")
        out[int(key) if key.isdigit() else key] = value
    return out


def _generate_cache_kwarg() -> str:
    """The name `generate` takes a KV cache under: `cache` (transformers 5.2x), `past_key_values` before (5.19, the
    version vLLM 0.32 pins in .venv-vllm)."""
    from transformers.generation import utils

    return "cache" if "cache" in getattr(utils, "ALL_CACHE_NAMES", ()) else "past_key_values"


def uses_chat(spec: ModelSpec, hf_tok: Any) -> bool:
    """Whether prompts go through the tokenizer's chat template (`chat=auto|true|false`; true needs a template)."""
    template = getattr(hf_tok, "chat_template", None)
    chat = cast("HFOptions", spec.options).chat
    if chat == "true" and not template:
        raise ConfigError(f"model spec {spec.raw!r}: chat=true but the tokenizer has no chat template")
    return chat == "true" or (chat == "auto" and bool(template))


def render_text(hf_tok: Any, use_chat: bool, request: Request) -> tuple[str, bool]:
    """The text `render_ids` tokenizes and whether special tokens are added to it (a choice is scored after it)."""
    if use_chat:
        messages = [{"role": "user", "content": request.prompt}]
        text = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return text + request.answer_prefix, False
    return request.prompt + ("\n" + request.answer_prefix if request.answer_prefix else ""), True


def render_ids(hf_tok: Any, use_chat: bool, request: Request) -> list[int]:
    """The exact token ids a local model is sent for `request`: the chat template's generation prompt then the
    answer prefix (or, without chat, the prompt, a newline and the prefix). `vllm:` sends these same ids."""
    text, special = render_text(hf_tok, use_chat, request)
    return hf_tok(text, add_special_tokens=special)["input_ids"]


def cached_choices(
    cache: dict[tuple[str, str, tuple[str, ...]], ChoiceIds], hf_tok: Any, use_chat: bool, request: Request
) -> ChoiceIds:
    """`request.choices` as token ids after its rendered prompt (models/hf/likelihood.py), through a small cache."""
    key = (request.prompt, request.answer_prefix, request.choices)
    got = cache.get(key)
    if got is None:
        text, special = render_text(hf_tok, use_chat, request)
        got = all_choice_ids(hf_tok, text, special, render_ids(hf_tok, use_chat, request), request.choices)
        if len(cache) >= CHOICE_CACHE:
            cache.pop(next(iter(cache)))
        cache[key] = got
    return got


def cached_render(cache: dict[tuple[str, str], list[int]], hf_tok: Any, use_chat: bool, request: Request) -> list[int]:
    """`render_ids` through a small cache of the last RENDER_CACHE prompts (one prompt is measured, then sent)."""
    key = (request.prompt, request.answer_prefix)
    ids = cache.get(key)
    if ids is None:
        ids = render_ids(hf_tok, use_chat, request)
        if len(cache) >= RENDER_CACHE:
            cache.pop(next(iter(cache)))
        cache[key] = ids
    return ids


def completion_of(hf_tok: Any, eos_ids: Sequence[int], new: Sequence[int]) -> tuple[str, int]:
    """The reply text of generated ids `new` (up to the first end-of-sequence token) and the tokens generated for
    it: the text's tokens plus that end token when the model emitted one; padding after it is not counted."""
    cut = next((i for i, t in enumerate(new) if t in eos_ids), None)
    if cut is None:
        return hf_tok.decode(list(new), skip_special_tokens=True), len(new)
    return hf_tok.decode(list(new[:cut]), skip_special_tokens=True), cut + 1


def weights_sha256(folder: Path, gguf_file: str | None) -> str | None:
    """sha256 over the weight files of a local model (the GGUF source for converted ones); None for hub ids.

    Each file is read once per (path, size, mtime) and its hash cached (hashing.cached_file_sha256)."""
    marker = folder / "longctx_source.json"
    if marker.is_file():
        return json.loads(marker.read_text())["gguf_sha256"]
    if gguf_file and (folder / gguf_file).is_file():
        return cached_file_sha256(folder / gguf_file)
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(cached_file_sha256(f).encode())
    return h.hexdigest()
