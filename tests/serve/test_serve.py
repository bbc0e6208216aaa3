"""`longctx-eval serve` on SmolLM2, over real HTTP on loopback: the OpenAI routes, exact usage, streaming that
yields tokens as they are generated, /tokenize, window errors, and greedy replies equal to the in-process
`hf` adapter's."""

from __future__ import annotations

import json
import os
import threading
import time

import httpx
import pytest
from servers import SERVE_MODEL, SERVER_THREADS, http_json, root

from longctx_eval.cli import main
from longctx_eval.sample import Request

FILLER = (
    "The archive kept ledgers of grain, wool and salt for every harbour town along the northern coast. "
    "Clerks copied each entry twice, once for the guild and once for the magistrate. "
)
PROMPT = (
    FILLER * 3
    + "One of the ledgers notes that the special magic number for Oslo is 4817. "
    + FILLER * 2
    + "What is the special magic number for Oslo mentioned in the text?"
)
PREFIX = "The special magic number for Oslo is"


@pytest.fixture(scope="module")
def smollm2():
    """The in-process `hf` adapter on SmolLM2 (the reference the server must match), on the server's threads."""
    import torch

    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    model = load_model(parse_spec("smollm2-135m"))
    threads = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or SERVER_THREADS))  # as tests/servers.py runs it
    yield model
    torch.set_num_threads(threads)
    model.close()


def chat(url: str, messages: list[dict], **extra) -> tuple[int, dict]:
    """POST /v1/chat/completions."""
    return http_json(f"{url}/chat/completions", {"model": SERVE_MODEL, "messages": messages, **extra})


def stream_events(url: str, path: str, body: dict) -> list[tuple[float, str]]:
    """POST a streamed request; each SSE data payload with its arrival time (seconds after sending)."""
    events = []
    t0 = time.perf_counter()
    with httpx.Client(timeout=120) as client, client.stream("POST", f"{url}/{path}", json=body) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data: "):
                events.append((time.perf_counter() - t0, line[len("data: ") :]))
    return events


def test_models_lists_the_served_model_with_its_window(serve_hf):
    status, body = http_json(f"{serve_hf}/models")
    assert status == 200 and body["object"] == "list"
    (model,) = body["data"]
    assert model["id"] == SERVE_MODEL and model["object"] == "model" and model["max_model_len"] == 8192


def test_chat_usage_is_the_exact_prompt_length_in_the_model_tokenizer(serve_hf, smollm2):
    messages = [{"role": "user", "content": "Name one colour of the sky."}]
    status, body = chat(serve_hf, messages, max_tokens=6)
    assert status == 200, body
    text = smollm2.hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    expected = len(smollm2.hf_tok(text, add_special_tokens=False)["input_ids"])
    assert (
        body["usage"]["prompt_tokens"]
        == expected
        == smollm2.prompt_tokens(Request("s", messages[0]["content"], "", ""))
    )
    assert 1 <= body["usage"]["completion_tokens"] <= 6
    assert body["usage"]["total_tokens"] == expected + body["usage"]["completion_tokens"]
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] in ("stop", "length")
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")


