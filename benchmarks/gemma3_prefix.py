"""Prefix reuse on Gemma 3 270M through `hf:` against the prefix-sharing bound: the needle at one length over 5 depths
of one haystack, in the runner's serving order, with the prefix cache on (`gemma3-270m`, sliding layers recording
their past: models/hf/prefix_cache.py) and off (`gemma3-270m?prefix_cache=false`), request by request in turn so
that load drift on a shared machine hits both alike.

The bound is what a perfect cache would skip: every prompt token of a request that the previous request's prompt
already holds (its shared leading ids; the last prompt token is always prefilled). Reuse is measured in tokens (the
`cached_tokens` the adapter reports, against the bound's tokens) and in time (prefill seconds saved, the off lane's
minus the on lane's, against the off lane's prefill seconds times the bound's share of the prompt tokens: the time a
perfect cache would save if prefill time were linear in tokens). The goal (issue 37): within 15% of the bound.

`python -m benchmarks.gemma3_prefix OUT.json` (or `make bench BENCH_ARGS='--parts gemma3_prefix'`, after `make gemma3`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.progress import log

LENGTH = 8192
DEPTHS = 5
THREADS = 1
"""Torch threads: one on the 2 shared cores here (see benchmarks/gemma3_speed.py)."""


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def run_gemma3_prefix(length: int = LENGTH, depths: int = DEPTHS, threads: int = THREADS) -> dict[str, Any]:
    """Both lanes over the grid's requests; per request and in total: tokens cached, prefill and total seconds."""
    from longctx_eval.models.assets import gemma3_installed

    if not gemma3_installed():
        log("gemma3_prefix: skipped: Gemma 3 270M is not installed (`make gemma3`)")
        return {"skipped": "Gemma 3 270M is not installed (`make gemma3`)"}
    os.environ["OMP_NUM_THREADS"] = str(threads)  # the adapter keeps a thread count the environment sets
    import torch

    torch.set_num_threads(threads)
    from benchmarks.prefix_order import prefilled
    from benchmarks.vllm_grid import build_grid, depth_grid, prefix_bound, serving_order, warm_request
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    t0 = time.perf_counter()
    on, off = (load_model(parse_spec(s)) for s in ("gemma3-270m", "gemma3-270m?prefix_cache=false"))
    task, samples, requests = build_grid(on.tokenizer, {"lengths": [length], "depths": depths, "haystacks": 1})
    order = serving_order(on.bind(task, samples), samples, requests)
    for model in (on, off):
        model.generate([warm_request(order)])
    rows: list[dict[str, Any]] = []
    for k, (i, request, tokens) in enumerate(order):
        row: dict[str, Any] = {"depth": samples[i].metadata.get("depth"), "prompt_tokens": tokens}
        for name, model in (("on", on), ("off", off)):
            load = _load()
            t = time.perf_counter()
            (pred,) = model.generate([request])
            took = time.perf_counter() - t
            data = pred.data or {}
            row[name] = {
                "seconds": round(took, 3),
                "prefill_s": round(data["timing"]["ttft_s"], 3),
                "cached_tokens": int(data.get("cached_tokens") or 0),
                "reply": pred.text,
                "load": load,
            }
        rows.append(row)
        log(
            f"  gemma3_prefix {k + 1}/{len(order)} depth {row['depth']}: cached {row['on']['cached_tokens']}, "
            f"prefill {row['on']['prefill_s']:.1f} s on vs {row['off']['prefill_s']:.1f} s off (load {_load()})"
        )
    ids = [on.render(r) for _, r, _ in order]
    prompt = sum(len(x) for x in ids)
    bound_tokens = prompt - prefilled(ids, min_tokens=0)
    cached = sum(r["on"]["cached_tokens"] for r in rows)
    prefill = {lane: sum(r[lane]["prefill_s"] for r in rows) for lane in ("on", "off")}
    seconds = {lane: sum(r[lane]["seconds"] for r in rows) for lane in ("on", "off")}
    bound_time = prefill["off"] * bound_tokens / prompt
    on.close()
    off.close()
    return {
        "model": "gemma3-270m",
        "length": length,
        "depths": depth_grid(depths),
        "threads": threads,
        "rows": rows,
        "prompt_tokens": prompt,
        "bound_tokens": bound_tokens,
        "cached_tokens": cached,
        "tokens_of_bound": round(cached / bound_tokens, 4) if bound_tokens else None,
        "prefill_s": {k: round(v, 2) for k, v in prefill.items()},
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "prefill_saved_s": round(prefill["off"] - prefill["on"], 2),
        "bound_saved_s": round(bound_time, 2),
        "time_of_bound": round((prefill["off"] - prefill["on"]) / bound_time, 4) if bound_time else None,
        "prefill_speedup": round(prefill["off"] / prefill["on"], 3) if prefill["on"] else None,
        "bound_speedup": round(prompt / (prompt - bound_tokens), 3),
        "depth_bound_speedup": round(prefix_bound(depth_grid(depths)), 3),
        "replies_equal": sum(r["on"]["reply"] == r["off"]["reply"] for r in rows),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def table(result: dict[str, Any]) -> str:
    """One row per request, then the totals against the bound."""
    if "skipped" in result:
        return f"Not measured: {result['skipped']}.\n"
    head = (
        "| depth | prompt tokens | cached (on) | prefill s, on | prefill s, off | total s, on | total s, off | "
        "same reply | load |\n|---:|---:|---:|---:|---:|---:|---:|---|---|\n"
    )
    body = "".join(
        f"| {r['depth']} | {r['prompt_tokens']:,} | {r['on']['cached_tokens']:,} | {r['on']['prefill_s']:.1f} | "
        f"{r['off']['prefill_s']:.1f} | {r['on']['seconds']:.1f} | {r['off']['seconds']:.1f} | "
        f"{'yes' if r['on']['reply'] == r['off']['reply'] else 'no'} | {r['on']['load']}-{r['off']['load']} |\n"
        for r in result["rows"]
    )
    r = result
    return (
        head + body + f"\nReuse in tokens: {r['cached_tokens']:,} of the bound's {r['bound_tokens']:,} "
        f"(**{r['tokens_of_bound']:.0%}**); in prefill time: {r['prefill_saved_s']:.1f} s saved of the bound's "
        f"{r['bound_saved_s']:.1f} s (**{r['time_of_bound']:.0%}**); prefill {r['prefill_speedup']}x faster with "
        f"reuse against the bound's {r['bound_speedup']}x; {r['replies_equal']} of {len(r['rows'])} replies equal; "
        f"{r['threads']} torch thread(s).\n"
    )


if __name__ == "__main__":
    result = run_gemma3_prefix(int(sys.argv[2]) if len(sys.argv) > 2 else LENGTH)
    Path(sys.argv[1]).write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
