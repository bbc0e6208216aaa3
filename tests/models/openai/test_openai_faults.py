"""Faults between the `openai:` adapter and a real server (the fault proxy in front of `longctx-eval serve`):
429 with Retry-After, 500, truncated JSON, slow and dropped streams on a seeded schedule; every sample is scored
exactly once, retries are counted by reason in the run file, a request that keeps failing is recorded as failed
and re-run on resume. Plus the client's limits on their own: strict rate windows, seeded capped backoff."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections import Counter
from pathlib import Path

import pytest
from servers import SERVE_MODEL, http_json, root
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.errors import PrerequisiteError
from longctx_eval.models.loader import load_model
from longctx_eval.models.openai.client import ClientLimits, ServedClient, ServedRequest
from longctx_eval.models.openai.limits import RateLimiter, backoff_s, retry_after_s
from longctx_eval.models.spec import parse_spec
from longctx_eval.results import read_run
from longctx_eval.serve.fault_schedule import parse_schedule

FAST = "tokenizer=smollm2-135m&max_in_flight=1&backoff_base=0.05&backoff_cap=0.2"
"""One request in flight: the proxy's i-th request is a known request, so the schedule maps to known samples."""
REASON = {"429": "429", "500": "5xx", "truncate": "invalid_json", "drop": "broken_stream"}
"""The retry reason each injected fault must be counted under (slow streams complete: no retry)."""


def run_needle(out: Path, spec: str, limit: int) -> Path:
    argv = ["run", "--model", spec, *tiny_needle("256"), "--limit", str(limit), "--out", str(out)]
    assert main(argv) == 0
    return out / parse_spec(spec).name


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_seeded_faults_lose_no_sample_and_are_counted(serve_hf: str, fault_proxy, tmp_path: Path):
    schedule = "seq:429,500,truncate,ok,drop,slow,500"
    url = fault_proxy(serve_hf, seed=7, schedule=schedule, retry_after_s=0.3, slow_delay_s=0.05)
    run_dir = run_needle(tmp_path, f"openai:{SERVE_MODEL}@{url}?{FAST}&name=faulty", limit=3)
    plan = parse_schedule(schedule, 7).plan(7)
    injected = http_json(root(url) + "/fault-stats")[1]
    assert injected["requests"] == 8 and injected["injected_total"] == 6  # every scheduled fault was injected
    scores = records(run_dir / "scores" / "needle.jsonl")
    assert len(scores) == 3 and len({s["id"] for s in scores}) == 3  # every sample scored exactly once
    assert all(s["status"] == "ok" for s in scores)
    preds = records(run_dir / "predictions.jsonl")
    assert len(preds) == 3 and [p["data"]["serving"]["attempts"] for p in preds] == [4, 2, 2]
    want = Counter(REASON[f] for f in plan if f in REASON)
    serving = read_run(run_dir / "run.json").tasks[0].serving
    assert serving.retries_by_reason == dict(want) == {"429": 1, "5xx": 2, "invalid_json": 1, "broken_stream": 1}
    assert serving.retries == 5 and serving.attempts == 8 and serving.failed == 0 and serving.ok == 3
    assert [p["data"]["serving"]["retries_by_reason"] for p in preds] == [
        {"429": 1, "5xx": 1, "invalid_json": 1},
        {"broken_stream": 1},  # the slow stream that followed completed
        {"5xx": 1},
    ]


def test_a_request_that_keeps_failing_is_recorded_then_rerun_on_resume(serve_hf: str, fault_proxy, tmp_path: Path):
    url = fault_proxy(serve_hf, schedule="seq:500,500,500", retry_after_s=0.1)
    spec = f"openai:{SERVE_MODEL}@{url}?{FAST}&max_attempts=3&name=failing"
    run_dir = run_needle(tmp_path, spec, limit=2)
    first = records(run_dir / "predictions.jsonl")
    failed = [p for p in first if p["status"] == "error"]
    assert len(first) == 2 and len(failed) == 1
    assert failed[0]["error"].startswith("5xx after 3 attempt(s): HTTP 500: internal server error")
    task = read_run(run_dir / "run.json").tasks[0]
    assert task.errors == 1 and task.serving.failed == 1 and task.serving.failure_kinds == {"5xx": 1}
    assert task.serving.retries_by_reason == {"5xx": 2}
    run_needle(tmp_path, spec, limit=2)  # the same command again: the failed sample is sent again, now it passes
    assert len(records(run_dir / "predictions.jsonl")) == 3  # one new line, for the failed sample only
    scores = records(run_dir / "scores" / "needle.jsonl")
    assert sorted(s["id"] for s in scores) == sorted(p["sample_id"] for p in first)
    assert all(s["status"] == "ok" for s in scores)
    task = read_run(run_dir / "run.json").tasks[0]
    assert task.errors == 0 and task.serving.failed == 0 and task.serving.ok == 2


