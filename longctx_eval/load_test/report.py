"""A load test's outputs: the JSON record (atomic), a PNG of throughput and P95 latency against concurrency, a table."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from longctx_eval.io import atomic_write_text
from longctx_eval.plots import write_png

KIND = "load_test"
"""The `kind` field that marks a load-test JSON (run --dry-run --throughput-from reads it)."""


def write_json(record: Mapping[str, Any], path: Path) -> None:
    """Write the load-test record atomically; NaN or Infinity is refused."""
    atomic_write_text(path, json.dumps(record, indent=2, allow_nan=False) + "\n")


def _p95(level: Mapping[str, Any], key: str) -> float | None:
    dist = level.get(key)
    return dist["p95"] if isinstance(dist, Mapping) else None


def figure(record: Mapping[str, Any]) -> Figure:
    """Three panels against concurrency (log2 axis): output tokens/s, total (prompt + output) tokens/s, and P95
    time to first token and end-to-end latency."""
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
        pts = [(c, p) for c, lv in zip(x, levels, strict=True) if (p := _p95(lv, key)) is not None]
        if pts:
            lat_ax.plot([c for c, _ in pts], [p for _, p in pts], marker=marker, label=label)
    lat_ax.set_ylabel("seconds")
    lat_ax.set_title("P95 latency", fontsize=10)
    lat_ax.legend(fontsize=8, frameon=False)
    for ax in (out_ax, total_ax, lat_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [str(c) for c in x])
        ax.minorticks_off()
        ax.set_xlabel("requests in flight")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"{record['model']} at {record['base_url']}: {record['prompts']['description']}", fontsize=10)
    return fig


def write_plot(record: Mapping[str, Any], path: Path) -> None:
    """Write the figure as PNG, atomically."""
    write_png(figure(record), path)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:,.0f}"


def table(levels: Sequence[Mapping[str, Any]]) -> str:
    """One line per level: throughput, latency percentiles (ms), errors and retries."""
    head = (
        "in flight",
        "requests",
        "ok",
        "req/s",
        "out tok/s",
        "total tok/s",
        "TTFT p50/p95/p99 ms",
        "e2e p50/p95/p99 ms",
        "failed",
        "retries",
        "not sent",
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
                "/".join(_ms(ttft.get(k)) for k in ("p50", "p95", "p99")),
                "/".join(_ms(e2e.get(k)) for k in ("p50", "p95", "p99")),
                str(lv["failed"]),
                str(lv["retries"]),
                str(lv["not_sent"]),
                lv["stopped_by"],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
