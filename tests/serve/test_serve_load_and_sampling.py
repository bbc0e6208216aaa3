"""`serve` stays answerable under one huge prompt and answers every accepted sampling value (campaign causes 8, 9).

Cause 9: a 20 MB prompt was tokenised on the event loop, so /health waited 30 s behind it; now parsing and
tokenising run on worker threads, and a prompt over `--max-prompt-chars` (default 32 characters per token of the
window) is a 413 before it is tokenised. Cause 8: `temperature: 1e-300` was a 500 (`probability tensor contains
inf, nan`); a temperature below 1e-5 now decodes greedily. Real servers on loopback: the session's `serve_hf`
(default limit) and one started here with a raised limit.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from servers import SERVE_MODEL, _process, root

from longctx_eval.cli import main
from longctx_eval.serve.engine import partial_stop

TIMEOUT = httpx.Timeout(120.0)
DEFAULT_LIMIT = 32 * 8192  # SmolLM2's window is 8192 tokens
RAISED_LIMIT = 5_000_000
PROMPT = "The capital of France is"


def _completion(base: str, **fields: object) -> httpx.Response:
    body = {"model": SERVE_MODEL, "prompt": PROMPT, "max_tokens": 2, **fields}
    return httpx.post(f"{base}/completions", json=body, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def serve_raised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (…/v1) of `longctx-eval serve smollm2-135m --max-prompt-chars 5000000` on a free loopback port
    (started as tests/servers.py starts `serve_hf`)."""
    log = tmp_path_factory.mktemp("serve-raised") / "serve.log"
    cmd = [sys.executable, "-m", "longctx_eval.cli", "serve", SERVE_MODEL, "--port", "0", "--log-requests"]
    cmd += ["--max-prompt-chars", str(RAISED_LIMIT)]

    def find_url() -> str | None:
        m = re.search(r"listening on (http://\S+)", log.read_text(errors="replace")) if log.exists() else None
        return m.group(1) if m else None

    with _process(cmd, log, find_url, "longctx-eval serve --max-prompt-chars") as url:
        yield url


# ------------------------------------------------------------------------------------------ cause 9: the limit


