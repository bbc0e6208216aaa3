"""The GPU check of the `hf` path (issue 17): one script, no weights from outside, under 8 minutes on one H200.

    python -m benchmarks.gpu_check            # a CUDA machine: writes benchmarks/results/gpu.json
    python -m benchmarks.gpu_check --cpu      # the CPU half, tiny shapes (what `make bench` runs): gpu_check.json

Models are random weights in the shapes of Llama-3-8B and Qwen2.5-7B, built directly on the GPU in bfloat16
(the CPU half: two-layer models of the same families), loaded through the real `hf` adapter (only reading
weights from disk is skipped: `from_pretrained` hands over the built model) with a tokenizer trained here on
the suite's synthetic prose; prompts are exact token ids. Measured:
- generation at 8K, 32K and 128K prompt tokens and the longest that fits (doubling until out of memory or the
  time budget): seconds, prefill / decode split, time to first token, tokens/s, peak device memory; sdpa and,
  where flash-attn is installed, flash_attention_2;
- batch_size=auto (packed by tokens) against batch 1 on equal-length prompts, and whether the texts agree;
- the prefix cache: a second question on a 32K document, cold against warm;
- the out-of-memory path: a device memory cap under which a whole prefill fails and the chunked retry fits,
  then one under which the request is recorded failed (the CPU half injects the error instead);
- the position probe on the tiny references, CUDA against CPU (attention rows within 1e-4);
- MiniLM sentence embeddings, CUDA against CPU.
Every step checks the time left (TIME_BUDGET_S) and is skipped, with the reason, when it would not fit.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
TIME_BUDGET_S = 420.0
"""Seconds the GPU run may take in all (issue 17: under 8 minutes), leaving a margin for start-up."""
MAX_NEW = 32
GPU_LENGTHS = (8192, 32768, 131072)
CPU_LENGTHS = (256, 1024, 2048)
ROW_TOLERANCE = 1e-4
VOCAB = 512
"""Token ids of the prompts are drawn below this (the trained tokenizer's size; the models' vocabularies are larger)."""
GROWTH = 6.0
"""Assumed growth of a generation's time per doubling of the prompt (attention is quadratic; measured ~5.5 on CPU)."""
GPU_LONGEST_CAP = 1 << 20
CPU_LONGEST_CAP = 8192


