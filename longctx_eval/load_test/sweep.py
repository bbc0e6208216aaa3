"""The concurrency sweep: each level sends prompts with at most N requests in flight until its budget is spent.

One client serves every level, so its rate limits (requests and tokens per minute, attempts included) hold
across the whole sweep, never per level. A level stops dispatching when it has sent `max_requests` or when
`duration_s` has passed; requests in flight then finish (their latency counts), and a request or retry that
would have to wait past the deadline for the rate limits is not sent (`not_sent`). Prompts are taken in order
and continue across levels; the pool holds a prompt for every request the sweep may send (load_test/prompts.py),
except in the cache-hit scenario, whose few prompts are sent once before the first level and then reused: every
reuse is counted in `repeated_prompts`. Where the server exposes prefix-cache counters (`/metrics`,
server_metrics.py), each level reports the hit rate it saw.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from longctx_eval.errors import ConfigError
from longctx_eval.load_test.server_metrics import level_hit_rate
from longctx_eval.load_test.summary import level_summary
from longctx_eval.models.openai.client import ServedClient, ServedRequest, ServedResult
from longctx_eval.models.openai.limits import RateLimiter

if TYPE_CHECKING:
    from longctx_eval.models.openai.pool import ServerPool

DEFAULT_LEVELS = (1, 8, 32, 128)
WARMUP_TEXT = "Reply with the single word OK."


@dataclass(frozen=True)
class SweepConfig:
    """The levels and each level's budget: requests sent and seconds (the first reached stops it)."""

    levels: tuple[int, ...] = DEFAULT_LEVELS
    max_requests: int | None = None
    """Requests sent per level; None: 4 x the concurrency, at least 8."""
    duration_s: float | None = None
    """Seconds a level may dispatch for; None: no time limit."""
    warmup: int = 1
    """Short requests sent once before the first level and not counted (connections, lazy loading)."""

    def __post_init__(self) -> None:
        if not self.levels or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in self.levels):
            raise ConfigError(f"--concurrency {self.levels!r}: expected positive integers, e.g. 1,8,32,128")
        if self.max_requests is not None and self.max_requests < 1:
            raise ConfigError(f"--max-requests {self.max_requests}: expected at least 1 request per level")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ConfigError(f"--duration {self.duration_s}: expected a positive number of seconds per level")
        if self.warmup < 0:
            raise ConfigError(f"--warmup {self.warmup}: expected 0 or more requests")

    def requests_at(self, level: int) -> int:
        """The request budget of one level."""
        return self.max_requests if self.max_requests is not None else max(8, 4 * level)

    def requests_needed(self) -> int:
        """The most requests the whole sweep may send (every level's budget), warmup left out."""
        return sum(self.requests_at(level) for level in self.levels)


class _PastDeadline(Exception):
    """The rate limits would hold a request past its level's deadline: it is not sent."""


class _Deadline:
    """The sleep the sweep's rate limiter waits with: refuses any wait that ends after the level's deadline."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.at: float | None = None

    async def sleep(self, seconds: float) -> None:
        if self.at is not None and self.clock() + seconds > self.at:
            raise _PastDeadline
        await asyncio.sleep(seconds)


def warmup_request(like: ServedRequest) -> ServedRequest:
    """A tiny request on the same endpoint as `like` (never one of the measured prompts)."""
    if like.messages is not None:
        return replace(
            like, messages=({"role": "user", "content": WARMUP_TEXT},), max_tokens=4, extra_body={}, id="warmup"
        )
    return replace(like, prompt=WARMUP_TEXT, max_tokens=4, extra_body={}, id="warmup")


async def _level(
    client: ServedClient | ServerPool,
    pool: Sequence[ServedRequest],
    start: int,
    level: int,
    config: SweepConfig,
    gate: _Deadline,
    prewarmed: bool = False,
    metrics: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
) -> tuple[dict[str, Any], int]:
    """Run one level; returns its summary and how many prompts it took from the pool (sent or not)."""
    slots = asyncio.Semaphore(level)
    results: list[ServedResult] = []
    not_sent = repeated = 0
    cut = asyncio.Event()  # set when the rate limits held a request past the deadline: dispatch no more
    deadline = None if config.duration_s is None else gate.clock() + config.duration_s
    gate.at = deadline
    stopped_by = "max_requests"

    async def one(req: ServedRequest, reused: bool) -> None:
        nonlocal not_sent, repeated
        try:
            results.append(await client.complete(req))
            repeated += reused
        except _PastDeadline:
            not_sent += 1
            cut.set()
        finally:
            slots.release()

    tasks: list[asyncio.Task] = []
    before = await metrics() if metrics is not None else None
    t0 = time.perf_counter()
    budget = config.requests_at(level)
    for j in range(budget):
        try:
            if deadline is None:
                await slots.acquire()
            else:
                await asyncio.wait_for(slots.acquire(), timeout=max(0.0, deadline - gate.clock()))
        except TimeoutError:
            stopped_by = "duration"
            break
        if cut.is_set() or (deadline is not None and gate.clock() >= deadline):
            slots.release()
            stopped_by = "duration"
            break
        k = start + j
        req = replace(pool[k % len(pool)], id=f"c{level}-{j}")
        tasks.append(asyncio.create_task(one(req, prewarmed or k >= len(pool))))
    await asyncio.gather(*tasks)
    if cut.is_set():
        stopped_by = "duration"
    wall = time.perf_counter() - t0
    after = await metrics() if metrics is not None else None
    measured = {f"c{level}-{j}": pool[(start + j) % len(pool)].prompt_tokens for j in range(len(tasks))}
    summary = level_summary(
        level,
        results,
        wall,
        stopped_by=stopped_by,
        not_sent=not_sent,
        repeated=repeated,
        measured_prompt_tokens=measured,
    )
    summary["prefix_cache"] = level_hit_rate(before, after)
    by_server = Counter(r.server for r in results if r.server is not None)
    if by_server:  # several servers (models/openai/pool.py): how many requests each answered
        summary["by_server"] = dict(sorted(by_server.items()))
    return summary, len(tasks)


async def run_sweep(
    client: ServedClient | ServerPool,
    pool: Sequence[ServedRequest],
    config: SweepConfig,
    on_level: Callable[[dict[str, Any]], None] | None = None,
    *,
    prewarm: bool = False,
    metrics: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
) -> list[dict[str, Any]]:
    """Send `pool`'s requests at every level of `config`; returns one summary per level, in order. `prewarm`:
    send the pool once first, uncounted (the cache-hit scenario); `metrics`: reads the server's prefix-cache
    counters (server_metrics.scrape), before and after each level."""
    if not pool:
        raise ConfigError("load: no prompts to send (check --tasks, --lengths and the model's context window)")
    gate = _Deadline(time.monotonic)
    client.limiter = RateLimiter(client.limits.rpm, client.limits.tpm, clock=gate.clock, sleep=gate.sleep)
    for _ in range(config.warmup):
        await client.complete(warmup_request(pool[0]))
    if prewarm:
        for i, req in enumerate(pool):
            await client.complete(replace(req, id=f"prewarm-{i}"))
    levels, start = [], 0
    for level in config.levels:
        summary, sent = await _level(client, pool, start, level, config, gate, prewarm, metrics)
        start += sent
        levels.append(summary)
        if on_level is not None:
            on_level(summary)
    return levels
