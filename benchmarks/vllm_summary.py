"""The `vllm` bench part's summary: per backend its seconds per sample, lm-eval's time over it, what each lever bought,
the share of the prefix-sharing bound, the score, and how many prompts and replies equal `hf:`'s."""

from __future__ import annotations

import statistics
from typing import Any


def summarize(results: dict[str, Any], bound: float) -> dict[str, Any]:
    """Per backend: seconds per sample of its `ours` pass, lm-eval's over it, what each lever bought (the pass
    without it over the pass with it), the prefix-sharing speed-up as a share of the bound, the score, and how
    many prompt token counts and replies equal `hf:`'s."""
    peer = results.get("lm_eval", {})
    peer_s = by_key(peer)["ours"]["seconds_per_sample"] if "passes" in peer else None
    hf = by_key(results.get("hf", {}))
    ref = {r["id"]: r for r in hf["ours"]["rows"]} if "ours" in hf else {}
    out: dict[str, Any] = {}
    for name, res in results.items():
        passes = by_key(res)
        if "ours" not in passes:
            out[name] = {"error": res.get("error", "no result")}
            continue
        ours = passes["ours"]
        s = ours["seconds_per_sample"]
        entry: dict[str, Any] = {
            "seconds_per_sample": s,
            "runs_s_per_sample": ours.get("runs_s_per_sample", [s]),
            "per_length_s": ours.get("per_length_s") or {},
            "engine_start_s": res.get("engine_start_s"),
            "score": round(statistics.fmean(r["score"] for r in ours["rows"]), 3) if ours["rows"] else None,
        }
        if peer_s is not None:
            entry["peer_over_ours"] = round(peer_s / s, 3)  # > 1: ours is faster than lm-eval's vLLM backend
        bought = {}
        pairs = (("adjacency", "no_adjacency"), ("batching", "no_batching"), ("suffix_chunk", "no_suffix_chunk"))
        for lever, key in pairs:
            if key in passes:
                bought[lever] = round(passes[key]["seconds_per_sample"] / s, 3)
        if "no_prefix" in passes:  # in the backend's own configuration
            bought["prefix"] = round(passes["no_prefix"]["seconds_per_sample"] / s, 3)
        elif "no_prefix_one" in passes:  # the server: both at one request in flight
            bought["prefix"] = round(
                passes["no_prefix_one"]["seconds_per_sample"] / passes["no_batching"]["seconds_per_sample"], 3
            )
        if "prefix" in bought:
            entry["share_of_bound"] = round(bought["prefix"] / bound, 3)
        entry["lever_speedups"] = bought
        if ref and name != "hf":
            same = [r for r in ours["rows"] if r["id"] in ref]
            entry["prompt_tokens_equal_hf"] = sum(r["prompt_tokens"] == ref[r["id"]]["prompt_tokens"] for r in same)
            entry["text_equal_hf"] = sum(r["text"] == ref[r["id"]]["text"] for r in same)
            entry["compared_to_hf"] = len(same)
        if name == "lm_eval":
            entry["same_ids_as_ours"] = sum(bool(r.get("same_ids_as_ours")) for r in ours["rows"])
        out[name] = entry
    return out


def by_key(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["key"]: p for p in res.get("passes", [])}
