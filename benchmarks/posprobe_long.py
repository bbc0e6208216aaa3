"""Summarise a `make probe-long` results folder: per-sample table, peak-memory-vs-length fit, GPU time estimate.

`python -m benchmarks.posprobe_long RESULTS_DIR --json benchmarks/results/posprobe_long.json --md OUT.md` reads
every model folder's `predictions.jsonl` and `scores/posprobe.jsonl` (no model loads, no torch) and writes:
one row per probed sequence (variant, L, needle, EM, NPB, hit, LAE, seconds, peak RSS), a least-squares fit of
peak RSS against L (linear, plus the quadratic coefficient a materialised score matrix would need), and the
forward's FLOP count with the time it implies on a GPU at a stated throughput.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

GPU = {
    "name": "NVIDIA H200 SXM",
    "bf16_dense_tflops": 989.0,
    "fp32_tflops": 67.0,
    "assumed_utilisation": 0.4,
    "source": "NVIDIA H200 datasheet peak dense rates (bf16 tensor core; fp32 without tensor cores)",
}
"""The GPU the estimate assumes: peak rates from the vendor's datasheet, and the share of peak assumed reached."""


def model_flops(config: dict[str, Any], length: int) -> dict[str, float]:
    """FLOPs of one causal forward of `length` tokens: 2 x matmul parameters x L, plus QK^T and AV over L^2 / 2."""
    hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
    heads, kv = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    attn = hidden * heads * head_dim * 2 + hidden * kv * head_dim * 2  # q, o and k, v projections
    per_layer = attn + 3 * hidden * int(config["intermediate_size"])  # + gate, up, down
    matmul_params = layers * per_layer + int(config["vocab_size"]) * hidden  # + the LM head over every position
    dense = 2.0 * matmul_params * length
    attention = 2 * 2 * (length * length / 2) * heads * head_dim * layers  # two matmuls, causal half
    return {"matmul_params": float(matmul_params), "dense": dense, "attention": attention, "total": dense + attention}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; expected a `longctx-eval run --tasks posprobe` folder")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sample_rows(results: Path) -> list[dict[str, Any]]:
    """One row per probed sequence over every model folder under `results` that ran posprobe."""
    rows = []
    for folder in sorted(p for p in results.iterdir() if (p / "scores" / "posprobe.jsonl").is_file()):
        lines = _jsonl(folder / "predictions.jsonl")
        preds = {p["sample_id"]: p for p in lines if p["task"] == "posprobe" and p["part"] == 0}
        for s in _jsonl(folder / "scores" / "posprobe.jsonl"):
            pred = preds.get(s["id"])
            if pred is None or pred["status"] != "ok":
                continue
            d, sc, meta = pred["data"], s["scores"], s["metadata"]
            rows.append(
                {
                    "model": folder.name,
                    "variant": d["rope"]["variant"],
                    "rope_parameters": d["rope"]["parameters"],
                    "length": int(d["length"]),
                    "l_over_ltrain": d["length"] / d["train_length"],
                    "needle_index": meta["needle_index"],
                    "needle_depth": meta["needle_depth"],
                    "distance": meta["distance"],
                    "passkey_em": sc["em"],
                    "answer_step_acc": sc["step_acc"],
                    "answer_correct": d["answer_correct"],
                    "answer_nll": d["answer_nll"],
                    "npb": sc["npb"],
                    "npb_hit": sc["hit"],
                    "npb_signed": sc["npb_signed"],
                    "needle_mass": sc["needle_mass"],
                    "lae": sc["lae"],
                    "lae_ret": sc["lae_ret"],
                    "sink_mass": sc["sink_mass"],
                    "haystack_ppl": math.exp(d["haystack_nll_sum"] / d["haystack_tokens"]),
                    "seconds": d["seconds"],
                    "peak_rss_mb": d["peak_rss_mb"],
                    "rss_start_mb": d.get("rss_start_mb"),
                }
            )
    if not rows:
        raise ValueError(f"{results}: no posprobe predictions found; run `make probe-long` first")
    return sorted(rows, key=lambda r: (r["variant"], r["length"], r["needle_index"]))


