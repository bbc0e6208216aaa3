"""`longctx-eval posprobe-report`: the posprobe tables (attention, likelihood, per-step NLL) and curves vs L / L_train.

longctx-eval posprobe-report results/ --out leaderboards/posprobe
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longctx_eval.atomic_io import atomic_write_text, ensure_dir
from longctx_eval.errors import RunFileError
from longctx_eval.results import read_run

TASK = "posprobe"
ATTENTION_COLUMNS = (
    "passkey_em",
    "npb",
    "npb_hit",
    "npb_signed",
    "needle_mass",
    "lae",
    "rho_train",
    "rho_ref",
    "lae_ret",
    "sink_mass",
)
LIKELIHOOD_COLUMNS = (
    "needle_ppl",
    "needle_ppl_median",
    "needle_ppl_clipped",
    "needle_nll_k1",
    "needle_ppl_rest",
    "haystack_ppl",
    "ppl",
    "tail_ppl",
)
WITH_CI = {"passkey_em", "needle_ppl", "needle_ppl_median", "needle_ppl_clipped"}
COLUMNS = ATTENTION_COLUMNS + LIKELIHOOD_COLUMNS
"""Every per-length column of the report (tables 1 and 2); table 3 is the per-step NLL needle_nll_k1..kK."""
PLOTS = {
    "passkey_em": "passkey exact match",
    "npb": "NPB (0 = perfect)",
    "lae": "LAE (bits)",
    "needle_ppl_clipped": "needle ppl, steps clipped at ln 10",
    "haystack_ppl": "haystack ppl (filler around the needle)",
}
LOG_Y = {"needle_ppl_clipped", "haystack_ppl"}
LEGEND = {
    "passkey_em": "passkey EM [95% CI]",
    "npb_hit": "hit",
    "npb_signed": "signed NPB",
    "needle_mass": "needle mass",
    "lae": "LAE (bits)",
    "rho_train": "rho_train",
    "rho_ref": "rho_ref @L_ref",
    "lae_ret": "LAE_ret",
    "sink_mass": "sink",
    "needle_ppl": "needle ppl pooled",
    "needle_ppl_median": "needle ppl median",
    "needle_ppl_clipped": "needle ppl clipped",
    "needle_nll_k1": "NLL step 1 (nats)",
    "needle_ppl_rest": "ppl steps 2..K",
    "haystack_ppl": "haystack ppl",
    "ppl": "text ppl",
    "tail_ppl": "text tail ppl",
}


def _run_files(inputs: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for p in inputs:
        files.extend(sorted(p.rglob("run.json")) if p.is_dir() else [p])
    return files


def _calibration(run_dir: Path) -> dict[str, Any] | None:
    """The frozen retrieval heads with their retrieval scores and the reference length, from the first probe."""
    from longctx_eval.run_folder.predictions import PredictionStore

    path = run_dir / "predictions.jsonl"
    if not path.is_file():
        return None
    for rec in PredictionStore(path, repair=False).records.values():
        if rec.get("task") == TASK and rec.get("data") and "calibration" in rec["data"]:
            cal = rec["data"]["calibration"]
            probed = cal.get("layers")  # a hybrid model: scores[i] is model layer probed[i]'s
            scores = [cal["scores"][probed.index(layer) if probed else layer][head] for layer, head in cal["heads"]]
            out = {"heads": cal["heads"], "head_scores": scores, "l_ref": cal["length"], "lae_ref": cal["lae_ref"]}
            if probed:
                out["probed_layers"] = probed
            return out
    return None


def probe_rows(inputs: Sequence[Path]) -> list[dict[str, Any]]:
    """One row per (model, length) of every posprobe run: metric values and CIs pooled over depths, the passkey EM
    per depth quintile (`passkey_em_by_depth`) and the calibration (heads, their RS, L_ref)."""
    rows: list[dict[str, Any]] = []
    for path in _run_files(inputs):
        try:
            run = read_run(path)
        except RunFileError:
            continue
        for t in run.tasks:
            if t.name != TASK:
                continue
            by_len: dict[int, dict[str, Any]] = {}
            for r in t.results:
                if r.length is None:
                    continue
                row = by_len.setdefault(r.length, {"model": run.model.name, "length": r.length})
                if r.depth is not None:  # per depth quintile: the passkey EM only (table 5)
                    if r.metric == "passkey_em":
                        row.setdefault("passkey_em_by_depth", {})[f"{r.depth:g}"] = r.value
                    continue
                row[r.metric] = r.value
                row[f"{r.metric}_ci"] = list(r.ci95)
                row[f"{r.metric}_n"] = r.n
            cal = _calibration(path.parent) or {"heads": None}
            for row in by_len.values():
                row.update(cal)
            rows.extend(by_len[k] for k in sorted(by_len))
    return rows


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) >= 100 else f"{v:.3f}"
    return str(v)


def _cell(r: dict[str, Any], metric: str) -> str:
    """A value, with its 95% CI for the WITH_CI metrics and its reference length for rho_ref."""
    v = r.get(metric)
    if v is None:
        return "-"
    text = _fmt(v)
    ci = r.get(f"{metric}_ci")
    if metric in WITH_CI and ci:
        lo, hi = (f"{c:.2f}" if metric == "passkey_em" else f"{c:.3g}" for c in ci)
        text += f" [{lo}, {hi}]"
    if metric == "rho_ref" and r.get("rho_ref_length") is not None:
        text += f" @{int(r['rho_ref_length'])}"
    return text


def markdown_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str] = ATTENTION_COLUMNS, legend: dict[str, str] = LEGEND
) -> str:
    """One table: model, L, L/L_train, n, then `columns` (passkey EM and needle ppls with their 95% CI)."""
    head = ["model", "L", "L/L_train", "n", *(legend.get(c, c) for c in columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["model"], str(r["length"]), _fmt(r.get("l_over_ltrain")), str(r.get("passkey_em_n", "-"))]
        cells += [_cell(r, c) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def step_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The per-step NLL metrics present in any row, in step order (needle_nll_k1, k2, ...)."""
    found = {k for r in rows for k in r if k.startswith("needle_nll_k") and k[12:].isdigit()}
    return sorted(found, key=lambda k: int(k[12:]))