def test_greedy_reply_equals_the_in_process_hf_adapter(serve_hf, smollm2):
    """The needle-style prompt with an answer prefix, through the server and in process: same text, same counts."""
    request = Request("s", PROMPT, PROMPT, "", max_new_tokens=12, answer_prefix=PREFIX)
    (local,) = smollm2.generate([request])
    messages = [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": PREFIX}]
    status, body = chat(serve_hf, messages, max_tokens=12, temperature=0, continue_final_message=True)
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == local.text
    assert body["usage"]["prompt_tokens"] == local.prompt_tokens
    assert body["usage"]["completion_tokens"] == local.completion_tokens
    # without a prefix too (the adapter's plain one-message form)
    (plain,) = smollm2.generate([Request("s", "Say hello in French.", "", "", max_new_tokens=8)])
    status, body = chat(serve_hf, [{"role": "user", "content": "Say hello in French."}], max_tokens=8)
    assert body["choices"][0]["message"]["content"] == plain.text
    assert body["usage"]["completion_tokens"] == plain.completion_tokens


def test_stream_yields_tokens_as_generated_then_usage_and_done(serve_hf):
    messages = [{"role": "user", "content": "Count from one to ten in words."}]
    _, whole = chat(serve_hf, messages, max_tokens=10)
    body = {"model": SERVE_MODEL, "messages": messages, "max_tokens": 10, "stream": True}
    events = stream_events(serve_hf, "chat/completions", {**body, "stream_options": {"include_usage": True}})
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(data) for _, data in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    content = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert "".join(t for t in content if t) == whole["choices"][0]["message"]["content"]
    assert chunks[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]  # the usage chunk comes last
    # tokens arrive one by one while the model generates, not all at the end
    times = [t for (t, _), c in zip(events, content, strict=False) if c]
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
    assert len(times) >= 6 and gaps[len(gaps) // 2] > 0.001  # a buffered reply would arrive all at once
    # without include_usage no chunk carries usage
    plain = [json.loads(d) for _, d in stream_events(serve_hf, "chat/completions", {**body, "max_tokens": 2})[:-1]]
    assert all("usage" not in c for c in plain)


def test_completions_take_text_or_token_ids_and_honour_stop(serve_hf):
    url = f"{serve_hf}/completions"
    base = {"model": SERVE_MODEL, "max_tokens": 10}
    status, text_reply = http_json(url, {**base, "prompt": "The capital of France is"})
    assert status == 200 and text_reply["object"] == "text_completion"
    _, tokenized = http_json(f"{root(serve_hf)}/tokenize", {"prompt": "The capital of France is"})
    _, ids_reply = http_json(url, {**base, "prompt": tokenized["tokens"]})
    assert ids_reply["choices"][0]["text"] == text_reply["choices"][0]["text"]
    assert ids_reply["usage"] == text_reply["usage"] and text_reply["usage"]["prompt_tokens"] == tokenized["count"]
    full = text_reply["choices"][0]["text"]
    stop = full.strip()[2:5]  # a stop string inside the greedy reply: the reply ends just before it
    _, stopped = http_json(url, {**base, "prompt": "The capital of France is", "stop": [stop]})
    assert stopped["choices"][0]["text"] == full[: full.index(stop)]
    assert stopped["choices"][0]["finish_reason"] == "stop"
    events = stream_events(serve_hf, "completions", {**base, "prompt": "The capital of France is", "stream": True})
    streamed = "".join(json.loads(d)["choices"][0]["text"] for _, d in events[:-1])
    assert streamed == full and events[-1][1] == "[DONE]"


def test_tokenize_counts_prompts_and_chats_as_vllm_does(serve_hf, smollm2):
    url = f"{root(serve_hf)}/tokenize"
    status, body = http_json(url, {"model": SERVE_MODEL, "prompt": "hello world"})
    assert status == 200 and body == {
        "tokens": smollm2.hf_tok("hello world")["input_ids"],
        "count": len(smollm2.hf_tok("hello world")["input_ids"]),
        "max_model_len": 8192,
    }
    messages = [{"role": "user", "content": "hello world"}]
    _, chat_body = http_json(url, {"messages": messages})
    assert chat_body["count"] == len(chat_body["tokens"]) == smollm2.prompt_tokens(Request("s", "hello world", "", ""))
    _, back = http_json(f"{root(serve_hf)}/detokenize", {"tokens": body["tokens"]})
    assert back["prompt"] == "hello world"


def test_over_window_prompts_are_refused_naming_the_lengths(serve_hf):
    long_prompt = "grain and salt " * 3000  # ~9K tokens, over SmolLM2's 8192
    _, counted = http_json(f"{root(serve_hf)}/tokenize", {"prompt": long_prompt})
    n = counted["count"]
    assert n > 8192
    status, body = http_json(f"{serve_hf}/completions", {"model": SERVE_MODEL, "prompt": long_prompt, "max_tokens": 4})
    assert status == 400
    err = body["error"]
    assert err["code"] == "context_length_exceeded" and err["type"] == "invalid_request_error"
    assert "8192" in err["message"] and str(n) in err["message"] and str(n + 4) in err["message"]
    status, body = chat(serve_hf, [{"role": "user", "content": "hi"}], max_tokens=9000)
    assert status == 400 and "9000 in the completion" in body["error"]["message"]


ONE = [{"role": "user", "content": "x"}]


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("chat/completions", {"model": "gpt-4", "messages": ONE}, 404, "gpt-4"),
        ("chat/completions", {"model": SERVE_MODEL, "messages": []}, 400, "messages"),
        (
            "chat/completions",
            {"model": SERVE_MODEL, "messages": [{"role": "user", "content": "x"}], "n": 2},
            400,
            "'n'",
        ),
        ("completions", {"model": SERVE_MODEL, "prompt": "x", "temperature": 3}, 400, "temperature"),
        (
            "completions",
            {"model": SERVE_MODEL, "prompt": "x", "stream_options": {"include_usage": True}},
            400,
            "stream",
        ),
        ("completions", {"model": SERVE_MODEL, "prompt": [10**9]}, 400, "vocabulary"),
        (
            "chat/completions",
            {"model": SERVE_MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": {"a": 1}}]}]},
            400,
            "'text' must be a string",
        ),
    ],
)
def test_bad_requests_get_openai_error_bodies(serve_hf, path, body, status, needle):
    got, reply = http_json(f"{serve_hf}/{path}", body)
    assert got == status and needle in reply["error"]["message"], reply


def test_unknown_routes_and_bad_json_get_openai_error_bodies(serve_hf):
    with httpx.Client(timeout=30) as client:
        missing = client.get(f"{serve_hf}/nope")
        assert missing.status_code == 404 and "error" in missing.json()
        broken = client.post(f"{serve_hf}/completions", content=b"{not json")
        assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]


