"""Prompt tokens the `hf` prefix cache spares on the reference suite's SmolLM2 cells, per serving order: counted.

For each task of the suite's `smollm2-135m` part, the samples a run serves (built as `run` builds them) are rendered
to the exact ids `hf:` sends (chat template, answer prefix: `models/hf/adapter.render_ids`) and walked in three
orders: the runner's (`run.runner.serving_order`: a length's contexts in the sorted order of their text), the
order it replaced (contexts by length, then depth) and no reuse. As in `models/hf/prefix_cache.py`, a request
reuses the previous request's cache when their ids share at least PREFIX_MIN_TOKENS leading tokens (its last
token is always prefilled); every other token is prefilled. No model runs: the counts are exact, and on CPU
prefill time grows with the tokens prefilled (the runs' seconds are in the run files).

`python -m benchmarks.prefix_order OUT.json` (or `make bench BENCH_ARGS='--parts prefix_order'`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longctx_eval.models.hf.prefix_cache import PREFIX_MIN_TOKENS, shared_prefix
from longctx_eval.sample import Request, Sample, stratum_of

PART = "smollm2-135m"
"""The reference suite's part whose cells this counts."""


def depth_order(measured: list[tuple[int, Request, int]], samples: Sequence[Sample]) -> list[tuple[int, Request, int]]:
    """The serving order before 2026-12-01: one context's requests together, contexts by length then depth."""
    first: dict[str, tuple[int, float, int, int]] = {}
    for i, r, n in measured:
        length, depth = stratum_of(samples[i])
        key = (length, 2.0 if depth is None else depth, n, i)
        held = first.get(r.context)
        first[r.context] = min(key, held) if held else key
    return sorted(measured, key=lambda m: (*first[m[1].context], m[2], m[0], m[1].part))


def prefilled(rows: Sequence[Sequence[int]], min_tokens: int = PREFIX_MIN_TOKENS) -> int:
    """Tokens prefilled when `rows` are sent in this order through a cache of the previous prompt."""
    total, held = 0, None
    for ids in rows:
        common = 0 if held is None else shared_prefix(list(held), list(ids[:-1]))
        total += len(ids) - (common if common >= min_tokens else 0)
        held = ids
    return total


def count_plan(plan: Any, seed: int, tokenizer: Any, hf_tok: Any) -> list[dict[str, Any]]:
    """Per length of one task plan: requests, prompt tokens, and tokens prefilled in each order."""
    from longctx_eval.models.hf.adapter import render_ids
    from longctx_eval.run.plan_samples import plan_samples
    from longctx_eval.run.runner import serving_order

    built = plan_samples(plan, seed, tokenizer)
    samples = built.samples
    task_of = [g.task for g in built.groups for _ in g.samples]
    measured = [(i, r, 0) for i, s in enumerate(samples) for r in task_of[i].requests(s)]
    ids = {id(r): render_ids(hf_tok, True, r) for _, r, _ in measured}
    rows = []
    for length in sorted({stratum_of(s)[0] for s in samples}):
        at = [m for m in measured if stratum_of(samples[m[0]])[0] == length]
        counts = {
            "runner": prefilled([ids[id(r)] for _, r, _ in serving_order(at, samples)]),
            "depth_order": prefilled([ids[id(r)] for _, r, _ in depth_order(at, samples)]),
        }
        prompt = sum(len(ids[id(r)]) for _, r, _ in at)
        rows.append(
            {
                "task": plan.info.name,
                "length": length,
                "requests": len(at),
                "contexts": len({r.context for _, r, _ in at}),
                "prompt_tokens": prompt,
                "prefilled_runner": counts["runner"],
                "prefilled_depth_order": counts["depth_order"],
                "saved_runner": round(1 - counts["runner"] / prompt, 4),
                "saved_depth_order": round(1 - counts["depth_order"] / prompt, 4),
            }
        )
    return rows


def run_prefix_order(seed: int = 0) -> dict[str, Any]:
    """Every generation task of the reference suite's SmolLM2 part, counted per length."""
    from longctx_eval.discovery import discover
    from longctx_eval.models.model_source import hf_tokenizer_pair
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.run.suite import load_suite

    t0 = time.perf_counter()
    hf_tok, tokenizer = hf_tokenizer_pair(parse_spec(PART))
    plans = load_suite("reference", discover())[PART]
    rows = [
        row
        for plan in plans
        if plan.info.name != "coref_synthetic"
        for row in count_plan(plan, seed, tokenizer, hf_tok)
    ]
    prompt = sum(r["prompt_tokens"] for r in rows)
    totals = {k: sum(r[f"prefilled_{k}"] for r in rows) for k in ("runner", "depth_order")}
    return {
        "part": PART,
        "seed": seed,
        "min_shared_tokens": PREFIX_MIN_TOKENS,
        "rows": rows,
        "prompt_tokens": prompt,
        "prefilled": totals,
        "prefill_speedup_bound": {k: round(prompt / v, 3) for k, v in totals.items()},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def table(result: dict[str, Any]) -> str:
    """The counts as a markdown table, one row per task and length, then the totals."""
    head = (
        "| task | length | requests | contexts | prompt tokens | prefilled, runner order | saved | "
        "prefilled, depth order | saved |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    body = "".join(
        f"| {r['task']} | {r['length']} | {r['requests']} | {r['contexts']} | {r['prompt_tokens']:,} | "
        f"{r['prefilled_runner']:,} | {r['saved_runner']:.0%} | {r['prefilled_depth_order']:,} | "
        f"{r['saved_depth_order']:.0%} |\n"
        for r in result["rows"]
    )
    p, b = result["prefilled"], result["prefill_speedup_bound"]
    total = (
        f"| **all** | | {sum(r['requests'] for r in result['rows'])} | | {result['prompt_tokens']:,} | "
        f"{p['runner']:,} | {1 - p['runner'] / result['prompt_tokens']:.0%} | {p['depth_order']:,} | "
        f"{1 - p['depth_order'] / result['prompt_tokens']:.0%} |\n"
    )
    return (
        head
        + body
        + total
        + f"\nPrompt tokens ÷ prefilled: **{b['runner']}x** in the runner's order, {b['depth_order']}x in the depth "
        "order it replaced (prefill only: generated tokens are never shared).\n"
    )


if __name__ == "__main__":
    result = run_prefix_order()
    Path(sys.argv[1]).write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
