"""What prefix reuse bought in the `vllm` bench part, set against what it could have bought.

The issue's bound, d / (1 + sum over the other depths of (1 - depth)), counts prefilled tokens: it is what prefix
sharing can save on the prefill of one haystack's d samples. A whole pass also decodes, and no sample's decode is
shared, so on a whole pass the bound is out of reach by construction. This module puts each backend's speed-up
beside three measures:
- the prompt tokens its cache served, against the most the serving order allows (exact counts);
- the prefill time it saved, where each request's time to first token was measured (batch-1 passes: `hf:`, and
  `openai:` at one request in flight);
- the compute bound: what the tokens its cache served could save in prefill time, from a prefill cost model
  fitted to the pass without reuse (time to first token = c + a n + b n^2 for n prompt tokens: the n^2 term is
  causal attention). A suffix of s tokens after a cached prefix of p costs a s + b (n^2 - p^2): it skips the
  prefix's own work but still attends to all of it, so on long prompts the token bound is out of reach in time
  for any exact attention whose fresh prefill skips the masked half;
- the attainable whole-pass speed-up: the compute bound applied to the prefill share of the pass without reuse,
  with decode unchanged.
Every figure is computed from the rows and counts a run stored, so an older result file shows what it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PAIRS = {"hf": ("ours", "no_prefix"), "vllm": ("ours", "no_prefix"), "served": ("no_batching", "no_prefix_one")}
"""Per backend, (the pass with prefix reuse, the same pass without it), compared at equal batching."""

LABELS = {"hf": "ours `hf:`", "vllm": "ours `vllm:` (in process)", "served": "ours `openai:` + `vllm serve`"}
FIT_LENGTHS = 3
"""Distinct grid lengths a prefill cost model needs: three terms, so one or two lengths leave it undetermined."""


def prefill_cost_model(rows: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """Least squares of time to first token on (1, n, n^2) over a pass without reuse (n: prompt tokens), with a and
    b kept non-negative (a term that fits negative is dropped); None without times or with too few lengths."""
    import numpy as np

    pts = [(float(r["prompt_tokens"]), float(r["ttft_s"])) for r in rows if r.get("ttft_s") is not None]
    if len(pts) != len(rows) or len({r.get("length") for r in rows}) < FIT_LENGTHS:
        return None
    n = np.array([p[0] for p in pts]) / 1000.0  # in thousands of tokens, for conditioning
    y = np.array([p[1] for p in pts])
    best: tuple[float, dict[str, float]] | None = None
    for terms in ((0, 1, 2), (0, 1), (0, 2)):
        x = np.stack([n**k for k in terms], axis=1)
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        if any(c < 0 for k, c in zip(terms, coef, strict=True) if k):
            continue
        fit = dict.fromkeys(("c", "a", "b"), 0.0) | {"cab"[k]: float(c) for k, c in zip(terms, coef, strict=True)}
        residual = float(np.sum((x @ coef - y) ** 2))
        if best is None or residual < best[0]:
            best = (residual, fit)
    if best is None:
        return None
    spread = float(np.sum((y - y.mean()) ** 2))
    return {**best[1], "r2": round(1 - best[0] / spread, 4) if spread else 1.0}


def prefill_cost(model: dict[str, float], n: int, cached: int = 0) -> float:
    """Modelled prefill seconds of an n-token prompt whose first `cached` tokens' keys are already held."""
    k, p = n / 1000.0, cached / 1000.0
    return model["c"] + model["a"] * (k - p) + model["b"] * (k * k - p * p)


def _cached_by_row(name: str, results: dict[str, Any], rows: Sequence[dict[str, Any]]) -> tuple[list[int], str] | None:
    """Prompt tokens each row of a pass with reuse found cached, and where the counts came from: the rows' own, or
    for the server (which reports none) those of the same samples in the `vllm:` pass of this grid (the same engine,
    block size and order)."""
    own = [r.get("cached_tokens") for r in rows]
    if all(x is not None for x in own):
        return [int(x) for x in own], "own"
    if name != "served":
        return None
    vllm_rows = {p["key"]: p for p in (results.get("vllm") or {}).get("passes", [])}.get("ours", {}).get("rows", [])
    by_id = {r["id"]: r.get("cached_tokens") for r in vllm_rows}
    found = [by_id.get(r.get("id")) for r in rows]
    return None if any(x is None for x in found) else ([int(x) for x in found], "vllm")


