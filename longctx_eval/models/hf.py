"""Local transformers causal LMs (`hf:`): greedy generation with the model's chat template, exact lengths."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longctx_eval.assets import file_sha256
from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError
from longctx_eval.models.base import ModelAdapter, model_meta
from longctx_eval.models.hf_prefix_cache import PrefixCache
from longctx_eval.models.model_source import hf_source, hf_tokenizer_pair, load_error
from longctx_eval.models.options import HFOptions
from longctx_eval.models.spec import ModelSpec
from longctx_eval.sample import Prediction, Request

RENDER_CACHE = 64
"""Rendered prompts kept: the runner measures a batch's prompts, then sends the batch."""


class HFCausalLM(ModelAdapter):
    """`hf:<folder-or-hub-id>`: serves 'generate' and 'attention'; prompts that don't fit are reported, never cut."""

    capabilities = frozenset({Capability.GENERATE, Capability.ATTENTION})

    def __init__(self, spec: ModelSpec) -> None:
        import torch
        from safetensors import SafetensorError
        from transformers import AutoModelForCausalLM

        self._torch = torch
        if not os.environ.get("OMP_NUM_THREADS"):  # a thread count the user set is kept (shared machines)
            torch.set_num_threads(max(1, os.cpu_count() or 1))
        o: HFOptions = spec.options
        hf_tok, tok = hf_tokenizer_pair(spec)
        template = getattr(hf_tok, "chat_template", None)
        source = hf_source(spec.target, o.revision)
        kwargs: dict[str, Any] = {k: v for k, v in (("revision", o.revision), ("gguf_file", o.gguf_file)) if v}
        try:
            self.model = AutoModelForCausalLM.from_pretrained(
                str(source), dtype=getattr(torch, o.dtype), **kwargs
            ).eval()
        except (OSError, ValueError, SafetensorError) as exc:  # missing, unreadable or corrupt weights
            raise load_error(spec.target, exc) from exc
        self.hf_tok = hf_tok
        from longctx_eval.models import learned_position
        from longctx_eval.models.posprobe_forward import AttentionProbe, probe_config

        folder = Path(str(source)) if Path(str(source)).is_dir() else None
        try:  # a RoPE-free Llama with a learned position table (tiny-learned): the table rides on a hook
            learned_position.attach_learned_positions(self.model, folder)
        except (OSError, ValueError) as exc:
            raise load_error(spec.target, exc) from exc
        self.probe = AttentionProbe(self.model, probe_config(o, self.model.config, folder))
        if self.probe.config.attention_only:  # the toy-vocabulary references are probes, not generators
            self.capabilities = frozenset({Capability.ATTENTION})
        self.use_chat = uses_chat(spec, hf_tok)
        self.batch_size = o.batch_size
        self.eos_ids = self._eos_ids()
        explicit = {k: v for k, v in self.probe.config.settings().items() if k in o.model_fields_set}
        self.prefix_cache = PrefixCache(self.model.config) if o.prefix_cache == "true" else None
        self._cache_kwarg = _generate_cache_kwarg()
        if "prefix_cache" in o.model_fields_set:  # outputs are the same either way; only a set value is recorded
            explicit["prefix_cache"] = o.prefix_cache == "true"
        meta = model_meta(
            spec,
            tok,
            self.capabilities,
            revision=str(o.revision or getattr(self.model.config, "_commit_hash", None) or source),
            sha256=weights_sha256(Path(str(source)), o.gguf_file),
            params=sum(p.numel() for p in self.model.parameters()),
            dtype=o.dtype,
            chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else None,
            context_window=o.max_length or getattr(self.model.config, "max_position_embeddings", None),
            # probe and prefix-cache settings enter the identity only when set, so keys of existing runs stay valid
            settings={"decoding": "greedy", "chat": self.use_chat, **explicit, **learned_position.settings(self.model)},
        )
        super().__init__(meta, tok)
        self._rendered: dict[tuple[str, str], list[int]] = {}

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.hf_tok.eos_token_id
        return [ids] if isinstance(ids, int) else list(ids or [])

    def render(self, request: Request) -> list[int]:
        """The exact token ids sent for `request` (chat template applied when the model has one)."""
        key = (request.prompt, request.answer_prefix)
        cached = self._rendered.get(key)
        if cached is not None:
            return cached
        ids = render_ids(self.hf_tok, self.use_chat, request)
        if len(self._rendered) >= RENDER_CACHE:
            self._rendered.pop(next(iter(self._rendered)))
        self._rendered[key] = ids
        return ids

    def prompt_tokens(self, request: Request) -> int:
        if "input_ids" in request.extra:  # a probe request is sent as these exact ids, no template
            return len(request.extra["input_ids"])
        return len(self.render(request))

    def unsupported(self, capability: Capability) -> str | None:
        """The probe's architecture refusal (BLOOM, GPT-2, sliding windows) before any request is sent."""
        from longctx_eval.models.probe_support import probe_refusal

        return probe_refusal(self.model) if capability is Capability.ATTENTION else None

    def attention_stats(self, requests: Sequence[Request]) -> list[Prediction]:
        """Teacher-forced passkey probes with exact attention rows (see models/posprobe_forward.py)."""
        return self.probe.run(requests)

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        """Greedy completions, `batch_size` prompts of similar length per forward; the same text as one by one.

        At batch_size 1, in the order given, a prompt sharing at least 256 leading tokens with the previous one
        reuses that prefix's KV cache (`prefix_cache=true`, the default) and prefills only the rest."""
        if self.batch_size == 1:
            return [self._generate_batch([r], reuse=self.prefix_cache is not None)[0] for r in requests]
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        order = sorted(range(len(requests)), key=lambda i: len(self.render(requests[i])))
        out: dict[int, Prediction] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out.update(zip(chunk, self._generate_batch([requests[i] for i in chunk]), strict=True))
        return [out[i] for i in range(len(requests))]

    def _generate_batch(self, requests: Sequence[Request], reuse: bool = False) -> list[Prediction]:
        torch = self._torch
        t0 = time.perf_counter()
        rows = [self.render(r) for r in requests]
        cache_kw: dict[str, Any] = {}
        if reuse and self.prefix_cache is not None:  # batch of one: no padding, so cached positions line up
            cache_kw[self._cache_kwarg] = self.prefix_cache.take(rows[0])[0]
        width = max(len(r) for r in rows)
        pad = self.hf_tok.pad_token_id if self.hf_tok.pad_token_id is not None else (self.eos_ids or [0])[0]
        # left padding keeps every prompt's last token adjacent to its first generated token
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        budget = max(r.max_new_tokens for r in requests)
        with torch.no_grad():
            gen = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=budget,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=pad,
                eos_token_id=self.eos_ids or None,
                return_dict_in_generate=True,
                **cache_kw,
            )
        if cache_kw and self.prefix_cache is not None:
            name = self._cache_kwarg
            self.prefix_cache.keep(rows[0], getattr(gen, name, None) or cache_kw[name])
        seconds = (time.perf_counter() - t0) / len(requests)
        preds = []
        for req, row, new in zip(requests, rows, gen.sequences[:, width:].tolist(), strict=True):
            text, n = self._completion(new[: req.max_new_tokens])
            preds.append(Prediction(text=text, prompt_tokens=len(row), completion_tokens=n, seconds=seconds))
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


