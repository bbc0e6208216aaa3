"""One concurrency level's figures from its requests' results: throughput, latency percentiles, errors, retries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from longctx_eval.models.openai.client import ServedResult
from longctx_eval.scoring.latency import latency_summary


def level_summary(
    concurrency: int,
    results: Sequence[ServedResult],
    wall_s: float,
    *,
    stopped_by: str,
    not_sent: int = 0,
    repeated: int = 0,
    measured_prompt_tokens: Mapping[str, int | None] | None = None,
) -> dict[str, Any]:
    """The figures of one level; `wall_s` runs from the level's first dispatch to its last reply.

    Throughput is over `wall_s` and counts successful requests only, with the server's usage: output tokens/s
    = completion tokens / wall_s, total tokens/s adds prompt tokens, requests/s = successful requests / wall_s.
    A server that reports no usage (llama.cpp's streaming replies) has its prompt tokens taken from
    `measured_prompt_tokens` (request id -> the length measured before sending) and its completion tokens
    counted as streamed chunks; `usage_missing` counts those requests.
    Latency percentiles (P50/P95/P99, linear interpolation) are the serving statistics of the run file
    (scoring/latency.py): TTFT, end-to-end, inter-token gaps, time per output token and per-request output
    tokens/s, over successful requests; failures are counted by reason, retries by the reason of each failed
    attempt. `busy_s` is the time at least one request was in flight (the run file's throughput divisor).
    """
    stats = latency_summary(results)
    ok, output = stats["ok"], stats["completion_tokens"]
    measured = measured_prompt_tokens or {}
    prompt = sum((r.prompt_tokens if r.prompt_tokens is not None else measured.get(r.id)) or 0 for r in results if r.ok)

    def rate(n: float) -> float:
        return round(n / wall_s, 6) if wall_s > 0 else 0.0

    return {
        "concurrency": concurrency,
        "requests": stats["requests"],
        "ok": ok,
        "failed": stats["failed"],
        "failure_kinds": stats["failure_kinds"],
        "attempts": stats["attempts"],
        "retries": stats["retries"],
        "retries_by_reason": stats["retries_by_reason"],
        "not_sent": not_sent,
        "repeated_prompts": repeated,
        "stopped_by": stopped_by,
        "wall_s": round(wall_s, 6),
        "busy_s": stats["wall_s"],
        "prompt_tokens": prompt,
        "output_tokens": output,
        "usage_missing": sum(1 for r in results if r.ok and r.usage is None),
        "requests_per_s": rate(ok),
        "output_tokens_per_s": rate(output),
        "total_tokens_per_s": rate(output + prompt),
        "ttft_s": stats["ttft_s"],
        "e2e_s": stats["e2e_s"],
        "itl_s": stats["itl_s"],
        "tpot_s": stats["tpot_s"],
        "request_output_tokens_per_s": stats["output_tokens_per_s"],
    }
