"""The hf adapter's timing figures of a task: prefill and decode seconds, time to first token, peak device memory.

Input: the prediction records; an `hf` prediction keeps `data['timing']` = {ttft_s, prefill_s, decode_s, batch}
(prefill/decode are its share of its batch's call) and, on CUDA, `data['peak_device_mb']`. Records without them
(other kinds, runs from before) contribute nothing; a task where none has them gets no figures (null).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from longctx_eval.scoring.latency import percentiles


def timing_fields(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Throughput's prefill_seconds, decode_seconds, ttft_s and peak_device_memory_mb (absent when unknown)."""
    prefill = decode = 0.0
    ttft: list[float] = []
    peak: float | None = None
    for rec in records:
        data = rec.get("data")
        if not isinstance(data, Mapping):
            continue
        t = data.get("timing")
        if isinstance(t, Mapping) and rec.get("status", "ok") == "ok":
            prefill += float(t.get("prefill_s") or 0.0)
            decode += float(t.get("decode_s") or 0.0)
            if t.get("ttft_s") is not None:
                ttft.append(float(t["ttft_s"]))
        mb = data.get("peak_device_mb")
        if isinstance(mb, int | float):
            peak = max(peak or 0.0, float(mb))
    out: dict[str, Any] = {}
    if ttft:
        out |= {"prefill_seconds": round(prefill, 3), "decode_seconds": round(decode, 3), "ttft_s": percentiles(ttft)}
    if peak is not None:
        out["peak_device_memory_mb"] = round(peak, 1)
    return out