def memory_fit(rows: list[dict[str, Any]], heads: int, field: str) -> dict[str, Any]:
    """Least squares `field` (MB) = a + b L over the rows, residuals, and the L^2 coefficient of a free fit."""
    lengths = np.array([r["length"] for r in rows], dtype=float)
    mb = np.array([r[field] for r in rows], dtype=float)
    linear = np.polyfit(lengths, mb, 1)
    residuals = mb - np.polyval(linear, lengths)
    out: dict[str, Any] = {
        "field": field,
        "points": [{"length": int(n), "mb": float(v)} for n, v in zip(lengths, mb, strict=True)],
        "linear": {"mb_at_zero": float(linear[1]), "mb_per_1k_tokens": float(linear[0] * 1024)},
        "residuals_mb": [round(float(x), 1) for x in residuals],
        "max_abs_residual_mb": float(np.abs(residuals).max()),
    }
    if len(set(lengths)) >= 3:
        out["quadratic_term_mb_per_l2"] = float(np.polyfit(lengths, mb, 2)[0])
    return out


def memory_fits(rows: list[dict[str, Any]], heads: int) -> dict[str, Any]:
    """Fits of the absolute peak and of the forward's own growth (peak - RSS on entry), against a score matrix."""
    lengths = sorted({int(r["length"]) for r in rows})
    for r in rows:
        if r.get("rss_start_mb") is not None:
            r["rss_growth_mb"] = round(r["peak_rss_mb"] - r["rss_start_mb"], 1)
    fits = {"peak": memory_fit(rows, heads, "peak_rss_mb")}
    grown = [r for r in rows if "rss_growth_mb" in r]
    if grown:
        fits["growth"] = memory_fit(grown, heads, "rss_growth_mb")
    return {
        **fits,
        "score_matrix_mb_per_l2": heads * 4 / 2**20,  # what one materialised H x L x L fp32 matrix would add
        "score_matrix_mb_per_layer": {n: round(heads * n * n * 4 / 2**20, 1) for n in lengths},
    }


