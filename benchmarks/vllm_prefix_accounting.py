"""What prefix reuse bought in the `vllm` bench part, set against what it could have bought.

The issue's bound, d / (1 + sum over the other depths of (1 - depth)), counts prefilled tokens: it is what prefix
sharing can save on the prefill of one haystack's d samples. A whole pass also decodes, and no sample's decode is
shared, so on a whole pass the bound is out of reach by construction. This module puts each backend's speed-up
beside three measures:
- the prompt tokens its cache served, against the most the serving order allows (exact counts);
- the prefill time it saved, where each request's time to first token was measured (batch-1 passes: `hf:`, and
  `openai:` at one request in flight);
- the attainable whole-pass speed-up: the bound applied to the prefill share of the pass without reuse, with
  decode unchanged. Prefill time is taken as proportional to the tokens prefilled, which flatters the bound:
  a suffix prefilled after a cached prefix still attends to all of it.
Every figure is computed from the rows and counts a run stored, so an older result file shows what it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PAIRS = {"hf": ("ours", "no_prefix"), "vllm": ("ours", "no_prefix"), "served": ("no_batching", "no_prefix_one")}
"""Per backend, (the pass with prefix reuse, the same pass without it), compared at equal batching."""

LABELS = {"hf": "ours `hf:`", "vllm": "ours `vllm:` (in process)", "served": "ours `openai:` + `vllm serve`"}


def _ttft_total(rows: Sequence[dict[str, Any]]) -> float | None:
    """The summed time to first token of a pass's rows; None unless every row has one."""
    xs = [r.get("ttft_s") for r in rows]
    if not xs or any(x is None for x in xs):
        return None
    return float(sum(xs))


def _cache(name: str, res: dict[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """(cached, ideal, all) prompt tokens of the pass with reuse: hf's own counter, or vLLM's per-request counts."""
    if name == "hf" and "prefix_cache" in res:
        c = res["prefix_cache"]
        cached, ideal, total = c["reused_tokens"], c["ideal_cached_tokens"], c["prompt_tokens"]
    elif name == "vllm" and "ideal_cached_tokens" in res.get("engine", {}):
        counts = [r.get("cached_tokens") for r in rows]
        if any(x is None for x in counts):
            return None
        cached, ideal, total = sum(counts), res["engine"]["ideal_cached_tokens"], res["engine"]["prompt_tokens"]
    else:
        return None
    return {
        "cached_tokens": int(cached),
        "ideal_cached_tokens": int(ideal),
        "prompt_tokens": int(total),
        "share_of_ideal": round(cached / ideal, 3) if ideal else None,
        "token_bound": round(total / (total - ideal), 3),
        "tokens_bought": round(total / (total - cached), 3),
    }


def account(results: dict[str, Any], bound: float) -> dict[str, dict[str, Any]]:
    """Per backend with both passes: the whole-pass speed-up and its share of `bound`; the cache's counts; where
    times to first token exist, the prefill speed-up, the prefill share of the pass without reuse and the
    attainable whole-pass speed-up; and, for batch-1 passes, the speed-up at each length."""
    out: dict[str, dict[str, Any]] = {}
    for name, (with_key, without_key) in PAIRS.items():
        passes = {p["key"]: p for p in (results.get(name) or {}).get("passes", [])}
        if with_key not in passes or without_key not in passes:
            continue
        w, wo = passes[with_key], passes[without_key]
        bought = wo["seconds_per_sample"] / w["seconds_per_sample"]
        e: dict[str, Any] = {"whole_pass_bought": round(bought, 3), "share_of_bound": round(bought / bound, 3)}
        cache = _cache(name, results[name], w["rows"])
        if cache is not None:
            e["cache"] = cache
        t_with, t_without = _ttft_total(w["rows"]), _ttft_total(wo["rows"])
        if t_with and t_without and w["batch"] == wo["batch"] == 1:
            fraction = t_without / (wo["seconds_per_sample"] * len(wo["rows"]))
            attainable = 1 / (fraction / bound + 1 - fraction)
            e["prefill_bought"] = round(t_without / t_with, 3)
            e["prefill_share_of_bound"] = round(t_without / t_with / bound, 3)
            e["prefill_fraction"] = round(fraction, 3)
            e["attainable"] = round(attainable, 3)
            e["share_of_attainable"] = round(bought / attainable, 3)
        per_w, per_wo = w.get("per_length_s") or {}, wo.get("per_length_s") or {}
        if per_w and per_wo:
            e["per_length_bought"] = {k: round(per_wo[k] / per_w[k], 3) for k in per_w if k in per_wo}
        out[name] = e
    return out


def _x(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:.0%}"


def accounting_table(result: dict[str, Any]) -> str:
    """Markdown: per backend, the cache's counts, the whole-pass and prefill speed-ups against the bound and
    against what the pass's decode leaves attainable, and the speed-up per length; empty when nothing applies."""
    bound = float(result["prefix_bound"])
    acc = account(result.get("backends", {}), bound)
    if not acc:
        return ""
    lengths = [str(x) for x in result["grid"]["lengths"]]
    head = (
        "| backend | cache served / ideal (prompt tokens) | token bound | whole pass bought | of 1.43x "
        "| prefill share (no reuse) | attainable | of attainable | prefill time bought | of 1.43x | "
        + " | ".join(f"bought at {x}" for x in lengths)
        + " |\n|"
        + "---|" * (10 + len(lengths))
        + "\n"
    ).replace("1.43x", f"{bound:.2f}x")
    rows = []
    for name, e in acc.items():
        c = e.get("cache")
        served = f"{c['cached_tokens']:,} / {c['ideal_cached_tokens']:,} of {c['prompt_tokens']:,}" if c else ""
        per = e.get("per_length_bought", {})
        rows.append(
            f"| {LABELS[name]} | {served} | {_x(c['token_bound']) if c else ''} | {_x(e['whole_pass_bought'])} "
            f"| {_pct(e['share_of_bound'])} | {_pct(e.get('prefill_fraction'))} | {_x(e.get('attainable'))} "
            f"| {_pct(e.get('share_of_attainable'))} | {_x(e.get('prefill_bought'))} "
            f"| {_pct(e.get('prefill_share_of_bound'))} | " + " | ".join(_x(per.get(x)) for x in lengths) + " |"
        )
    note = (
        f"What prefix reuse bought against what it could buy (`benchmarks/vllm_prefix_accounting.py`). The bound "
        f"({bound:.2f}x) counts prefilled tokens; a whole pass also decodes, unshared. `cache served / ideal`: prompt "
        "tokens the pass with reuse did not prefill, against the most its serving order allows from the prompts "
        "before each (in whole cache blocks for vLLM; `hf:` keeps only the previous prompt's cache, from 256 shared "
        "tokens); `token bound`: all prompt tokens "
        "over those left to prefill at the ideal. `attainable`: the bound applied to the prefill share of the pass "
        "without reuse (times to first token over the pass), decode unchanged, prefill time taken as proportional to "
        "the tokens prefilled (which flatters it: a suffix after a cached prefix still attends to all of it). "
        "`prefill time bought`: summed times to first token without reuse over with it. Batch-1 passes only for "
        "times to first token and per-length figures: `hf:`, and `openai:` at one request in flight; `vllm:` serves "
        "the task in one engine call, so its passes give a whole-pass time and vLLM's cache counts.\n"
    )
    return head + "\n".join(rows) + "\n\n" + note
