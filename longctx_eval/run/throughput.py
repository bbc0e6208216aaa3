"""Throughput a run's time and a server's price are estimated from: stated (`--assume-throughput`) or measured
by an earlier run or load test (`--throughput-from`), at one combined rate for prompt and output tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longctx_eval.errors import ConfigError


def throughput_json(path: Path) -> tuple[Path, Any]:
    """The parsed JSON of a `--throughput-from` input (a run folder means its run.json), with the file it read."""
    path = Path(path)
    if path.is_dir():
        path = path / "run.json"
    try:
        return path, json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--throughput-from {path}: cannot be read as JSON: {exc}") from exc


@dataclass(frozen=True)
class ThroughputModel:
    """Estimated seconds = prompt tokens / prompt_tps + output tokens / output_tps (aggregate rates)."""

    prompt_tps: float
    output_tps: float
    source: str
    """Where the rates come from, printed with every estimate."""

    def seconds(self, prompt_tokens: int, output_tokens: int) -> float:
        """Estimated wall seconds to serve these tokens."""
        return prompt_tokens / self.prompt_tps + output_tokens / self.output_tps


def parse_assumed(text: str) -> ThroughputModel:
    """`--assume-throughput PROMPT_TPS,OUTPUT_TPS` -> a stated throughput model."""
    try:
        prompt, output = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(
            f"--assume-throughput {text!r}: expected PROMPT_TOKENS_PER_S,OUTPUT_TOKENS_PER_S, e.g. 2000,50"
        ) from None
    if not (prompt > 0 and output > 0):
        raise ConfigError(f"--assume-throughput {text!r}: both rates must be > 0 tokens/s")
    return ThroughputModel(prompt, output, f"assumed {prompt:g} prompt + {output:g} output tokens/s")


def measured_throughput(path: Path) -> ThroughputModel:
    """Rates measured earlier: a run folder or run.json (its tasks' tokens over their model seconds, leaving out tasks
    whose predictions read a cached index), or a load-test JSON (the level with the highest total tokens/s). Both
    count prompt and output tokens at one combined rate."""
    path, data = throughput_json(path)
    if isinstance(data, dict) and data.get("kind") == "load_test":
        levels = [lv for lv in data.get("levels", []) if lv.get("total_tokens_per_s")]
        if not levels:
            raise ConfigError(f"--throughput-from {path}: the load test has no level with total_tokens_per_s")
        best = max(levels, key=lambda lv: lv["total_tokens_per_s"])
        tps = float(best["total_tokens_per_s"])
        return ThroughputModel(tps, tps, f"measured {tps:,.0f} tokens/s at concurrency {best['concurrency']} ({path})")
    from longctx_eval.results import parse_run

    run = parse_run(path.read_bytes(), str(path))
    timed = [t for t in run.tasks if not t.throughput.cached]  # a cached index's build time is in no task's seconds
    if run.tasks and not timed:
        raise ConfigError(
            f"--throughput-from {path}: every task read indexes built before its run (cached), so its seconds leave "
            "out building them; measure with a run whose indexes were built in it"
        )
    seconds = sum(t.throughput.seconds for t in timed)
    tokens = sum(
        (t.throughput.prompt_tokens_per_s + (t.throughput.output_tokens_per_s or 0.0)) * t.throughput.seconds
        for t in timed
    )
    if seconds <= 0 or tokens <= 0:
        raise ConfigError(f"--throughput-from {path}: no task with measured seconds and tokens")
    tps = tokens / seconds
    return ThroughputModel(tps, tps, f"measured {tps:,.0f} tokens/s by {run.model.name} ({path})")