def test_a_stalled_stream_times_out_and_is_retried(serve_hf: str, fault_proxy):
    url = fault_proxy(serve_hf, schedule="seq:slow", slow_delay_s=5.0)
    limits = ClientLimits(timeout_s=8.0, backoff_base_s=0.05, max_attempts=3)
    client = ServedClient(url, SERVE_MODEL, limits=limits)
    req = ServedRequest(messages=({"role": "user", "content": "Count: one, two,"},), max_tokens=4, id="slow")

    async def go():
        try:
            return await client.complete(req)
        finally:
            await client.aclose()

    result = asyncio.run(go())
    assert result.ok and result.retries_by_reason == {"timeout": 1} and result.attempts == 2
    assert result.completion_tokens == 4 and result.ttft_s is not None


def test_retry_after_is_honoured(serve_hf: str, fault_proxy):
    url = fault_proxy(serve_hf, schedule="seq:429", retry_after_s=1.5)
    client = ServedClient(url, SERVE_MODEL, limits=ClientLimits(backoff_base_s=0.01, backoff_cap_s=0.01))
    req = ServedRequest(messages=({"role": "user", "content": "Say yes."},), max_tokens=2, id="r")

    async def go():
        try:
            return await client.complete(req)
        finally:
            await client.aclose()

    t0 = time.monotonic()
    result = asyncio.run(go())
    assert result.ok and result.retries_by_reason == {"429": 1}
    assert result.started - (time.time() - (time.monotonic() - t0)) >= 1.5  # the retry waited Retry-After


def test_an_unreachable_server_is_one_clear_error(unused_port: int):
    with pytest.raises(PrerequisiteError, match="cannot reach http://127.0.0.1:.*is the server running"):
        load_model(parse_spec(f"openai:m@http://127.0.0.1:{unused_port}/v1?tokenizer=smollm2-135m"))


@pytest.fixture
def unused_port() -> int:
    from servers import free_port

    return free_port()


# --- the client's limits on their own (a fake clock: no waiting) ----------------------------------------------


class FakeClock:
    """Time that moves only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _acquire_times(limiter: RateLimiter, clock: FakeClock, budgets: list[int]) -> list[float]:
    async def go() -> list[float]:
        out = []
        for b in budgets:
            await limiter.acquire(b)
            out.append(clock.now)
        return out

    return asyncio.run(go())


def test_rate_windows_are_strict():
    clock = FakeClock()
    times = _acquire_times(RateLimiter(3, None, clock=clock, sleep=clock.sleep), clock, [1] * 7)
    assert times == [0, 0, 0, 60, 60, 60, 120]
    clock = FakeClock()
    limiter = RateLimiter(None, 1000, clock=clock, sleep=clock.sleep)
    times = _acquire_times(limiter, clock, [400, 400, 400, 300, 100])
    assert times == [0, 0, 60, 60, 60]  # 1000 tokens at most in any 60 s window
    for t in set(times):
        assert sum(b for b, s in zip([400, 400, 400, 300, 100], times, strict=True) if s == t) <= 1000
    assert "limit is 1000 tokens per minute" in limiter.check(1500)
    with pytest.raises(ValueError, match="rpm"):
        ClientLimits(rpm=0.5)


def test_settled_usage_frees_the_token_window():
    clock = FakeClock()
    limiter = RateLimiter(None, 1000, clock=clock, sleep=clock.sleep)

    async def go() -> float:
        entry = await limiter.acquire(900)  # reserved at the budget, used far less
        RateLimiter.settle(entry, 100)
        await limiter.acquire(900)
        return clock.now

    assert asyncio.run(go()) == 0


def test_backoff_is_seeded_capped_and_honours_retry_after():
    limits = ClientLimits(backoff_base_s=1.0, backoff_cap_s=8.0, retry_after_cap_s=30.0, seed=3)
    waits = [backoff_s(limits, "s1#0", k) for k in range(1, 7)]
    assert waits == [backoff_s(limits, "s1#0", k) for k in range(1, 7)]  # same seed, id, retry: same wait
    assert waits != [
        backoff_s(ClientLimits(backoff_base_s=1.0, backoff_cap_s=8.0, seed=4), "s1#0", k) for k in range(1, 7)
    ]
    for k, w in enumerate(waits, 1):
        base = min(8.0, 2 ** (k - 1))
        assert base / 2 <= w < base  # equal jitter under the cap
    assert 2.0 <= backoff_s(limits, "x", 1, retry_after=2.0) <= 2.2
    assert 30.0 <= backoff_s(limits, "x", 1, retry_after=600.0) <= 31.0  # capped
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    date = email.utils.formatdate(1000.0 + 5, usegmt=True)
    assert retry_after_s({"retry-after": date}, now=1000.0) == pytest.approx(5.0)
    assert retry_after_s({}) is None and retry_after_s({"retry-after": "soon"}) is None
