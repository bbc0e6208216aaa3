"""The fault-injection proxy in front of a real `longctx-eval serve`: the schedule is seeded and reproducible,
every fault kind really reaches the client as it should, and /fault-stats counts what was injected."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter

import httpx
import pytest
from servers import SERVE_MODEL, http_json, root

from longctx_eval.cli import main
from longctx_eval.errors import ConfigError
from longctx_eval.serve.fault_schedule import FAULTS, parse_schedule

CHAT = {"model": SERVE_MODEL, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3}


def test_schedule_is_a_pure_function_of_seed_and_request_index():
    schedule = parse_schedule("429=0.2,500=0.1,truncate=0.1,slow=0.1,drop=0.1", seed=5)
    plan = schedule.plan(2000)
    assert plan == parse_schedule("429=0.2,500=0.1,truncate=0.1,slow=0.1,drop=0.1", seed=5).plan(2000)
    assert [schedule.fault(i) for i in reversed(range(2000))] == plan[::-1]  # no hidden state: order-free
    assert plan != parse_schedule("429=0.2,500=0.1,truncate=0.1,slow=0.1,drop=0.1", seed=6).plan(2000)
    counts = Counter(plan)
    for fault, rate in (("429", 0.2), ("500", 0.1), ("drop", 0.1), ("ok", 0.4)):
        assert abs(counts[fault] / 2000 - rate) < 0.035, (fault, counts)
    assert parse_schedule("seq:429,ok,drop", seed=0).plan(5) == ["429", "ok", "drop", "ok", "ok"]
    assert set(parse_schedule("drop=1", seed=1).plan(50)) == {"drop"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("429=0.5,boom=0.1", "'boom=0.1'"),
        ("500=2", "[0, 1]"),
        ("429=0.6,500=0.6", "add up to 1.2"),
        ("seq:oops", "oops"),
    ],
)
def test_bad_schedules_name_the_offending_item(text, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        parse_schedule(text, seed=0)


def _post(client: httpx.Client, url: str, stream: bool) -> tuple[str, object]:
    """One chat request through the proxy: ("status", (code, headers, text)) or ("stream", events) or ("error", exc)."""
    body = {**CHAT, "stream": stream}
    try:
        if not stream:
            r = client.post(f"{url}/chat/completions", json=body)
            return "status", (r.status_code, r.headers, r.text)
        events: list[tuple[float, str]] = []
        t0 = time.perf_counter()
        with client.stream("POST", f"{url}/chat/completions", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append((time.perf_counter() - t0, line[len("data: ") :]))
        return "stream", events
    except httpx.TransportError as exc:
        return "error", exc


def test_every_fault_kind_reaches_the_client_and_is_counted(serve_hf, fault_proxy):
    order = ["429", "500", "truncate", "truncate", "slow", "drop", "drop", "ok"]
    streams = [False, False, False, True, True, False, True, False]
    url = fault_proxy(serve_hf, seed=0, schedule="seq:" + ",".join(order), retry_after_s=0.5, slow_delay_s=0.3)
    with httpx.Client(timeout=120) as client:
        got = [_post(client, url, s) for s in streams]
        assert client.get(f"{url}/models").status_code == 200  # not a generation request: passed through
    # 429 with when to retry; 500; both OpenAI-shaped errors
    (kind, (code, headers, text)) = got[0]
    assert code == 429 and headers["retry-after"] == "1" and headers["retry-after-ms"] == "500"
    assert json.loads(text)["error"]["code"] == "rate_limit_exceeded"
    assert got[1][1][0] == 500 and "error" in json.loads(got[1][1][2])
    # truncated JSON: a 200 whose body does not parse; a stream whose event does not parse and never ends
    code, _, text = got[2][1]
    assert code == 200 and text.startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    events = got[3][1]
    assert [d for _, d in events][-1] != "[DONE]"
    with pytest.raises(json.JSONDecodeError):
        json.loads(events[-1][1])
    # slow stream: complete, with the delay between every two events
    events = got[4][1]
    assert events[-1][1] == "[DONE]"
    gaps = [b - a for (a, _), (b, _) in zip(events, events[1:], strict=False)]
    assert gaps and min(gaps) >= 0.25
    # dropped connections: mid-body for a plain reply, after the first event for a stream
    assert got[5][0] == "error" and isinstance(got[5][1], httpx.RemoteProtocolError)
    assert got[6][0] == "error" and isinstance(got[6][1], httpx.RemoteProtocolError)
    code, _, text = got[7][1]
    assert code == 200 and json.loads(text)["usage"]["prompt_tokens"] > 0
    status, stats = http_json(f"{root(url)}/fault-stats")
    assert status == 200 and stats["requests"] == 8 and stats["ok"] == 1 and stats["passed_through"] == 1
    assert stats["injected"] == {f: order.count(f) for f in FAULTS} and stats["injected_total"] == 7
    assert [(e["fault"], e["stream"]) for e in stats["log"]] == list(zip(order, streams, strict=True))
    reset = httpx.delete(f"{root(url)}/fault-stats").json()
    assert reset["requests"] == 0 and reset["injected_total"] == 0


def test_a_rate_schedule_injects_the_planned_faults_again_on_a_rerun(serve_hf, fault_proxy):
    schedule = "429=0.35,500=0.35"  # faults answered by the proxy itself: quick
    plan = parse_schedule(schedule, seed=11).plan(12)
    expected = [{"429": 429, "500": 500, "ok": 200}[f] for f in plan]
    body = {"model": SERVE_MODEL, "prompt": "Hi", "max_tokens": 1}
    for _ in range(2):  # two proxies with the same seed: the same faults at the same requests
        url = fault_proxy(serve_hf, seed=11, schedule=schedule)
        assert [http_json(f"{url}/completions", body)[0] for _ in plan] == expected
        stats = http_json(f"{root(url)}/fault-stats")[1]
        assert stats["injected"]["429"] == plan.count("429") and stats["ok"] == plan.count("ok")


def test_fault_proxy_command_serves_and_counts(serve_hf, tmp_path):
    log = tmp_path / "proxy.log"
    cmd = [sys.executable, "-m", "longctx_eval.cli", "fault-proxy", "--upstream", serve_hf, "--seed", "3"]
    with log.open("wb") as out:
        proc = subprocess.Popen([*cmd, "--schedule", "seq:500", "--port", "0"], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (m := re.search(r"listening on (http://\S+)", log.read_text())) and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        assert m, log.read_text()
        assert http_json(f"{m.group(1)}/v1/chat/completions", CHAT)[0] == 500
        stats = http_json(f"{m.group(1)}/fault-stats")[1]
        assert stats["injected"]["500"] == 1 and stats["seed"] == 3
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_fault_proxy_command_refuses_a_bad_schedule(capsys):
    assert main(["fault-proxy", "--upstream", "http://127.0.0.1:9", "--schedule", "teapot=0.1"]) == 2
    assert "'teapot=0.1'" in capsys.readouterr().err
