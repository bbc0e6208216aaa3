"""Local transformers causal LMs (`hf:`): greedy generation with the model's chat template, exact lengths."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longctx_eval.assets import file_sha256, smollm2_dir
from longctx_eval.errors import ConfigError, PrerequisiteError
from longctx_eval.models.base import ModelAdapter, ModelInfo
from longctx_eval.models.spec import ModelSpec, option_int
from longctx_eval.sample import Prediction, Request
from longctx_eval.text.tokenizer import Tokenizer

DTYPES = ("float32", "bfloat16", "float16")


class HFCausalLM(ModelAdapter):
    """`hf:<path-or-hub-id>`: serves 'generate' and 'attention'; prompts that don't fit are reported, never cut."""

    capabilities = frozenset({"generate", "attention"})

    def __init__(self, spec: ModelSpec) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        torch.set_num_threads(max(1, os.cpu_count() or 1))
        source = _source(spec.target)
        dtype = spec.options.get("dtype", "float32")
        if dtype not in DTYPES:
            raise ConfigError(f"model spec {spec.raw!r}: dtype={dtype!r}; expected one of {', '.join(DTYPES)}")
        chat = spec.options.get("chat", "auto")
        if chat not in ("auto", "true", "false"):
            raise ConfigError(f"model spec {spec.raw!r}: chat={chat!r}; expected auto, true or false")
        kwargs: dict[str, Any] = {}
        for key in ("revision", "gguf_file"):
            if key in spec.options:
                kwargs[key] = spec.options[key]
        try:
            hf_tok = AutoTokenizer.from_pretrained(str(source), **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(str(source), dtype=getattr(torch, dtype), **kwargs).eval()
        except (OSError, ValueError) as exc:
            raise PrerequisiteError(
                f"hf model {spec.target!r} cannot be loaded (offline or unknown): {str(exc).splitlines()[0]}"
            ) from exc
        self.hf_tok = hf_tok
        from longctx_eval.models.attention_probe import AttentionProbe, probe_config

        folder = Path(str(source)) if Path(str(source)).is_dir() else None
        self.probe = AttentionProbe(self.model, probe_config(spec.options, self.model.config, folder, spec.raw))
        if self.probe.config.attention_only:  # the toy-vocabulary references are probes, not generators
            self.capabilities = frozenset({"attention"})
        self.use_chat = chat == "true" or (chat == "auto" and bool(getattr(hf_tok, "chat_template", None)))
        if chat == "true" and not getattr(hf_tok, "chat_template", None):
            raise ConfigError(f"model spec {spec.raw!r}: chat=true but the tokenizer has no chat template")
        self.batch_size = option_int(spec, "batch_size", 1) or 1
        self.eos_ids = self._eos_ids()
        window = option_int(spec, "max_length", None) or getattr(self.model.config, "max_position_embeddings", None)
        template = getattr(hf_tok, "chat_template", None)
        info = ModelInfo(
            spec=spec.raw,
            name=spec.name,
            kind="hf",
            tokenizer=spec.target if _embedded(spec.target) else getattr(hf_tok, "name_or_path", spec.name),
            revision=str(kwargs.get("revision") or getattr(self.model.config, "_commit_hash", None) or source),
            sha256=_weights_sha256(Path(str(source)), kwargs.get("gguf_file")),
            params=sum(p.numel() for p in self.model.parameters()),
            dtype=dtype,
            chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else None,
            context_window=window,
            settings={"decoding": "greedy", "chat": self.use_chat, **_probe_settings(spec, self.probe.config)},
        )
        tok = Tokenizer.from_transformers(hf_tok, name=info.tokenizer)
        super().__init__(ModelInfo(**{**info.__dict__, "tokenizer_sha256": tok.sha256}), tok)
        self._rendered: dict[str, list[int]] = {}

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.hf_tok.eos_token_id
        return [ids] if isinstance(ids, int) else list(ids or [])

    def render(self, request: Request) -> list[int]:
        """The exact token ids sent for `request` (chat template applied when the model has one)."""
        cached = self._rendered.get(request.prompt)
        if cached is not None:
            return cached
        if self.use_chat:
            messages = [{"role": "user", "content": request.prompt}]
            text = self.hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            ids = self.hf_tok(text, add_special_tokens=False)["input_ids"]
        else:
            ids = self.hf_tok(request.prompt, add_special_tokens=True)["input_ids"]
        self._rendered = {request.prompt: ids}  # keep one: prompt_tokens() is followed by generate()
        return ids

    def prompt_tokens(self, request: Request) -> int:
        if "input_ids" in request.extra:  # a probe request is sent as these exact ids, no template
            return len(request.extra["input_ids"])
        return len(self.render(request))

    def attention_stats(self, requests: Sequence[Request]) -> list[Prediction]:
        """Teacher-forced passkey probes with exact attention rows (see models/attention_probe.py)."""
        return self.probe.run(requests)

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        out: list[Prediction] = []
        for start in range(0, len(requests), self.batch_size):
            out.extend(self._generate_batch(requests[start : start + self.batch_size]))
        return out

    def _generate_batch(self, requests: Sequence[Request]) -> list[Prediction]:
        torch = self._torch
        t0 = time.perf_counter()
        rows = [self.render(r) for r in requests]
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
            )
        seconds = (time.perf_counter() - t0) / len(requests)
        preds = []
        for req, row, new in zip(requests, rows, gen[:, width:].tolist(), strict=True):
            new = new[: req.max_new_tokens]
            cut = next((i for i, t in enumerate(new) if t in self.eos_ids), len(new))
            text = self.hf_tok.decode(new[:cut], skip_special_tokens=True)
            preds.append(Prediction(text=text, prompt_tokens=len(row), completion_tokens=cut, seconds=seconds))
        return preds

    def close(self) -> None:
        del self.model


def _source(target: str) -> Path | str:
    """A local folder for the embedded names (converted SmolLM2, committed references), else the target."""
    from longctx_eval.models.references import REFERENCE_MODELS, reference_dir

    if target == "smollm2-135m":
        return smollm2_dir()
    return reference_dir(target) if target in REFERENCE_MODELS else target


def _embedded(target: str) -> bool:
    from longctx_eval.models.references import REFERENCE_MODELS

    return target in ("smollm2-135m", *REFERENCE_MODELS)


def _probe_settings(spec: ModelSpec, config: Any) -> dict[str, Any]:
    """Probe settings enter the identity only when set, so generation keys of existing runs stay valid."""
    keys = ("rope", "rope_factor", "train_length")
    return {k: v for k, v in config.settings().items() if k in keys and k in spec.options}


def _weights_sha256(folder: Path, gguf_file: str | None) -> str | None:
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
