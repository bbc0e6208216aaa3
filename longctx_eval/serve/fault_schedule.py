"""Which fault the proxy injects into which request: a seeded, reproducible schedule.

Two forms of `--schedule`:
    429=0.1,500=0.05,truncate=0.05,slow=0.1,drop=0.05   each request draws one fault with these probabilities
                                                        (the rest pass untouched); request i's draw depends
                                                        only on (seed, i), so a rerun injects the same faults
    seq:429,ok,500,truncate,slow,drop                   request i gets the i-th entry; after the end, `ok`
Faults: 429 (rate limited, with Retry-After), 500 (server error), truncate (cut JSON: half a body, or half
an SSE event), slow (delays between SSE events, or before a plain body), drop (the connection closes
mid-response).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from longctx_eval.errors import ConfigError

FAULTS = ("429", "500", "truncate", "slow", "drop")
DEFAULT_SCHEDULE = "429=0.1,500=0.1,truncate=0.05,slow=0.1,drop=0.05"


@dataclass(frozen=True)
class FaultSchedule:
    """A parsed schedule; `fault(i)` is what the i-th faultable request gets (`ok` for none)."""

    seed: int
    rates: tuple[tuple[str, float], ...] = ()
    sequence: tuple[str, ...] | None = None

    def fault(self, i: int) -> str:
        """The fault of request `i` (0-based, in arrival order): a pure function of seed, schedule and i."""
        if self.sequence is not None:
            return self.sequence[i] if i < len(self.sequence) else "ok"
        u = random.Random(f"fault-proxy:{self.seed}:{i}").random()
        for name, rate in self.rates:
            if u < rate:
                return name
            u -= rate
        return "ok"

    def plan(self, n: int) -> list[str]:
        """The faults of the first `n` requests."""
        return [self.fault(i) for i in range(n)]


def parse_schedule(text: str, seed: int) -> FaultSchedule:
    """Parse `--schedule` (see the module docstring); errors name the offending item."""
    text = text.strip()
    if text.startswith("seq:"):
        items = tuple(s.strip() for s in text[4:].split(",") if s.strip())
        unknown = [s for s in items if s not in (*FAULTS, "ok")]
        if unknown or not items:
            problem = f"unknown fault {unknown[0]!r}" if unknown else "no faults listed"
            raise ConfigError(
                f"fault schedule {text!r}: {problem}; expected seq: and a comma list of {', '.join((*FAULTS, 'ok'))}"
            )
        return FaultSchedule(seed=seed, sequence=items)
    rates: dict[str, float] = {}
    for item in (s.strip() for s in text.split(",") if s.strip()):
        name, sep, value = item.partition("=")
        if not sep or name not in FAULTS:
            raise ConfigError(
                f"fault schedule item {item!r}: expected FAULT=RATE with FAULT one of {', '.join(FAULTS)} "
                "(e.g. 429=0.1,drop=0.05), or seq:FAULT,FAULT,..."
            )
        if name in rates:
            raise ConfigError(f"fault schedule {text!r}: {name!r} is given twice")
        try:
            rate = float(value)
        except ValueError:
            rate = -1.0
        if not 0.0 <= rate <= 1.0:
            raise ConfigError(f"fault schedule item {item!r}: the rate must be a number in [0, 1]")
        rates[name] = rate
    total = sum(rates.values())
    if total > 1.0 + 1e-9:
        raise ConfigError(f"fault schedule {text!r}: the rates add up to {total:g}; they must add up to at most 1")
    return FaultSchedule(seed=seed, rates=tuple(rates.items()))