def test_concurrent_requests_are_queued_and_answered_alike(serve_hf):
    replies: list[dict] = []
    body = {"model": SERVE_MODEL, "prompt": "Once upon a time", "max_tokens": 4}

    def ask() -> None:
        replies.append(http_json(f"{serve_hf}/completions", body)[1])

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r["choices"][0]["text"] for r in replies}) == 1


def test_sampling_with_a_seed_is_reproducible(serve_hf):
    body = {"model": SERVE_MODEL, "prompt": "My favourite animal is", "max_tokens": 6, "temperature": 1.0, "seed": 7}
    first = http_json(f"{serve_hf}/completions", body)[1]["choices"][0]["text"]
    assert http_json(f"{serve_hf}/completions", body)[1]["choices"][0]["text"] == first


def test_a_client_that_leaves_mid_stream_frees_the_model(serve_hf):
    body = {"model": SERVE_MODEL, "prompt": "Write a long story about a ship.", "max_tokens": 200, "stream": True}
    with httpx.Client(timeout=60) as client, client.stream("POST", f"{serve_hf}/completions", json=body) as resp:
        next(resp.iter_lines())  # first token arrived; now hang up
    t0 = time.perf_counter()
    status, _ = http_json(f"{serve_hf}/completions", {"model": SERVE_MODEL, "prompt": "Hi", "max_tokens": 2})
    assert status == 200 and time.perf_counter() - t0 < 60  # not stuck behind the 200-token generation


def test_serve_refuses_a_model_that_is_not_hf(capsys):
    assert main(["serve", "bm25", "--port", "0"]) == 2
    assert "serve takes an hf: model spec" in capsys.readouterr().err


def test_streamed_text_never_shows_a_stop_string_or_half_a_character(smollm2):
    from longctx_eval.serve.engine import TextAssembler

    text = "Prices in the café rose ☕ before Paris. Then nothing."
    ids = smollm2.hf_tok(text, add_special_tokens=False)["input_ids"]
    asm = TextAssembler(lambda t: smollm2.hf_tok.decode(t, skip_special_tokens=True), smollm2.eos_ids, ["Paris"])
    sent = ""
    for token in ids:
        sent += asm.add(token)
        assert "\ufffd" not in sent and "Par" not in sent and text.startswith(sent)
        if asm.finish_reason:
            break
    assert sent == asm.text == text[: text.index("Paris")] and asm.finish_reason == "stop"
    whole = TextAssembler(lambda t: smollm2.hf_tok.decode(t, skip_special_tokens=True), smollm2.eos_ids, [])
    streamed = "".join(whole.add(t) for t in [*ids, smollm2.eos_ids[0]])
    assert streamed == text and whole.tokens == len(ids) + 1 and whole.finish_reason == "stop"