def test_the_default_limit_refuses_a_prompt_over_32_characters_per_token_before_tokenising(serve_hf):
    """One character over is a 413 naming the limit and where it comes from; at the limit the prompt is tokenised
    (the window check then names its token count)."""
    over = _completion(serve_hf, prompt="x" * (DEFAULT_LIMIT + 1))
    assert over.status_code == 413 and over.headers["content-type"].startswith("application/json")
    error = over.json()["error"]
    assert error["code"] == "prompt_too_large" and error["param"] == "prompt"
    assert "262,145 characters" in error["message"] and "at most 262,144" in error["message"]
    assert "--max-prompt-chars" in error["message"] and "8192-token window" in error["message"]
    at_limit = _completion(serve_hf, prompt="hello world " * (DEFAULT_LIMIT // 12))
    assert at_limit.status_code == 400 and at_limit.json()["error"]["code"] == "context_length_exceeded"
    # a chat's messages count together; /tokenize has the same limit
    half = "y" * (DEFAULT_LIMIT // 2 + 1)
    messages = [{"role": "system", "content": half}, {"role": "user", "content": half}]
    chat_body = {"model": SERVE_MODEL, "messages": messages}
    chat = httpx.post(f"{serve_hf}/chat/completions", json=chat_body, timeout=TIMEOUT)
    assert chat.status_code == 413 and chat.json()["error"]["param"] == "messages"
    counted = httpx.post(f"{root(serve_hf)}/tokenize", json={"prompt": "x" * (DEFAULT_LIMIT + 1)}, timeout=TIMEOUT)
    assert counted.status_code == 413 and "262,144" in counted.json()["error"]["message"]


def test_max_prompt_chars_sets_the_limit(serve_raised):
    over = _completion(serve_raised, prompt="z" * (RAISED_LIMIT + 1))
    assert over.status_code == 413
    assert "at most 5,000,000 characters (--max-prompt-chars)" in over.json()["error"]["message"]
    assert _completion(serve_raised).status_code == 200


def test_max_prompt_chars_must_be_positive(capsys):
    assert main(["serve", SERVE_MODEL, "--max-prompt-chars", "0"]) == 2
    assert "--max-prompt-chars 0: expected a number of characters >= 1" in capsys.readouterr().err


def test_health_and_short_requests_answer_while_a_huge_prompt_is_tokenised(serve_raised):
    """A 4.8 MB prompt (800K tokens, under the raised limit, over the window) is tokenised before its 400; health
    checks, /v1/models and a short completion sent after it was uploaded are all answered before that 400."""
    base = root(serve_raised)
    body = json.dumps({"model": SERVE_MODEL, "prompt": "hello world " * 400_000, "max_tokens": 1}).encode()
    order: list[tuple[str, object]] = []
    uploaded = threading.Event()

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), 1 << 20):
            yield body[i : i + (1 << 20)]
        uploaded.set()

    def send_huge() -> None:
        resp = httpx.post(f"{base}/v1/completions", content=chunks(), timeout=TIMEOUT)
        order.append(("huge", (resp.status_code, resp.json()["error"]["code"])))

    huge = threading.Thread(target=send_huge)
    huge.start()
    assert uploaded.wait(60)
    with httpx.Client(timeout=TIMEOUT) as client:
        for _ in range(5):
            order.append(("health", client.get(f"{base}/health").status_code))
        order.append(("models", client.get(f"{base}/v1/models").status_code))
        short = client.post(f"{base}/v1/completions", json={"model": SERVE_MODEL, "prompt": "Hi", "max_tokens": 1})
        order.append(("short", short.status_code))
    huge.join(120)
    huge_reply = ("huge", (400, "context_length_exceeded"))
    assert order == [*[("health", 200)] * 5, ("models", 200), ("short", 200), huge_reply]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(text=st.text("ab\u00e9", max_size=40), stop=st.text("ab\u00e9", max_size=40))
def test_partial_stop_is_the_longest_stop_prefix_the_text_ends_with(text, stop):
    """The held-back text of a stop string (found by rfind, cheap for megabyte stop lists that used to cost the event
    loop 0.3 s per token) equals its definition, checked one prefix at a time."""
    expected = next((k for k in range(min(len(stop) - 1, len(text)), 0, -1) if text.endswith(stop[:k])), 0)
    assert partial_stop(text, stop) == expected


# -------------------------------------------------------------------------------- cause 8: sampling values


@pytest.mark.parametrize("temperature", [5e-324, 1e-300, 1e-40, 9.99e-6])
def test_a_temperature_below_1e_5_decodes_greedily(serve_hf, temperature):
    """Was HTTP 500 `probability tensor contains either inf, nan or element < 0` (1e-300 is 0 in float32)."""
    greedy = _completion(serve_hf, temperature=0)
    assert greedy.status_code == 200, greedy.text
    for top_p in (1e-9, 0.5, 1.0):
        tiny = _completion(serve_hf, temperature=temperature, top_p=top_p, seed=3)
        assert tiny.status_code == 200, tiny.text
        assert tiny.json()["choices"][0]["text"] == greedy.json()["choices"][0]["text"]
    streamed = httpx.post(
        f"{serve_hf}/completions",
        json={"model": SERVE_MODEL, "prompt": PROMPT, "max_tokens": 2, "temperature": temperature, "stream": True},
        timeout=TIMEOUT,
    )
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and all("error" not in json.loads(e) for e in events[:-1])
    text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
    assert text == greedy.json()["choices"][0]["text"]


def test_every_accepted_temperature_and_top_p_gets_a_reply(serve_hf):
    """Hypothesis over the accepted ranges (temperature 0..2 with subnormals, top_p 1e-9..1; bounded: 25 examples):
    every request is a 200 with generated tokens, never a 500."""

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        database=None,
    )
    @example(temperature=1e-300, top_p=1e-9)
    @example(temperature=1e-5, top_p=1e-9)
    @example(temperature=2.0, top_p=1e-9)
    @example(temperature=2.0, top_p=1.0)
    @given(
        temperature=st.one_of(st.floats(0, 2), st.floats(0, 1e-4), st.floats(0, 1e-300)),
        top_p=st.one_of(st.floats(1e-9, 1.0), st.just(1e-9)),
    )
    def sample(temperature: float, top_p: float) -> None:
        resp = _completion(serve_hf, temperature=temperature, top_p=top_p, seed=1, max_tokens=1)
        assert resp.status_code == 200, (temperature, top_p, resp.text)
        assert resp.json()["usage"]["completion_tokens"] == 1

    sample()


def test_a_huge_integer_field_is_a_400_with_the_value_cut_short(serve_hf):
    """A 400-digit temperature is compared as an integer (no OverflowError) and shown cut in the message."""
    body = f'{{"model": "{SERVE_MODEL}", "prompt": "x", "temperature": {"9" * 400}}}'
    resp = httpx.post(f"{serve_hf}/completions", content=body, timeout=TIMEOUT)
    assert resp.status_code == 400
    message = resp.json()["error"]["message"]
    assert message.startswith("'temperature' must be between 0 and 2, got 999") and "(400 characters)" in message
