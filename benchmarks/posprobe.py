"""The CI-sized position probe run (`tests/cli/test_posprobe_run.py`'s run) through `longctx-eval run`, per model.

12 needles at 128 / 512 / 2048 tokens on the committed reference models, RoPE unscaled and with YaRN, each model
in a fresh process; the YaRN model's time is reported as a multiple of the unscaled one's.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

MODELS = ("tiny-rope", "tiny-rope-yarn")
LENGTHS = "128,512,2048"
LIMIT = 12


def posprobe_job(params: dict[str, Any]) -> dict[str, Any]:
    """One `run --tasks posprobe` of one model into a temporary folder; imports happen before the timing."""
    from longctx_eval.cli import main

    args = ["run", "--model", params["model"], "--tasks", "posprobe", "--lengths", LENGTHS, "--limit", str(LIMIT)]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        code = main([*args, "--out", tmp])
        run_s = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"longctx-eval run exited {code}")
    return {"run_s": run_s, "samples": LIMIT * len(LENGTHS.split(","))}


def posprobe_table(result: dict[str, Any]) -> str:
    """Markdown: seconds per model, samples/s, and each model's time as a multiple of the unscaled one's."""
    head = "| model | run s | whole process s | samples/s | ÷ tiny-rope | peak MiB |\n|---|---|---|---|---|---|\n"
    base = result.get(MODELS[0], {}).get("run_s")
    rows = []
    for name in MODELS:
        r = result.get(name, {})
        if "run_s" not in r:
            rows.append(f"| {name} | not measured: {r.get('error', 'not run')} | | | | |")
            continue
        ratio = f"{r['run_s'] / base:.2f}" if base else ""
        rows.append(
            f"| {name} | {r['run_s']:.1f} | {r['process_s']:.1f} | {r['samples'] / r['run_s']:.2f} | {ratio} "
            f"| {r['peak_rss_mib']:.0f} |"
        )
    return head + "\n".join(rows) + "\n"