def heads_table(rows: Sequence[dict[str, Any]]) -> str:
    """Per model: the frozen (layer, head) pairs with their retrieval score RS, L_ref and LAE(L_ref)."""
    lines = ["| model | heads (layer, head): RS | L_ref | LAE(L_ref) |", "|---|---|---|---|"]
    seen: set[str] = set()
    for r in rows:
        if r["model"] in seen or not r.get("heads"):
            continue
        seen.add(r["model"])
        heads = ", ".join(f"({h[0]}, {h[1]}): {s:.3f}" for h, s in zip(r["heads"], r["head_scores"], strict=True))
        if r.get("probed_layers"):
            heads += f" (full-attention layers {', '.join(map(str, r['probed_layers']))} only)"
        lines.append(f"| {r['model']} | {heads} | {r['l_ref']} | {r['lae_ref']:.3f} |")
    return "\n".join(lines) + "\n"


def hybrid_note(rows: Sequence[dict[str, Any]]) -> str:
    """A line under table 1 naming the models whose attention read-outs come from their global layers only."""
    hybrid = sorted({r["model"] for r in rows if r.get("probed_layers")})
    if not hybrid:
        return ""
    return (
        f"Hybrid models ({', '.join(hybrid)}): NPB, needle mass, LAE and the retrieval heads are computed on their "
        "full-attention (global) layers only (table 4 names them); their sliding-window layers cannot see a needle "
        "beyond the window. Passkey EM and the NLLs are the whole model's.\n"
    )