def shapes(cpu: bool) -> dict[str, Any]:
    """name -> transformers config: the 8B-class shapes on CUDA, two-layer models of the same families on the CPU."""
    from transformers import LlamaConfig, Qwen2Config

    if cpu:
        tiny = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
        return {
            "llama-tiny": LlamaConfig(vocab_size=1024, num_key_value_heads=2, max_position_embeddings=8192, **tiny),
            "qwen2-tiny": Qwen2Config(vocab_size=1024, num_key_value_heads=2, max_position_embeddings=8192, **tiny),
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
    from longctx_eval.sample import Request

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


def generation(adapter: Any, vocab: int, lengths: tuple[int, ...], budget: Budget) -> dict[str, Any]:
    """Generation at each length (with the adapter's out-of-memory recovery), skipped when it would not fit."""
    rows: list[dict[str, Any]] = []
    last_s = 0.0
    for n in lengths:
        estimate = last_s * GROWTH ** math.log2(n / rows[-1]["length"]) if rows else 0.0
        if not budget.allows(estimate):
            rows.append({"length": n, "status": "skipped", "reason": f"time budget ({budget.left():.0f} s left)"})
            continue
        pred = adapter.generate([request(adapter, f"len{n}", random_ids(n, vocab, n))])[0]
        rows.append(figures(pred, n))
        last_s = pred.seconds or last_s
        log(f"  {n:>7} tokens: {rows[-1]}")
        if pred.status != "ok":
            break
    return {"rows": rows, "longest_fitting": _longest(rows)}


def longest(adapter: Any, vocab: int, start: int, cap: int, last_s: float, budget: Budget) -> dict[str, Any]:
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
        rows.append(figures(pred, n))
        last_s = pred.seconds
        log(f"  {n:>7} tokens: {rows[-1]}")
        n *= 2
    return {"rows": rows, "longest_fitting": _longest(rows)}


def _longest(rows: list[dict[str, Any]]) -> int | None:
    ok = [r["length"] for r in rows if r.get("status") == "ok"]
    return max(ok) if ok else None


def batching(adapter: Any, vocab: int, length: int, n: int) -> dict[str, Any]:
    """batch_size=auto (packed) against batch 1 on `n` equal-length prompts: seconds and agreeing texts."""
    reqs = [request(adapter, f"b{i}", random_ids(length, vocab, 1000 + i)) for i in range(n)]
    held = adapter.packed, adapter.batch_size, adapter.max_batch_tokens
    adapter.packed, adapter.batch_size = False, 1
    t0 = time.perf_counter()
    one = adapter.generate(reqs)
    one_s = time.perf_counter() - t0
    if not bool(adapter._cuda):  # the CPU: auto is batch 1 there; the packed path is forced to time it
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
        "packed_on": "cuda (batch_size=auto)" if bool(adapter._cuda) else "cpu (forced; auto is batch 1 there)",
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


def probe(cpu: bool, budget: Budget) -> dict[str, Any]:
    """The tiny references' attention rows, CUDA against CPU (the CPU half: the CPU against itself, to run it)."""
    import numpy as np

    from longctx_eval.discovery import discover
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.posprobe.forward import _rows_attention, forward_rows
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
            with _rows_attention(adapter.model):
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
    import importlib.util
    import platform

    import torch
    import transformers

    env: dict[str, Any] = {
        "mode": "cpu" if cpu else "cuda",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "flash_attn_installed": importlib.util.find_spec("flash_attn") is not None,
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env |= {"device_name": props.name, "device_memory_gb": round(props.total_memory / 2**30, 1)}
    else:
        env["device_name"] = "cpu"
    return env


def run(cpu: bool, budget_s: float = TIME_BUDGET_S) -> dict[str, Any]:
    """Every measurement; a failing step is recorded with its error and the others go on."""
    import torch

    if not cpu and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: run `python -m benchmarks.gpu_check --cpu` for the CPU half")
    started = time.perf_counter()
    budget = Budget(budget_s)
    device = "cpu" if cpu else "cuda:0"
    lengths = CPU_LENGTHS if cpu else GPU_LENGTHS
    result: dict[str, Any] = {"environment": environment(cpu), "time_budget_s": budget_s, "models": {}}
    kernels = ["sdpa"] + (["flash_attention_2"] if result["environment"]["flash_attn_installed"] and not cpu else [])
    first: tuple[Any, Path, float] | None = None  # kept for the longest-prompt search, run last
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, config) in enumerate(shapes(cpu).items()):
            log(f"{name}:")
            entry: dict[str, Any] = {"generation": {}}
            result["models"][name] = entry
            try:
                folder = Path(tmp) / name
                model = build(name, config, device, folder)
                entry["parameters"] = sum(p.numel() for p in model.parameters())
                for kernel in kernels:
                    adapter = adapter_for(model, folder, f"attn_implementation={kernel}&dtype=auto&prefix_cache=false")
                    entry["runtime"] = {k: adapter.meta.runtime.get(k) for k in ("device", "device_name", "dtype")}
                    entry["generation"][kernel] = generation(adapter, VOCAB, lengths, budget)
                    adapter = None
                    free()
                if i == 0:
                    entry |= first_model_steps(model, folder, lengths, cpu, budget)
                    rows = entry["generation"]["sdpa"]["rows"]
                    last = next((r["seconds"] for r in reversed(rows) if r.get("status") == "ok"), 1.0)
                    first = (model, folder, last)
            except Exception as exc:  # recorded, the other measurements still run
                entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                log(f"  error: {entry['error']}")
            finally:
                model = adapter = None
                free()
        result["probe_cuda_vs_cpu"] = _step(lambda: probe(cpu, budget), budget, 20)
        result["minilm_cuda_vs_cpu"] = _step(lambda: minilm(cpu), budget, 20)
        if first is not None:  # the longest prompt that fits, with whatever time is left
            model, folder, last = first
            first = None
            adapter = adapter_for(model, folder, "attn_implementation=sdpa&dtype=auto&prefix_cache=false")
            name = next(iter(result["models"]))
            cap = CPU_LONGEST_CAP if cpu else GPU_LONGEST_CAP
            result["models"][name]["longest"] = longest(adapter, VOCAB, 2 * lengths[-1], cap, last, budget)
            model = adapter = None
            free()
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def first_model_steps(model: Any, folder: Path, lengths: tuple[int, ...], cpu: bool, budget: Budget) -> dict[str, Any]:
    """batch_size=auto against 1, the prefix cache warm and cold, and the out-of-memory path, on the first model."""
    out: dict[str, Any] = {}
    cached = adapter_for(model, folder, "attn_implementation=sdpa&dtype=auto")
    out["batch_auto_vs_1"] = _step(lambda: batching(cached, VOCAB, lengths[0] // 4, 16), budget, 60)
    out["prefix_cache"] = _step(lambda: prefix_cache(cached, VOCAB, lengths[1]), budget, 30)
    cached = None
    free()
    plain = adapter_for(model, folder, "attn_implementation=sdpa&dtype=auto&prefix_cache=false")
    out["oom_path"] = _step(lambda: oom_path(plain, VOCAB, lengths[1], cpu), budget, 60)
    return out


def _step(fn: Any, budget: Budget, estimate_s: float) -> dict[str, Any]:
    if not budget.allows(estimate_s):
        return {"status": "skipped", "reason": f"time budget ({budget.left():.0f} s left, needs ~{estimate_s:.0f} s)"}
    try:
        return fn()
    except Exception as exc:  # one failing step does not lose the others
        return {"status": "error", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}


def table(result: dict[str, Any]) -> str:
    """A markdown summary of a result: one row per model, kernel and length, then one line per other check."""
    env = result["environment"]
    lines = [
        f"Device: {env.get('device_name')} ({env['mode']}; torch {env['torch']}, CUDA {env.get('cuda')}, "
        f"flash-attn {'installed' if env.get('flash_attn_installed') else 'not installed'}), "
        f"{result.get('seconds')} s in all.\n",
        "| model | kernel | prompt tokens | status | s | TTFT s | prefill tok/s | decode tok/s | peak MiB |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for name, entry in result["models"].items():
        runs = [(k, g["rows"]) for k, g in entry.get("generation", {}).items()]
        if "longest" in entry:
            runs.append(("sdpa (longest)", entry["longest"]["rows"]))
        for kernel, rows in runs:
            for r in rows:
                cells = [r.get(k) for k in ("seconds", "ttft_s", "prefill_tokens_per_s", "decode_tokens_per_s")]
                shown = ["" if c is None else f"{c}" for c in cells]
                peak = r.get("peak_device_mb")
                status = r["status"] if r["status"] != "skipped" else f"skipped ({r.get('reason')})"
                lines.append(
                    f"| {name} | {kernel} | {r['length']} | {status} | {' | '.join(shown)} | "
                    f"{'' if peak is None else peak} |"
                )
        if "error" in entry:
            lines.append(f"| {name} | | | error: {entry['error']} | | | | | |")
    lines.append("")
    for name, entry in result["models"].items():
        for key, label in (
            ("batch_auto_vs_1", "batch_size=auto vs 1"),
            ("prefix_cache", "prefix cache"),
            ("oom_path", "out of memory"),
        ):
            if key in entry:
                lines.append(f"- {name}, {label}: `{json.dumps(_brief(entry[key]))}`")
    for key, label in (("probe_cuda_vs_cpu", "probe rows"), ("minilm_cuda_vs_cpu", "MiniLM")):
        if key in result:
            lines.append(f"- {label}: `{json.dumps(_brief(result[key]))}`")
    return "\n".join(lines) + "\n"


def _brief(value: Any) -> Any:
    """A result without its long per-request fields (for the summary lines)."""
    if isinstance(value, dict):
        drop = {"prefill_s", "decode_s", "prefill_tokens_per_s", "decode_tokens_per_s", "completion_tokens"}
        return {k: _brief(v) for k, v in value.items() if k not in drop}
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="the CPU half: tiny shapes on the CPU")
    p.add_argument("--out", type=Path, default=None, help="result JSON (default: results/gpu.json; --cpu: stdout)")
    p.add_argument("--budget", type=float, default=TIME_BUDGET_S, help="seconds the run may take")
    args = p.parse_args(argv)
    result = run(args.cpu, args.budget)
    text = json.dumps(result, indent=1, default=str) + "\n"
    out = args.out or (None if args.cpu else RESULTS / "gpu.json")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        log(f"wrote {out}")
    print(table(result), file=sys.stderr)
    if args.cpu and args.out is None:
        print(json.dumps(result, default=str))
    bad = [n for n, e in result["models"].items() if "error" in e]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
