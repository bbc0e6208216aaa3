"""A load test's outputs: the JSON record (atomic), a PNG of throughput and P95 latency against concurrency, a table;
the plot and the table say how many requests stand behind each figure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from longctx_eval.atomic_io import atomic_write_text
from longctx_eval.leaderboard.heatmaps import write_png

KIND = "load_test"
"""The `kind` field that marks a load-test JSON (run --dry-run --throughput-from reads it)."""


def write_json(record: Mapping[str, Any], path: Path) -> None:
    """Write the load-test record atomically; NaN or Infinity is refused."""
    atomic_write_text(path, json.dumps(record, indent=2, allow_nan=False) + "\n")


def _p95(level: Mapping[str, Any], key: str) -> float | None:
    dist = level.get(key)
    return dist["p95"] if isinstance(dist, Mapping) else None


def _n(level: Mapping[str, Any], key: str) -> int:
    dist = level.get(key)
    return int(dist.get("n", 0)) if isinstance(dist, Mapping) else 0


def figure(record: Mapping[str, Any]) -> Figure:
    """Three panels against concurrency (log2 axis): output tokens/s, total (prompt + output) tokens/s, and P95
    time to first token and end-to-end latency, each P95 point labelled with the requests behind it (n)."""
    levels = record["levels"]
    x = [lv["concurrency"] for lv in levels]
    fig = Figure(figsize=(13.0, 4.0), layout="constrained")
    out_ax, total_ax, lat_ax = fig.subplots(1, 3)
    out_ax.plot(x, [lv["output_tokens_per_s"] for lv in levels], marker="o", color="tab:blue")
    out_ax.set_ylabel("output tokens/s")
    out_ax.set_title("output throughput", fontsize=10)
    total_ax.plot(x, [lv["total_tokens_per_s"] for lv in levels], marker="s", color="tab:green")
    total_ax.set_ylabel("prompt + output tokens/s")
    total_ax.set_title("total throughput", fontsize=10)
    for key, label, marker in (("ttft_s", "P95 time to first token", "o"), ("e2e_s", "P95 end-to-end", "s")):
        pts = [(c, p, _n(lv, key)) for c, lv in zip(x, levels, strict=True) if (p := _p95(lv, key)) is not None]
        if pts:
            lat_ax.plot([c for c, _, _ in pts], [p for _, p, _ in pts], marker=marker, label=label)
            for c, p, n in pts:
                lat_ax.annotate(f"n={n}", (c, p), textcoords="offset points", xytext=(4, 4), fontsize=7)
    lat_ax.set_ylabel("seconds")
    lat_ax.set_title("P95 latency (n = successful requests per point)", fontsize=10)
    lat_ax.legend(fontsize=8, frameon=False)
    for ax, key in ((out_ax, "output_tokens_per_s"), (total_ax, "total_tokens_per_s")):
        for c, lv in zip(x, levels, strict=True):
            ax.annotate(f"n={lv['ok']}", (c, lv[key]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    for ax in (out_ax, total_ax, lat_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [str(c) for c in x])
        ax.minorticks_off()
        ax.set_xlabel("requests in flight")
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.1)  # room for the n labels
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"{record['model']} at {record['base_url']}: {record['prompts']['description']}", fontsize=10)
    return fig


def write_plot(record: Mapping[str, Any], path: Path) -> None:
    """Write the figure as PNG, atomically."""
    write_png(figure(record), path)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:,.0f}"


def _percentiles(dist: Mapping[str, Any]) -> str:
    """`p50/p95/p99 (n)` in ms: the percentiles and the requests behind them."""
    return "/".join(_ms(dist.get(k)) for k in ("p50", "p95", "p99")) + f" ({dist.get('n', 0)})"


def _hit_rate(level: Mapping[str, Any]) -> str:
    cache = level.get("prefix_cache")
    rate = cache.get("hit_rate") if isinstance(cache, Mapping) else None
    return "-" if rate is None else f"{100 * rate:.1f}%"


def table(levels: Sequence[Mapping[str, Any]]) -> str:
    """One line per level: throughput, latency percentiles (ms) with the requests behind them (n), errors,
    retries, and the server's prefix-cache hit rate ('-': the server exposes none)."""
    head = (
        "in flight",
        "requests",
        "ok",
        "req/s",
        "out tok/s",
        "total tok/s",
        "TTFT p50/p95/p99 ms (n)",
        "e2e p50/p95/p99 ms (n)",
        "failed",
        "retries",
        "not sent",
        "reused",
        "cache hits",
        "stopped by",
    )
    rows = [head]
    for lv in levels:
        ttft, e2e = lv.get("ttft_s") or {}, lv.get("e2e_s") or {}
        rows.append(
            (
                str(lv["concurrency"]),
                str(lv["requests"]),
                str(lv["ok"]),
                f"{lv['requests_per_s']:.2f}",
                f"{lv['output_tokens_per_s']:,.1f}",
                f"{lv['total_tokens_per_s']:,.0f}",
                _percentiles(ttft),
                _percentiles(e2e),
                str(lv["failed"]),
                str(lv["retries"]),
                str(lv["not_sent"]),
                str(lv.get("repeated_prompts", 0)),
                _hit_rate(lv),
                lv["stopped_by"],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