def _generate_cache_kwarg() -> str:
    """The name `generate` takes a KV cache under: `cache` (transformers 5.2x), `past_key_values` before (5.19, the
    version vLLM 0.32 pins in .venv-vllm)."""
    from transformers.generation import utils

    return "cache" if "cache" in getattr(utils, "ALL_CACHE_NAMES", ()) else "past_key_values"


def uses_chat(spec: ModelSpec, hf_tok: Any) -> bool:
    """Whether prompts go through the tokenizer's chat template (`chat=auto|true|false`; true needs a template)."""
    template = getattr(hf_tok, "chat_template", None)
    if spec.options.chat == "true" and not template:
        raise ConfigError(f"model spec {spec.raw!r}: chat=true but the tokenizer has no chat template")
    return spec.options.chat == "true" or (spec.options.chat == "auto" and bool(template))


def render_ids(hf_tok: Any, use_chat: bool, request: Request) -> list[int]:
    """The exact token ids a local model is sent for `request`: the chat template's generation prompt then the
    answer prefix (or, without chat, the prompt, a newline and the prefix). `vllm:` sends these same ids."""
    if use_chat:
        messages = [{"role": "user", "content": request.prompt}]
        text = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return hf_tok(text + request.answer_prefix, add_special_tokens=False)["input_ids"]
    prompt = request.prompt + ("\n" + request.answer_prefix if request.answer_prefix else "")
    return hf_tok(prompt, add_special_tokens=True)["input_ids"]


def completion_of(hf_tok: Any, eos_ids: Sequence[int], new: Sequence[int]) -> tuple[str, int]:
    """The reply text of generated ids `new` (up to the first end-of-sequence token) and the tokens generated for
    it: the text's tokens plus that end token when the model emitted one; padding after it is not counted."""
    cut = next((i for i, t in enumerate(new) if t in eos_ids), None)
    if cut is None:
        return hf_tok.decode(list(new), skip_special_tokens=True), len(new)
    return hf_tok.decode(list(new[:cut]), skip_special_tokens=True), cut + 1


def weights_sha256(folder: Path, gguf_file: str | None) -> str | None:
    """sha256 over the weight files of a local model (the GGUF source for converted ones); None for hub ids."""
    marker = folder / "longctx_source.json"
    if marker.is_file():
        return json.loads(marker.read_text())["gguf_sha256"]
    if gguf_file and (folder / gguf_file).is_file():
        return file_sha256(folder / gguf_file)
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(file_sha256(f).encode())
    return h.hexdigest()
