"""llama-cpp-python's OpenAI-compatible server (the `api-test` extra, installed by `make test`) on the packaged
SmolLM2 GGUF, on loopback: it lists the model, answers with usage whose prompt count is SmolLM2's chat-template
length, and streams chunks as they are generated."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from servers import LLAMA_MODEL, first_completion, free_port, http_json, root

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def test_lists_the_gguf_model(llama_cpp_server):
    status, body = http_json(f"{llama_cpp_server}/models")
    assert status == 200 and [m["id"] for m in body["data"]] == [LLAMA_MODEL]


def test_chat_answers_with_usage_counted_in_smollm2_tokens(llama_cpp_server):
    from longctx_eval.models.model_source import hf_tokenizer_pair
    from longctx_eval.models.spec import parse_spec

    body = {"model": LLAMA_MODEL, "messages": MESSAGES, "max_tokens": 8, "temperature": 0}
    status, reply = http_json(f"{llama_cpp_server}/chat/completions", body)
    assert status == 200, reply
    assert reply["object"] == "chat.completion" and reply["choices"][0]["message"]["role"] == "assistant"
    assert reply["choices"][0]["message"]["content"]
    usage = reply["usage"]
    assert 1 <= usage["completion_tokens"] <= 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # the GGUF's chat template renders the same prompt as the transformers tokenizer of the same model
    hf_tok, _ = hf_tokenizer_pair(parse_spec("smollm2-135m"))
    text = hf_tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert usage["prompt_tokens"] == len(hf_tok(text, add_special_tokens=False)["input_ids"])
    # its tokenize endpoint (llama.cpp's own path) agrees with the transformers tokenizer
    status, tokens = http_json(f"{root(llama_cpp_server)}/extras/tokenize", {"input": "hello world"})
    assert status == 200 and tokens["tokens"] == hf_tok("hello world", add_special_tokens=False)["input_ids"]


def test_completions_are_greedy_and_repeatable_at_temperature_zero(llama_cpp_server):
    body = {"model": LLAMA_MODEL, "prompt": "The capital of France is", "max_tokens": 6, "temperature": 0}
    first = http_json(f"{llama_cpp_server}/completions", body)[1]
    second = http_json(f"{llama_cpp_server}/completions", body)[1]
    assert first["choices"][0]["text"] == second["choices"][0]["text"]
    assert first["usage"]["prompt_tokens"] == 5


def test_stream_chunks_arrive_one_by_one_and_end_with_done(llama_cpp_server):
    body = {"model": LLAMA_MODEL, "messages": MESSAGES, "max_tokens": 12, "temperature": 0, "stream": True}
    arrivals: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", f"{llama_cpp_server}/chat/completions", json=body) as resp,
    ):
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data: "):
                arrivals.append((time.perf_counter() - t0, line[len("data: ") :]))
    assert arrivals[-1][1] == "[DONE]"
    chunks = [json.loads(d) for _, d in arrivals[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    content = [(t, c["choices"][0]["delta"].get("content")) for (t, _), c in zip(arrivals, chunks, strict=False)]
    times = [t for t, text in content if text]
    assert len(times) >= 4 and times[-1] > times[0]  # streamed as generated, not in one piece
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_a_server_that_cannot_complete_fails_its_start_once_with_the_log_and_the_hint(tmp_path):
    # nothing listens on the port: what a server that died at its first matmul (the AMX crash) looks like
    log = tmp_path / "llama-cpp-server.log"
    log.write_text("loading model\nSegmentation fault\n")
    with pytest.raises(RuntimeError, match=r"(?s)failed its first completion \(no reply.*portable AVX2.*Segmentation"):
        first_completion(f"http://127.0.0.1:{free_port()}/v1", log)
