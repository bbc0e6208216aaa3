"""The timed passes of the `vllm` bench part's jobs: one served request as a row, a pass over an order in batches, its
record, repeats merged, a resumable plan of passes, and the levers a pass can switch off."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.progress import log


def prefix_only(params: dict[str, Any]) -> bool:
    """Whether this job runs only the passes that switch prefix reuse off (`--vllm-levers prefix`)."""
    return params.get("levers") == "prefix"


def row(samples: Sequence[Any], item: tuple[int, Any, int], pred: Any) -> dict[str, Any]:
    """One served request as recorded: its cell, the prompt tokens sent, the reply and its containment score."""
    from longctx_eval import contains_answer

    i, _, n = item
    s = samples[i]
    gold = s.gold["answers"][0]
    data = pred.data or {}
    ttft = (data.get("timing") or {}).get("ttft_s", (data.get("serving") or {}).get("ttft_s"))
    return {
        "id": s.id,
        "length": int(s.metadata["target_tokens"]),
        "depth": float(s.metadata["depth"]),
        "prompt_tokens": n,
        "completion_tokens": pred.completion_tokens,
        "status": pred.status,
        "text": pred.text,
        "score": float(contains_answer(pred.text or "", gold)) if pred.status == "ok" else 0.0,
        "ttft_s": ttft,  # hf: the call's time to first token; the server: the streamed first token
        "cached_tokens": data.get("cached_tokens"),  # vllm: prompt tokens its prefix cache served
        "prefill_chunk": data.get("prefill_chunk"),  # hf: tokens per prefill step, where it prefilled in steps
    }


def timed_pass(
    key: str,
    label: str,
    order: list[tuple[int, Any, int]],
    samples: Sequence[Any],
    send: Callable[[list[Any]], list[Any]],
    batch: int,
    before_each: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Serve `order` in batches of `batch` through `send`: the pass's wall time, seconds per sample per length
    (each batch's time shared by its requests: meaningful per length at batch 1 only) and the rows."""
    rows, per_len = [], {}
    started = time.perf_counter()
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        if before_each is not None:
            before_each()
        t0 = time.perf_counter()
        preds = send([r for _, r, _ in chunk])
        share = (time.perf_counter() - t0) / len(chunk)
        for item, pred in zip(chunk, preds, strict=True):
            rows.append(row(samples, item, pred))
            per_len.setdefault(rows[-1]["length"], []).append(share)
        if len(chunk) < len(order):  # one engine call logs once, at the end
            log(f"  {key}: {len(rows)}/{len(order)} requests, {time.perf_counter() - started:.0f} s")
    wall = time.perf_counter() - started
    log(f"  {label}: {wall:.1f} s, {len(rows)} samples")
    return pass_record(key, label, batch, wall, rows, per_len)


def pass_record(
    key: str, label: str, batch: int, wall: float, rows: list[dict[str, Any]], per_len: dict[int, list[float]]
) -> dict[str, Any]:
    return {
        "key": key,
        "label": label,
        "batch": batch,
        "seconds": round(wall, 2),
        "seconds_per_sample": round(wall / max(1, len(rows)), 3),
        "per_length_s": {str(k): round(sum(v) / len(v), 3) for k, v in sorted(per_len.items())} if batch == 1 else {},
        "rows": rows,
    }


def merge_repeats(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per pass key, in first-run order: seconds per sample the mean over its repeats (each kept in
    `runs_s_per_sample`), the rows of its first run, and whether every repeat gave the same texts."""
    out: dict[str, dict[str, Any]] = {}
    for p in runs:
        held = out.get(p["key"])
        if held is None:
            out[p["key"]] = {**p, "runs_s_per_sample": [p["seconds_per_sample"]], "repeats_agree": True}
            continue
        held["runs_s_per_sample"].append(p["seconds_per_sample"])
        held["repeats_agree"] &= [r["text"] for r in held["rows"]] == [r["text"] for r in p["rows"]]
        n = len(held["runs_s_per_sample"])
        held["seconds"] = round(held["seconds"] + p["seconds"], 2)
        held["seconds_per_sample"] = round(sum(held["runs_s_per_sample"]) / n, 3)
        held["per_length_s"] = {
            k: round((v * (n - 1) + p["per_length_s"][k]) / n, 3) for k, v in held["per_length_s"].items()
        }
    return list(out.values())


def run_plan(
    plan: Sequence[Callable[[], dict[str, Any]]],
    state: dict[str, Any],
    save: Callable[[dict[str, Any]], None],
    peer: Callable[[], dict[str, Any]] | None = None,
    peer_after: Sequence[int] = (),
) -> dict[str, Any]:
    """Run the passes of `plan` that `state` (a stopped sitting's: done, runs, peer_runs, peer_steps) has not, and
    the peer's pass after each pass in `peer_after` (after a resume: before the next pass), saving the state after
    every one; the state at the end."""
    state = {"done": 0, "runs": [], "peer_runs": [], "peer_steps": [], **state}
    for i, step in enumerate(plan):
        if i >= state["done"]:
            state["runs"].append(step())
            state["done"] = i + 1
            save(state)
        if peer is not None and i in peer_after and i not in state["peer_steps"]:
            state["peer_runs"].append(peer())
            state["peer_steps"].append(i)
            save(state)
    return state


def salted(llm: Any) -> Callable[..., Any]:
    """`llm.generate` with a distinct cache_salt on every prompt: vLLM shares no cached block between them."""
    inner, counter = llm.generate, [0]

    def generate(prompts: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        salted = []
        for p in prompts:
            counter[0] += 1
            salted.append({**p, "cache_salt": f"bench-{counter[0]}"})
        return inner(salted, *args, **kwargs)

    return generate
