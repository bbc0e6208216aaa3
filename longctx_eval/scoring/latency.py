"""Latency and throughput of served requests: P50/P95/P99 of first-token, inter-token and last-token latency,
per-request output speed, aggregate throughput, retries by reason and failures.

Input: `ServedResult`s (models/openai/client.py) or their `stats()` records, as predictions keep them under
`data['serving']`. Definitions: `ttft_s` is first-token latency; `e2e_s` last-token (end-to-end) latency;
`itl_s` the gaps between successive streamed chunks (one token each on vLLM, SGLang and llama.cpp); `tpot_s`
(e2e - ttft) / (output tokens - 1); per-request `output_tokens_per_s` output tokens / e2e. Aggregate throughput
divides tokens by `wall_s`, the time at least one request was in flight (the union of the requests' intervals),
so gaps between runner batches or tasks do not count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

PERCENTILES = (50, 95, 99)
LENGTH_IDS_KEPT = 50
"""Sample ids listed in a serving section's `length_mismatch_samples` (the count is always complete)."""


def percentiles(values: Iterable[float | None]) -> dict[str, Any] | None:
    """{n, mean, p50, p95, p99} of finite values (linear interpolation), None when there are none."""
    arr = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    if arr.size == 0:
        return None
    out: dict[str, Any] = {"n": int(arr.size), "mean": round(float(arr.mean()), 6)}
    for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True):
        out[f"p{p}"] = round(float(v), 6)
    return out


def busy_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals: the time at least one request was in flight."""
    total, end = 0.0, None
    for a, b in sorted((a, b) for a, b in intervals if b >= a > 0):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _record(r: Any) -> Mapping[str, Any]:
    return r.stats() if hasattr(r, "stats") else r


def latency_summary(results: Iterable[Any]) -> dict[str, Any]:
    """The serving figures of many requests (ServedResults or their stats records); see the module doc."""
    recs = [_record(r) for r in results]
    ok = [r for r in recs if r.get("ok")]
    retries: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for r in recs:
        retries.update(r.get("retries_by_reason") or {})
        if not r.get("ok"):
            failures[str(r.get("error_kind") or "error")] += 1
    prompt = sum(r.get("prompt_tokens") or 0 for r in ok)
    output = sum(r.get("completion_tokens") or 0 for r in ok)
    wall = busy_seconds((r.get("started") or 0.0, r.get("finished") or 0.0) for r in recs)

    def per_request_speed(r: Mapping[str, Any]) -> float | None:
        n, e2e = r.get("completion_tokens"), r.get("e2e_s")
        return n / e2e if n and e2e else None

    def tpot(r: Mapping[str, Any]) -> float | None:
        n, e2e, ttft = r.get("completion_tokens"), r.get("e2e_s"), r.get("ttft_s")
        return max(e2e - ttft, 0.0) / (n - 1) if n and n > 1 and e2e is not None and ttft is not None else None

    return {
        "requests": len(recs),
        "ok": len(ok),
        "failed": len(recs) - len(ok),
        "failure_kinds": dict(sorted(failures.items())),
        "attempts": sum(int(r.get("attempts") or 0) for r in recs),
        "retries": sum(retries.values()),
        "retries_by_reason": dict(sorted(retries.items())),
        "ttft_s": percentiles(r.get("ttft_s") for r in ok),
        "e2e_s": percentiles(r.get("e2e_s") for r in ok),
        "itl_s": percentiles(x for r in ok for x in r.get("itl_s") or ()),
        "tpot_s": percentiles(tpot(r) for r in ok),
        "output_tokens_per_s": percentiles(per_request_speed(r) for r in ok),
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "wall_s": round(wall, 6),
        "throughput": {
            "requests_per_s": round(len(ok) / wall, 6) if wall else None,
            "output_tokens_per_s": round(output / wall, 6) if wall else None,
            "total_tokens_per_s": round((prompt + output) / wall, 6) if wall else None,
        },
    }


def serving_section(records: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A task's run-file `serving` section from its prediction records: `latency_summary` of every record that
    carries `data['serving']`, plus the length-honesty flags (`data['length_check']`); None when none carries it."""
    served, flagged, checked = [], [], 0
    for rec in records:
        data = rec.get("data") or {}
        stats = data.get("serving") if isinstance(data, Mapping) else None
        if not isinstance(stats, Mapping):
            continue
        served.append(stats)
        check = data.get("length_check")
        if isinstance(check, Mapping) and check.get("server_prompt_tokens") is not None:
            checked += 1
            if check.get("mismatch"):
                flagged.append(str(rec.get("sample_id")))
    if not served:
        return None
    out = latency_summary(served)
    out["length_checked"] = checked
    out["length_mismatches"] = len(flagged)
    out["length_mismatch_samples"] = sorted(set(flagged))[:LENGTH_IDS_KEPT]
    return out
