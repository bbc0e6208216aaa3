"""The `vllm` bench part's `hf` job: SmolLM2 through `hf:` in this venv, one adapter per lane (ours, no prefix reuse, no
suffix chunks, round-robin order), interleaved request by request and checkpointed after each."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.environment import versions
from benchmarks.progress import log
from benchmarks.vllm_cache_blocks import ideal_cached
from benchmarks.vllm_checkpoint import Checkpoint
from benchmarks.vllm_grid import MODEL, build_grid, round_robin, serving_order, warm_request
from benchmarks.vllm_passes import pass_record, prefix_only, row


def hf_job(params: dict[str, Any]) -> dict[str, Any]:
    """`hf:` SmolLM2 fp32, batch 1 (the CPU default), an adapter per lane, each with its own prefix cache: the
    runner's order with the cache (ours), the same order without it (`prefix_cache=false`), the same with the cache
    but the part after a cached prefix prefilled in one step (no suffix chunks), and (all levers) the round-robin
    order with the cache, interleaved request by request so that load drift on a shared machine hits them alike."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    t0 = time.perf_counter()
    queries = ("", "?prefix_cache=false", "", "")[: 3 if prefix_only(params) else 4]
    models = [load_model(parse_spec(f"hf:{MODEL}{q}")) for q in queries]
    load_s = (time.perf_counter() - t0) / len(models)
    models[2].prefix_cache.chunk_suffix = False
    task, samples, requests = build_grid(models[0].tokenizer, params)
    bound = [m.bind(task, samples) for m in models]
    order = serving_order(bound[0], samples, requests)
    lanes = [
        ("ours", "ours (runner order, prefix cache)", bound[0], order),
        ("no_prefix", "no prefix reuse (prefix_cache=false)", bound[1], order),
        ("no_suffix_chunk", "prefix cache, the suffix after it in one step", bound[2], order),
    ]
    if not prefix_only(params):
        lanes.append(("no_adjacency", "round-robin order (prefix cache)", bound[3], round_robin(order, samples)))
    warm = warm_request(order)
    for b in bound:
        b.generate([warm])
    ids = [s.id for s in samples]
    checkpoint = Checkpoint("hf", params)
    saved = checkpoint.load(ids) or {}
    if set(saved.get("rows") or {k: 0 for k, *_ in lanes}) != {k for k, *_ in lanes}:
        log(f"  {checkpoint.path} holds other lanes: measuring afresh")
        saved = {}
    rows: dict[str, list[dict[str, Any]]] = saved.get("rows") or {k: [] for k, *_ in lanes}
    per_len: dict[str, dict[int, list[float]]] = {
        k: {int(n): v for n, v in (saved.get("per_len") or {}).get(k, {}).items()} for k, *_ in lanes
    }
    spent = saved.get("spent") or dict.fromkeys(rows, 0.0)
    earlier = saved.get("reused") or {"tokens": 0, "requests": 0}
    first = int(saved.get("next", 0))
    resumed = checkpoint.resumes(saved, "from_request", first)
    if first:
        log(f"  resuming at request {first + 1}/{len(order)} from {checkpoint.path}")
    stats = models[0].prefix_cache.stats
    for k in range(first, len(order)):
        for key, _, b, items in lanes:
            t = time.perf_counter()
            (pred,) = b.generate([items[k][1]])
            took = time.perf_counter() - t
            spent[key] += took
            rows[key].append(row(samples, items[k], pred))
            per_len[key].setdefault(rows[key][-1]["length"], []).append(took)
        reused = {"tokens": earlier["tokens"] + stats.reused_tokens, "requests": earlier["requests"] + stats.reused}
        state = {"next": k + 1, "rows": rows, "per_len": per_len, "spent": spent, "reused": reused, "resumed": resumed}
        checkpoint.save(state, ids)
        log(f"  request {k + 1}/{len(order)}: " + ", ".join(f"{key} {spent[key]:.0f} s" for key in spent))
    passes = [pass_record(key, label, 1, spent[key], rows[key], per_len[key]) for key, label, _, _ in lanes]
    rendered = [models[0].render(r) for _, r, _ in order]
    result = {
        "backend": "hf",
        "spec": f"hf:{MODEL}",
        "engine_start_s": round(load_s, 2),
        "torch_threads": _torch_threads(),
        "prefix_cache": {  # the `ours` lane's cache (its one warm-up request shares nothing)
            "reused_tokens": earlier["tokens"] + stats.reused_tokens,
            "reused_requests": earlier["requests"] + stats.reused,
            "ideal_cached_tokens": ideal_cached(rendered, 1),
            "prompt_tokens": sum(len(x) for x in rendered),
        },
        "passes": passes,
        "versions": versions(("torch", "transformers")),
    }
    if resumed:  # a resumed lane starts its cache empty: its first request after the stop reuses nothing
        result["resumed"] = resumed
    return result


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())
