"""Client-side limits of a served endpoint: sliding-window requests/tokens per minute and seeded retry backoff.

The rate limiter is strict: in no window of 60 seconds are more than `rpm` requests sent or more than `tpm` tokens
(prompt + generation budget, settled to the server's usage when it reports one) reserved. Waiters are served in
arrival order, so requests keep the order they were dispatched in (shared prefixes stay back to back).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

WINDOW_S = 60.0


@dataclass(frozen=True)
class ClientLimits:
    """How hard a client may push a server, and how it retries."""

    max_in_flight: int = 8
    """Requests awaiting a reply at once (a retry waiting out its backoff keeps its slot)."""
    rpm: float | None = None
    """Requests (attempts) per minute, at least 1; None: unlimited."""
    tpm: float | None = None
    """Tokens per minute, counting prompt tokens + the generation budget; None: unlimited."""
    timeout_s: float = 600.0
    """Wall-clock limit of one attempt, streaming included."""
    max_attempts: int = 6
    """Attempts per request, the first included; then the request is recorded as failed with its reason."""
    backoff_base_s: float = 0.5
    """First retry waits base x [0.5, 1) (equal jitter); each further retry doubles the base, up to the cap."""
    backoff_cap_s: float = 30.0
    retry_after_cap_s: float = 120.0
    """A server's Retry-After is honoured up to this many seconds."""
    seed: int = 0
    """Seeds the jitter: the same request id and attempt always wait the same time."""

    def __post_init__(self) -> None:
        checks = {
            "max_in_flight": self.max_in_flight >= 1,
            "rpm": self.rpm is None or self.rpm >= 1,
            "tpm": self.tpm is None or self.tpm > 0,
            "timeout_s": self.timeout_s > 0,
            "max_attempts": self.max_attempts >= 1,
            "backoff_base_s": self.backoff_base_s >= 0,
            "backoff_cap_s": self.backoff_cap_s >= 0,
            "retry_after_cap_s": self.retry_after_cap_s >= 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"ClientLimits.{bad[0]}={getattr(self, bad[0])!r} is out of range")


def backoff_s(limits: ClientLimits, request_id: str, retry: int, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number `retry` (1-based): the server's Retry-After (capped, plus up to 10%
    seeded jitter) when it gave one, else capped exponential backoff with seeded equal jitter."""
    rng = random.Random(f"{limits.seed}:{request_id}:{retry}")
    if retry_after is not None:
        wait = min(max(retry_after, 0.0), limits.retry_after_cap_s)
        return wait + rng.random() * min(1.0, 0.1 * wait)
    base = min(limits.backoff_cap_s, limits.backoff_base_s * 2 ** (retry - 1))
    return base * (0.5 + 0.5 * rng.random())


def retry_after_s(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds a server asked to wait: `retry-after-ms`, or `retry-after` as seconds or an HTTP date; else None."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


class RateLimiter:
    """Strict sliding-window limits on requests and tokens per minute, shared by every request of a client."""

    def __init__(
        self,
        rpm: float | None,
        tpm: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self._clock = clock
        self._sleep = sleep
        self._sent: deque[float] = deque()
        self._tokens: deque[list[float]] = deque()  # [time, tokens], settled in place
        self._lock: asyncio.Lock | None = None

    def _trim(self, now: float) -> None:
        while self._sent and self._sent[0] <= now - WINDOW_S:
            self._sent.popleft()
        while self._tokens and self._tokens[0][0] <= now - WINDOW_S:
            self._tokens.popleft()

    def _wait(self, now: float, tokens: int) -> float:
        wait = 0.0
        if self.rpm is not None and len(self._sent) >= self.rpm:
            wait = self._sent[int(len(self._sent) - self.rpm)] + WINDOW_S - now
        if self.tpm is not None:
            total = sum(t for _, t in self._tokens)
            for when, used in self._tokens:  # the earliest moment enough reservations leave the window
                if total + tokens <= self.tpm:
                    break
                total -= used
                wait = max(wait, when + WINDOW_S - now)
        return wait

    def check(self, tokens: int) -> str | None:
        """Why a request of `tokens` can never be sent under these limits, or None."""
        if self.tpm is not None and tokens > self.tpm:
            return f"request needs {tokens} tokens but the limit is {self.tpm:g} tokens per minute"
        return None

    async def acquire(self, tokens: int) -> list[float] | None:
        """Wait until one more request of `tokens` fits both windows, then reserve it; returns its token entry."""
        if self.rpm is None and self.tpm is None:
            return None
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # FIFO: a later request never overtakes an earlier one
            while True:
                now = self._clock()
                self._trim(now)
                wait = self._wait(now, tokens)
                if wait <= 0:
                    break
                await self._sleep(wait)
            self._sent.append(now)
            entry = [now, float(tokens)]
            if self.tpm is not None:
                self._tokens.append(entry)
            return entry

    @staticmethod
    def settle(entry: list[float] | None, tokens: int) -> None:
        """Replace a reservation by the tokens the server reports it used."""
        if entry is not None:
            entry[1] = float(tokens)