def depth_table(rows: Sequence[dict[str, Any]]) -> str:
    """Passkey EM per needle-depth quintile (0.1 = the needle near the start, far from the question)."""
    depths = sorted({d for r in rows for d in r.get("passkey_em_by_depth", {})}, key=float)
    head = ["model", "L", "L/L_train", *(f"depth {d}" for d in depths)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        by = r.get("passkey_em_by_depth", {})
        cells = [r["model"], str(r["length"]), _fmt(r.get("l_over_ltrain")), *(_fmt(by.get(d)) for d in depths)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_report(rows: Sequence[dict[str, Any]]) -> str:
    """posprobe.md: tables 1-5: attention read-outs, likelihood read-outs, NLL per answer step, retrieval heads,
    passkey EM by depth."""
    steps = step_columns(rows)
    parts = [
        "# posprobe report",
        "",
        "Values per (model, L) pooled over depths; n = needles. rho_train: entropy growth per doubling from the "
        "training length (only where the reference length is L_train); rho_ref @N: the same from a fixed reference "
        "length N inside the window. Definitions: docs/posprobe.md.",
        "",
        "## Table 1: attention read-outs",
        "",
        markdown_table(rows, ATTENTION_COLUMNS),
        hybrid_note(rows),
        "## Table 2: likelihood read-outs",
        "",
        "needle ppl pooled = exp(mean NLL over all needles and answer steps); median = median over needles of "
        "exp(mean NLL of that needle); clipped = pooled with each step's NLL capped at ln 10 (chance for a digit); "
        "NLL step 1 = mean NLL (nats) of the first answer step; ppl steps 2..K = pooled without step 1; haystack "
        "ppl = the filler tokens of the probe sequences; text ppl = needle-free filler texts of the same length.",
        "",
        markdown_table(rows, LIKELIHOOD_COLUMNS),
        "## Table 3: mean NLL (nats) per answer step",
        "",
        markdown_table(rows, steps, {k: f"k={k[12:]}" for k in steps})
        if steps
        else "No per-step NLL in these runs (task version 1).\n",
        "## Table 4: retrieval heads (chosen once per checkpoint at L_ref, frozen for every length)",
        "",
        heads_table(rows),
        "## Table 5: passkey EM by needle depth quintile (depth 0.1: farthest from the question)",
        "",
        depth_table(rows),
    ]
    return "\n".join(parts)


def plot_probe(rows: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Each PLOTS metric against L / L_train (log2 axis), one line per model/variant, as PNG files.

    Each model has its own colour, marker and dash, and its points are shifted a little along the (log) x axis,
    so models with the same values (several at 0) stay visible instead of one line hiding another; the legend
    sits outside the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from longctx_eval.leaderboard.line_plots import style

    ensure_dir(out_dir)
    written = []
    models = sorted({r["model"] for r in rows})
    for metric, label in PLOTS.items():
        fig, ax = plt.subplots(figsize=(7.6, 4.2))
        for i, model in enumerate(models):
            pts: list[tuple[Any, Any, Any]] = sorted(
                (r["l_over_ltrain"], r[metric], r.get(f"{metric}_ci"))
                for r in rows
                if r["model"] == model and metric in r and "l_over_ltrain" in r
            )
            if not pts:
                continue
            shift = 2 ** (0.06 * (i - (len(models) - 1) / 2))  # a dodge on the log2 axis, at most ~1/4 octave
            xs, ys = [p[0] * shift for p in pts], [p[1] for p in pts]
            line = ax.plot(xs, ys, label=model, markersize=5, linewidth=1.3, **style(i))[0]
            if all(p[2] for p in pts):
                ax.fill_between(xs, [p[2][0] for p in pts], [p[2][1] for p in pts], alpha=0.15, color=line.get_color())
        ax.set_xscale("log", base=2)
        if metric in LOG_Y:
            ax.set_yscale("log")
        ax.set_xlabel("L / L_train")
        ax.set_ylabel(label)
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        ax.set_title(f"posprobe: {label} (points dodged along x)", fontsize=10)
        fig.tight_layout()
        path = out_dir / f"posprobe_{metric}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `posprobe-report`."""
    p = sub.add_parser("posprobe-report", help="posprobe tables and plots (passkey, NPB, LAE, ppl vs L / L_train)")
    p.add_argument("inputs", nargs="+", type=Path, help="run files or folders")
    p.add_argument("--out", type=Path, default=Path("leaderboards/posprobe"))
    p.set_defaults(func=cmd_posprobe_report)


def cmd_posprobe_report(args: argparse.Namespace) -> int:
    """Write posprobe.md (three tables), posprobe.json and the PNG plots; 1 when there is no posprobe result."""
    rows = probe_rows(args.inputs)
    if not rows:
        print(f"no {TASK} results under {', '.join(map(str, args.inputs))}", file=sys.stderr)
        return 1
    ensure_dir(args.out)
    atomic_write_text(args.out / "posprobe.md", markdown_report(rows))
    atomic_write_text(args.out / "posprobe.json", json.dumps(rows, indent=1) + "\n")
    for path in plot_probe(rows, args.out):
        print(f"wrote {path}")
    print(f"wrote {args.out / 'posprobe.md'}")
    return 0
