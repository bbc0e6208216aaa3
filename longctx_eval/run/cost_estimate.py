"""A self-hosted server's price per token, estimated from what an hour of it costs and how fast it was measured.

`--gpu-hour-price USD` (the hourly price of the server that was measured: GPU-hour price x its GPUs) over the
tokens/s measured by `--throughput-from` (a run folder, run.json or `longctx-eval load` JSON of the same served
model) gives USD per 1M tokens = USD per hour / (tokens/s x 3600) x 1e6. The measured rate counts prompt and
output tokens at one combined rate (throughput.measured_throughput), so input and output get the same price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from longctx_eval.errors import ConfigError
from longctx_eval.run.cost import PER_TOKENS, Price, served_model
from longctx_eval.run.throughput import measured_throughput, throughput_json


@dataclass(frozen=True)
class Estimate:
    """An estimated price of one served model and how it was reached (printed with every use)."""

    model: str
    price: Price
    how: str


def measured_model(path: Path) -> str | None:
    """The served model a throughput file measured: a load test's `served_model`, a run file's served model."""
    _, data = throughput_json(path)
    if not isinstance(data, dict):
        return None
    if data.get("kind") == "load_test":
        name = data.get("served_model")
        return name if isinstance(name, str) else None
    spec = (data.get("model") or {}).get("spec") if isinstance(data.get("model"), dict) else None
    if not isinstance(spec, str):
        return None
    from longctx_eval.models.spec import parse_spec

    try:
        return served_model(parse_spec(spec))
    except ConfigError:
        return None


def gpu_hour_estimate(usd_per_hour: float, throughput_from: Path | None, model: str) -> Estimate:
    """The estimated price of served `model` from `--gpu-hour-price` and `--throughput-from`; one-line
    ConfigError when either is missing or unusable, or when the measurement is of another model."""
    if isinstance(usd_per_hour, bool) or not math.isfinite(usd_per_hour) or usd_per_hour <= 0:
        raise ConfigError(f"--gpu-hour-price: expected US dollars per hour > 0, got {usd_per_hour!r}")
    if throughput_from is None:
        raise ConfigError(
            "--gpu-hour-price needs --throughput-from RUN_DIR|run.json|load.json: the measured tokens/s of the "
            "served model that the hourly price is divided by"
        )
    measured = measured_model(throughput_from)
    if measured != model:
        raise ConfigError(
            f"--throughput-from {throughput_from}: it measured {measured or 'no served model'!r}, not served model "
            f"{model!r}; measure this model first (`longctx-eval load --model ...`)"
        )
    rate = measured_throughput(throughput_from)
    tps = rate.prompt_tps  # one combined rate: prompt_tps == output_tps
    usd = usd_per_hour / (tps * 3600.0) * PER_TOKENS
    how = f"estimated ${usd:.4f} per 1M tokens = ${usd_per_hour:g}/hour over {rate.source}"
    return Estimate(model, Price(usd, usd), how)
