"""`longctx-eval posprobe-report`: the posprobe table (passkey / NPB / LAE / rho) and curves against L / L_train.

longctx-eval posprobe-report results/ --out leaderboards/posprobe
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longctx_eval.errors import RunFileError
from longctx_eval.io import atomic_write_text, ensure_dir
from longctx_eval.results import read_run

TASK = "posprobe"
COLUMNS = (
    "passkey_em",
    "npb",
    "npb_hit",
    "npb_signed",
    "needle_mass",
    "lae",
    "rho",
    "lae_ret",
    "sink_mass",
    "needle_ppl",
    "ppl",
    "tail_ppl",
    "haystack_ppl",
)
PLOTS = {"passkey_em": "passkey exact match", "npb": "NPB (0 = perfect)", "lae": "LAE (bits)"}


def _run_files(inputs: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for p in inputs:
        files.extend(sorted(p.rglob("run.json")) if p.is_dir() else [p])
    return files


def _heads(run_dir: Path) -> list[list[int]] | None:
    """The frozen retrieval heads, read from the first posprobe prediction of the run."""
    from longctx_eval.predictions import PredictionStore

    path = run_dir / "predictions.jsonl"
    if not path.is_file():
        return None
    for rec in PredictionStore(path, repair=False).records.values():
        if rec.get("task") == TASK and rec.get("data"):
            return rec["data"]["calibration"]["heads"]
    return None


def probe_rows(inputs: Sequence[Path]) -> list[dict[str, Any]]:
    """One row per (model, length) of every posprobe run: metric values and CIs, pooled over depths."""
    rows = []
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
                if r.length is None or r.depth is not None:
                    continue
                row = by_len.setdefault(r.length, {"model": run.model.name, "length": r.length})
                row[r.metric] = r.value
                row[f"{r.metric}_ci"] = list(r.ci95)
                row[f"{r.metric}_n"] = r.n
            heads = _heads(path.parent)
            for row in by_len.values():
                row["heads"] = heads
            rows.extend(by_len[k] for k in sorted(by_len))
    return rows


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) >= 100 else f"{v:.3f}"
    return str(v)


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The table: model, L, L/L_train, n, and the headline metrics (passkey EM with its 95% CI)."""
    head = ["model", "L", "L/L_train", "n", *COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ci = r.get("passkey_em_ci")
        em = f"{_fmt(r.get('passkey_em'))} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "-"
        cells = [r["model"], str(r["length"]), _fmt(r.get("l_over_ltrain")), str(r.get("passkey_em_n", "-")), em]
        cells += [_fmt(r.get(c)) for c in COLUMNS[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_probe(rows: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """passkey, NPB and LAE against L / L_train (log2 axis), one line per model/variant, as PNG files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ensure_dir(out_dir)
    written = []
    models = sorted({r["model"] for r in rows})
    for metric, label in PLOTS.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for model in models:
            pts = sorted(
                (r["l_over_ltrain"], r[metric], r.get(f"{metric}_ci"))
                for r in rows
                if r["model"] == model and metric in r and "l_over_ltrain" in r
            )
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            line = ax.plot(xs, ys, marker="o", label=model)[0]
            if all(p[2] for p in pts):
                ax.fill_between(xs, [p[2][0] for p in pts], [p[2][1] for p in pts], alpha=0.15, color=line.get_color())
        ax.set_xscale("log", base=2)
        ax.set_xlabel("L / L_train")
        ax.set_ylabel(label)
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
        ax.legend(fontsize=7)
        ax.set_title(f"posprobe: {label}")
        fig.tight_layout()
        path = out_dir / f"posprobe_{metric}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `posprobe-report`."""
    p = sub.add_parser("posprobe-report", help="posprobe table and plots (passkey, NPB, LAE vs L / L_train)")
    p.add_argument("inputs", nargs="+", type=Path, help="run files or folders")
    p.add_argument("--out", type=Path, default=Path("leaderboards/posprobe"))
    p.set_defaults(func=cmd_posprobe_report)


def cmd_posprobe_report(args: argparse.Namespace) -> int:
    """Write posprobe.md (the table), posprobe.json and the three PNG plots; 1 when there is no posprobe result."""
    rows = probe_rows(args.inputs)
    if not rows:
        print(f"no {TASK} results under {', '.join(map(str, args.inputs))}", file=sys.stderr)
        return 1
    ensure_dir(args.out)
    atomic_write_text(args.out / "posprobe.md", markdown_table(rows))
    atomic_write_text(args.out / "posprobe.json", json.dumps(rows, indent=1) + "\n")
    for path in plot_probe(rows, args.out):
        print(f"wrote {path}")
    print(f"wrote {args.out / 'posprobe.md'}")
    return 0
