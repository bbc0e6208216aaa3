"""A server's prefix-cache counters from its Prometheus `/metrics` page, read before and after each load level.

Parsed generically: every sample of a counter named `[namespace:][gpu_]prefix_cache_queries[_total]` or
`...prefix_cache_hits[_total]` (vLLM 0.32: `vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total`,
counted in tokens, one sample per engine), summed over labels; `vllm:external_prefix_cache_*` (what a KV
connector serves) is left out. A level's hit rate is the hits it added over the
queries it added. A server without `/metrics` (llama.cpp's, `longctx-eval serve`) or without such counters
reports none: the load test then says the hit rate is unknown, never 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_COUNTER = re.compile(r"^(?:[A-Za-z0-9_]+:)?(?:gpu_)?prefix_cache_(queries|hits)(?:_total)?$")
"""The server's own prefix cache (vLLM 0.32 `vllm:prefix_cache_*_total`, earlier `vllm:gpu_prefix_cache_*`), not
`vllm:external_prefix_cache_*` (a KV connector's) or any other cache."""
TIMEOUT_S = 10.0


def parse_prefix_cache(text: str) -> dict[str, Any] | None:
    """The prefix-cache queries and hits in a Prometheus text page (summed over labels), with the metric names
    they came from; None when the page has neither."""
    totals: dict[str, float] = {}
    names: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        name, value = m.group(1), m.group(3)
        c = _COUNTER.search(name)
        if c is None or name.endswith("_created"):
            continue
        try:
            v = float(value)
        except ValueError:
            continue
        if math.isfinite(v):
            totals[c.group(1)] = totals.get(c.group(1), 0.0) + v
            names[c.group(1)] = name
    if "queries" not in totals or "hits" not in totals:
        return None
    return {"queries": totals["queries"], "hits": totals["hits"], "metrics": [names["hits"], names["queries"]]}


async def scrape(roots: Sequence[str], api_key: str | None = None) -> dict[str, Any] | None:
    """The prefix-cache counters of every server root (`http://host:port`), summed; None when any has none."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    found: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=TIMEOUT_S, headers=headers) as client:
        for root in roots:
            try:
                resp = await client.get(f"{root.rstrip('/')}/metrics")
            except httpx.HTTPError:
                return None
            parsed = parse_prefix_cache(resp.text) if resp.status_code == 200 else None
            if parsed is None:
                return None
            found.append(parsed)
    if not found:
        return None
    return {
        "queries": sum(f["queries"] for f in found),
        "hits": sum(f["hits"] for f in found),
        "metrics": found[0]["metrics"],
    }


def level_hit_rate(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What one level added to the counters: queries, hits and their ratio (None when unknown or no queries)."""
    if before is None or after is None:
        return None
    queries = after["queries"] - before["queries"]
    hits = after["hits"] - before["hits"]
    return {
        "queries": queries,
        "hits": hits,
        "hit_rate": round(hits / queries, 6) if queries > 0 else None,
        "metrics": list(after["metrics"]),
    }
