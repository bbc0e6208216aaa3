"""`decoding=greedy` on served models is greedy: the neutral value of every penalty is sent (a server's own default
otherwise applies: llama-cpp-python's repeat_penalty is 1.1, vLLM applies the model's generation_config.json), the
servers on loopback take them, and the model settings (written to the run file) record exactly the fields sent."""

from __future__ import annotations

from servers import LLAMA_MODEL, SERVE_MODEL, http_json

from longctx_eval.models.loader import load_model
from longctx_eval.models.openai.client import ServedClient
from longctx_eval.models.openai.sampling import EXTENDED, STANDARD, greedy_sampling
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request

REPEATING = "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat."
"""A prompt whose greedy continuation repeats it, so a repetition penalty changes the reply (measured on SmolLM2)."""


def _fresh(server: str) -> None:
    """Evaluate an unrelated prompt, so the next request prefills its prompt whole: llama.cpp reuses the previous
    prompt's cached prefix, and a reply computed over that reuse can differ from a whole prefill at a near tie (seen
    on a fresh machine's build: the adapter's reply, sent first, differed from the same neutral request sent right
    after it; with this before each, they match)."""
    status, _ = http_json(f"{server}/completions", {"model": LLAMA_MODEL, "prompt": "Hello there", "max_tokens": 1})
    assert status == 200


def _request(prompt: str, max_new_tokens: int = 16) -> Request:
    return Request(sample_id="s0", prompt=prompt, context=prompt, query="", max_new_tokens=max_new_tokens)


def test_the_fields_sent_to_self_hosted_and_hosted_servers():
    local, hosted = greedy_sampling("auto", hosted=False), greedy_sampling("auto", hosted=True)
    assert local.fields == STANDARD and local.extra == EXTENDED
    assert hosted.fields == STANDARD and hosted.extra == {}  # OpenAI's API refuses unknown fields
    assert greedy_sampling("all", hosted=True).extra == EXTENDED
    assert greedy_sampling("standard", hosted=False).extra == {}
    assert local.record() == {
        "frequency_penalty": 0.0,
        "min_p": 0.0,
        "presence_penalty": 0.0,
        "repeat_penalty": 1.0,
        "repetition_penalty": 1.0,
        "temperature": 0.0,
        "top_p": 1.0,
    }


def test_llama_cpp_replies_greedily_only_with_the_neutral_penalties(llama_cpp_server: str):
    spec = parse_spec(f"openai:{LLAMA_MODEL}@{llama_cpp_server}?endpoint=completions&chat=false&tokenizer=smollm2-135m")
    adapter = load_model(spec)
    try:
        req = adapter.served_request(_request(REPEATING))
        body = ServedClient(adapter.base_url, adapter.served_model)._body(req)
        assert body["temperature"] == 0.0 and body["top_p"] == 1.0 and body["seed"] == 0
        assert body["presence_penalty"] == body["frequency_penalty"] == 0.0
        assert body["extra_body"] == {"repetition_penalty": 1.0, "repeat_penalty": 1.0, "min_p": 0.0}
        [pred] = adapter.generate([_request(REPEATING)])
        settings = adapter.meta.settings
    finally:
        adapter.close()
    assert pred.status == "ok", pred.error
    raw = {"model": LLAMA_MODEL, "prompt": REPEATING, "max_tokens": 16, "temperature": 0}
    _fresh(llama_cpp_server)
    status, default = http_json(f"{llama_cpp_server}/completions", raw)  # the server's own repeat_penalty (1.1)
    assert status == 200
    _fresh(llama_cpp_server)
    status, neutral = http_json(f"{llama_cpp_server}/completions", {**raw, "repeat_penalty": 1.0})
    assert status == 200
    assert default["choices"][0]["text"] != neutral["choices"][0]["text"]  # the default penalty does change it
    assert pred.text == neutral["choices"][0]["text"]  # the adapter's reply is the unpenalised greedy one
    assert settings["decoding"] == "greedy" and settings["generation"]["repeat_penalty"] == 1.0


def test_serve_takes_the_fields_and_the_settings_record_them(serve_hf: str):
    status, refused = http_json(
        f"{serve_hf}/completions", {"model": SERVE_MODEL, "prompt": "x", "max_tokens": 2, "repetition_penalty": 1.05}
    )
    assert status == 400 and refused["error"]["param"] == "repetition_penalty"  # it reads the field it is sent
    adapter = load_model(parse_spec(f"openai:{SERVE_MODEL}@{serve_hf}?tokenizer=smollm2-135m"))
    try:
        [pred] = adapter.generate([_request("Name three colours.", 4)])  # the full set of fields, accepted
        settings = adapter.meta.settings
    finally:
        adapter.close()
    assert pred.status == "ok" and pred.completion_tokens, pred.error
    assert settings["generation"] == {**greedy_sampling("auto", hosted=False).record(), "seed": 0}
    default = f"openai:{SERVE_MODEL}@{serve_hf}?tokenizer=smollm2-135m&decoding=default"
    adapter = load_model(parse_spec(default))
    try:
        req = adapter.served_request(_request("x"))
        assert "generation" not in adapter.meta.settings and "seed" not in adapter.meta.settings
    finally:
        adapter.close()
    body = ServedClient(serve_hf, SERVE_MODEL)._body(req)
    assert not {"temperature", "top_p", "seed", "presence_penalty", "extra_body"} & set(body)  # server defaults
