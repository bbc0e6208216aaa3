"""The `vllm` bench part's tables for benchmarks/results/README.md: backends side by side, the prefix accounting,
every pass, and the sittings they were measured in."""

from __future__ import annotations

from typing import Any

from benchmarks.vllm_prefix_accounting import accounting_table
from benchmarks.vllm_sittings import sittings_line

LABELS = {
    "hf": "ours `hf:`",
    "vllm": "ours `vllm:` (in process)",
    "served": "ours `openai:` + `vllm serve`",
    "lm_eval": "lm-eval 0.4.13 `--model vllm`",
}


SHOWN = ("hf", "vllm", "served", "lm_eval")


def table(result: dict[str, Any]) -> str:
    """Markdown: per backend, seconds per sample, lm-eval's over ours, what each lever bought and the prefix
    sharing's share of the bound; then every pass."""
    if "skipped" in result:
        return f"Not measured: {result['skipped']}.\n"
    summary, backends = result.get("summary", {}), result.get("backends", {})
    lengths = [str(x) for x in result["grid"]["lengths"]]
    head = (
        "| backend | s/sample | "
        + " | ".join(f"s/sample at {x}" for x in lengths)
        + " | lm-eval s ÷ ours s | prefix reuse bought | share of the bound | suffix chunks bought "
        "| adjacency bought | batching bought | engine start s | score | prompt tokens, replies = hf |\n|"
        + "---|" * (11 + len(lengths))
        + "\n"
    )
    rows = []
    for name in SHOWN:
        e = summary.get(name)
        if e is None:
            continue
        if "error" in e:
            rows.append(f"| {LABELS[name]} | not measured: {e['error']} |")
            continue
        lev = e.get("lever_speedups", {})
        per = e.get("per_length_s") or {}
        cmp = e.get("compared_to_hf")
        same = f"{e['prompt_tokens_equal_hf']}/{cmp}, {e['text_equal_hf']}/{cmp}" if cmp else ""
        rows.append(
            f"| {LABELS[name]} | {e['seconds_per_sample']:.2f} | "
            + " | ".join(f"{per[x]:.2f}" if x in per else "" for x in lengths)
            + f" | {_peer(e)} | {_x(lev.get('prefix'))} "
            f"| {_pct(e.get('share_of_bound'))} | {_x(lev.get('suffix_chunk'))} | {_x(lev.get('adjacency'))} "
            f"| {_x(lev.get('batching'))} "
            f"| {e.get('engine_start_s') or 0:.0f} | {e.get('score') if e.get('score') is not None else ''} "
            f"| {same} |"
        )
    lines = [head + "\n".join(rows) + "\n"]
    lines.append(
        f"Prefix-sharing bound for {result['grid']['depths']} depths: **{result['prefix_bound']:.2f}x** (d / (1 + "
        "sum over the other depths of (1 - depth))). s/sample: the `ours` pass (the mean of its repeats). Each "
        "lever's speed-up is the pass without it ÷ ours: `prefix reuse`: `prefix_cache=false` for `hf:`, a distinct "
        "cache_salt per prompt for `vllm:` (one engine call both ways), the server's cache emptied before each "
        "request against kept, one request in flight both ways, for `openai:`; its share of the bound next to it. "
        "`suffix chunks` (`hf:`): the part after a cached prefix prefilled in one step ÷ in steps. "
        "`adjacency`: a round-robin over the documents against the runner's order. `batching`: one request per engine "
        "call (or in flight) against ours. s/sample at a length: batch-1 passes only. lm-eval s ÷ ours s > 1: ours "
        "is faster; lm-eval ran in the `vllm:` process, its passes between ours (the fair pair); against `hf:` and "
        "the server the ratio crosses processes run at other times.\n"
    )
    accounting = accounting_table(result)
    if accounting:
        lines.append(accounting)
    passes = ["| backend | pass | s/sample (each run) |\n|---|---|---|\n"]
    for name in SHOWN:
        for p in backends.get(name, {}).get("passes", []):
            each = ", ".join(f"{x:.2f}" for x in p.get("runs_s_per_sample", [p["seconds_per_sample"]]))
            passes.append(f"| {LABELS[name]} | {p['label']} | {p['seconds_per_sample']:.2f} ({each}) |\n")
    lines.append("".join(passes))
    if result.get("sittings"):
        lines.append(f"On {result.get('cpus')} CPUs. {sittings_line(result)}")
    elif "load_average_1min" in result:
        shown = ", ".join(f"{k} {v}" for k, v in result["load_average_1min"].items())
        lines.append(f"1-minute load average on {result.get('cpus')} CPUs: {shown}.\n")
    return "\n".join(lines)


def _peer(e: dict[str, Any]) -> str:
    """lm-eval's time over ours, bold; in brackets, marked, where the two ran on different machines."""
    other = e.get("peer_over_ours_other_machine")
    return _x(e.get("peer_over_ours"), bold=True) or (f"({other:.2f}x, other machine)" if other else "")


def _x(v: float | None, bold: bool = False) -> str:
    if v is None:
        return ""
    return f"**{v:.2f}x**" if bold else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:.0%}"