def gpu_estimate(config: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per length: FLOPs, the CPU rate measured here, and the GPU seconds at the assumed utilisation (bf16, fp32)."""
    out = []
    for length in sorted({r["length"] for r in rows}):
        f = model_flops(config, length)
        secs = [r["seconds"] for r in rows if r["length"] == length]
        cpu_s = float(np.median(secs))
        u = GPU["assumed_utilisation"]
        out.append(
            {
                "length": length,
                "tflop": round(f["total"] / 1e12, 2),
                "attention_share": round(f["attention"] / f["total"], 3),
                "cpu_seconds_median": round(cpu_s, 1),
                "cpu_gflops_achieved": round(f["total"] / cpu_s / 1e9, 1),
                "gpu_seconds_bf16": round(f["total"] / (GPU["bf16_dense_tflops"] * 1e12 * u), 3),
                "gpu_seconds_fp32": round(f["total"] / (GPU["fp32_tflops"] * 1e12 * u), 3),
            }
        )
    return out


def markdown(summary: dict[str, Any]) -> str:
    """The tables of the summary as Markdown."""
    lines = [
        "| variant | L | L/L_train | needle (depth) | EM | step acc | NPB | hit | LAE (bits) | sink | haystack ppl "
        "| s/sample | peak RSS MB | growth MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["samples"]:
        lines.append(
            f"| {r['variant']} | {r['length']} | {r['l_over_ltrain']:g} "
            f"| {r['needle_index']} ({r['needle_depth']:.3f}) "
            f"| {r['passkey_em']:.0f} | {r['answer_step_acc']:.1f} | {r['npb']:.3f} | {r['npb_hit']:.1f} "
            f"| {r['lae']:.2f} | {r['sink_mass']:.2f} | {r['haystack_ppl']:.0f} | {r['seconds']:.0f} "
            f"| {r['peak_rss_mb']:.0f} | {r.get('rss_growth_mb', float('nan')):.0f} |"
        )
    m = summary["memory_fit"]
    lines.append("")
    for key, what in (("peak", "Peak RSS"), ("growth", "Peak RSS growth during the forward (peak - RSS on entry)")):
        if key not in m:
            continue
        f = m[key]
        lines.append(
            f"{what} = {f['linear']['mb_at_zero']:.0f} MB + {f['linear']['mb_per_1k_tokens']:.1f} MB per 1K tokens "
            f"(least squares over {len(f['points'])} samples; residuals {f['residuals_mb']} MB, max "
            f"|{f['max_abs_residual_mb']:.0f}| MB; free quadratic fit's L^2 term "
            f"{f.get('quadratic_term_mb_per_l2', float('nan')):.2e} MB/token^2)."
        )
    lines.append(
        f"One materialised {summary['config']['num_attention_heads']} x L x L fp32 score matrix would add "
        f"{m['score_matrix_mb_per_l2']:.2e} MB/token^2: {m['score_matrix_mb_per_layer']} MB per layer."
    )
    g = summary["gpu"]
    lines += [
        "",
        f"| L | TFLOP / forward | attention share | CPU s (median) | CPU GFLOP/s | {g['name']} bf16 s | fp32 s |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in summary["gpu_estimate"]:
        lines.append(
            f"| {e['length']} | {e['tflop']} | {e['attention_share']:.0%} | {e['cpu_seconds_median']} "
            f"| {e['cpu_gflops_achieved']} | {e['gpu_seconds_bf16']} | {e['gpu_seconds_fp32']} |"
        )
    lines.append(
        f"\nGPU seconds = FLOPs / ({g['bf16_dense_tflops']:g} or {g['fp32_tflops']:g} TFLOP/s x "
        f"{g['assumed_utilisation']:.0%}), {g['source']}; an estimate, not a measurement."
    )
    return "\n".join(lines) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def summarise(results: Path, config: dict[str, Any], provenance: dict[str, Any]) -> dict[str, Any]:
    """The JSON evidence: samples, memory fit, GPU estimate, the model geometry used for FLOPs, provenance."""
    rows = sample_rows(results)
    keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size")
    geometry = {k: config[k] for k in (*keys, "vocab_size", "max_position_embeddings")}
    return {
        "provenance": provenance,
        "config": geometry,
        "flops_formula": "2 x matmul params x L (incl. LM head) + 2 x 2 x L^2/2 x heads x head_dim x layers",
        "samples": rows,
        "memory_fit": memory_fits(rows, int(config["num_attention_heads"])),
        "gpu": GPU,
        "gpu_estimate": gpu_estimate(config, rows),
    }


def main(argv: list[str] | None = None) -> int:
    """CLI: summarise RESULTS_DIR into --json and --md."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.posprobe_long", description=__doc__)
    parser.add_argument("results", type=Path, help="the --out folder of `make probe-long`")
    parser.add_argument("--model", default="smollm2-135m", help="the checkpoint whose config gives the FLOP count")
    parser.add_argument("--json", type=Path, default=None, help="write the summary JSON here")
    parser.add_argument("--md", type=Path, default=None, help="write the Markdown tables here")
    parser.add_argument("--note", default="", help="provenance note stored in the JSON (what was run, where)")
    args = parser.parse_args(argv)
    from longctx_eval.models.model_source import hf_source

    config = json.loads((Path(str(hf_source(args.model))) / "config.json").read_text(encoding="utf-8"))
    summary = summarise(args.results, config, {"results": str(args.results), "note": args.note})
    text = markdown(summary)
    if args.json:
        _write_atomic(args.json, json.dumps(summary, indent=1) + "\n")
    if args.md:
        _write_atomic(args.md, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