def compute_bound(
    name: str, results: dict[str, Any], with_rows: Sequence[dict[str, Any]], without_rows: Sequence[dict[str, Any]]
) -> dict[str, Any] | None:
    """The prefill speed-up the reuse pass's cached tokens allow under the cost model fitted to the pass without
    reuse: modelled fresh prefills over modelled prefills of what was left; None where either is missing."""
    model = prefill_cost_model(without_rows)
    counted = _cached_by_row(name, results, with_rows)
    if model is None or counted is None:
        return None
    cached, source = counted
    fresh = sum(prefill_cost(model, int(r["prompt_tokens"])) for r in with_rows)
    left = sum(prefill_cost(model, int(r["prompt_tokens"]), c) for r, c in zip(with_rows, cached, strict=True))
    return {"model": model, "bound": round(fresh / left, 3), "cached_from": source}


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
            e["prefill_bought"] = round(t_without / t_with, 3)
            e["prefill_share_of_bound"] = round(t_without / t_with / bound, 3)
            e["prefill_fraction"] = round(fraction, 3)
            compute = compute_bound(name, results, w["rows"], wo["rows"])
            if compute is not None:
                attainable = 1 / (fraction / compute["bound"] + 1 - fraction)
                e["compute"] = compute
                e["prefill_share_of_compute"] = round(t_without / t_with / compute["bound"], 3)
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
    """Markdown: per backend, the cache's counts, the whole-pass and prefill speed-ups against the token bound, the
    compute bound and what the pass's decode leaves attainable, the speed-up per length, and the fitted prefill cost
    models; empty when nothing applies."""
    bound = float(result["prefix_bound"])
    acc = account(result.get("backends", {}), bound)
    if not acc:
        return ""
    lengths = [str(x) for x in result["grid"]["lengths"]]
    head = (
        "| backend | cache served / ideal (prompt tokens) | token bound | whole pass bought | of 1.43x "
        "| prefill share (no reuse) | prefill time bought | of 1.43x | compute bound | of compute bound "
        "| attainable | of attainable | "
        + " | ".join(f"bought at {x}" for x in lengths)
        + " |\n|"
        + "---|" * (12 + len(lengths))
        + "\n"
    ).replace("1.43x", f"{bound:.2f}x")
    rows, models = [], []
    for name, e in acc.items():
        c = e.get("cache")
        served = f"{c['cached_tokens']:,} / {c['ideal_cached_tokens']:,} of {c['prompt_tokens']:,}" if c else ""
        per = e.get("per_length_bought", {})
        compute = e.get("compute") or {}
        rows.append(
            f"| {LABELS[name]} | {served} | {_x(c['token_bound']) if c else ''} | {_x(e['whole_pass_bought'])} "
            f"| {_pct(e['share_of_bound'])} | {_pct(e.get('prefill_fraction'))} | {_x(e.get('prefill_bought'))} "
            f"| {_pct(e.get('prefill_share_of_bound'))} | {_x(compute.get('bound'))} "
            f"| {_pct(e.get('prefill_share_of_compute'))} | {_x(e.get('attainable'))} "
            f"| {_pct(e.get('share_of_attainable'))} | " + " | ".join(_x(per.get(x)) for x in lengths) + " |"
        )
        if compute:
            models.append(_model_line(name, compute, max(int(x) for x in lengths)))
    note = (
        f"What prefix reuse bought against what it could buy (`benchmarks/vllm_prefix_accounting.py`). The bound "
        f"({bound:.2f}x) counts prefilled tokens; a whole pass also decodes, unshared. `cache served / ideal`: prompt "
        "tokens the pass with reuse did not prefill, against the most its serving order allows from the prompts "
        "before each (in whole cache blocks for vLLM; `hf:` keeps only the previous prompt's cache, from 256 shared "
        "tokens); `token bound`: all prompt tokens over those left to prefill at the ideal. `prefill time bought`: "
        "summed times to first token without reuse over with it. `compute bound`: the prefill time the tokens the "
        "cache served can save at most, from a cost model fitted to the pass without reuse (time to first token = "
        "c + a n + b n^2, n prompt tokens; the n^2 term is causal attention): a prompt of n tokens with p of them "
        "cached costs c + a (n - p) + b (n^2 - p^2), since its suffix still attends to the whole prefix. Where "
        "attention is a large part of a fresh prefill the compute bound lies well under the token bound, and no "
        "exact attention gets past it. `attainable`: the compute bound applied to the prefill share of the pass "
        "without reuse (times to first token over the pass), decode unchanged. Batch-1 passes only for times to "
        "first token and per-length figures: `hf:`, and `openai:` at one request in flight (its cached tokens are "
        "those `vllm:` reported for the same samples: the server reports none, and it is the same engine, block size "
        "and order); `vllm:` serves the task in one engine call, so its passes give a whole-pass time and vLLM's "
        "cache counts. A compute bound needs three lengths or more to fit.\n"
    )
    fitted = ("\n".join(models) + "\n") if models else ""
    return head + "\n".join(rows) + "\n\n" + note + ("\n" + fitted if fitted else "")


def _model_line(name: str, compute: dict[str, Any], longest: int) -> str:
    """One fitted prefill cost model, with the share of a fresh prefill at the longest length its n^2 term takes."""
    m = compute["model"]
    k = longest / 1000.0
    total = m["c"] + m["a"] * k + m["b"] * k * k
    share = m["b"] * k * k / total if total > 0 else 0.0
    return (
        f"- {LABELS[name]} prefill cost model (pass without reuse, n in thousands of tokens): "
        f"{m['c']:.3f} + {m['a']:.3f} n + {m['b']:.4f} n^2 s (R^2 {m['r2']:.3f}); at {longest} tokens the n^2 term "
        f"is {share:.0%} of a fresh prefill."
    )
