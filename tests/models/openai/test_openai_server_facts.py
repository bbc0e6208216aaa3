"""What a served model's server says about itself: the window from vLLM's `/v1/models` or llama.cpp's `/props`, and
llama.cpp's slot count, which `max_in_flight` follows unless given. The server here is a plain HTTP server on
loopback answering `/v1/models` and `/props` with llama.cpp's `llama-server` shapes (that binary is not installed
here: llama-cpp-python's server has no `/props`); the adapter reaches it over real HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from longctx_eval.models.loader import load_model
from longctx_eval.models.openai.server_facts import (
    ServerFacts,
    combined,
    facts_of_props,
    served_window,
    smallest,
    window_of_models,
)
from longctx_eval.models.spec import parse_spec

PROPS = {  # the fields of llama-server's GET /props this reads, among others it sends
    "default_generation_settings": {"n_ctx": 4096, "params": {"temperature": 0.8}},
    "total_slots": 2,
    "model_path": "gemma-3-270m-q4_k_m.gguf",
    "chat_template": "",
}


def test_props_and_models_fields():
    facts = facts_of_props(PROPS)
    assert facts == ServerFacts(4096, "/props default_generation_settings.n_ctx", 2, "/props total_slots")
    assert facts_of_props({"n_ctx": 512}).window == 512 and facts_of_props({}) == ServerFacts()
    assert facts_of_props({"total_slots": True, "default_generation_settings": {"n_ctx": -1}}) == ServerFacts()
    vllm = [{"id": "other", "max_model_len": 1}, {"id": "m", "max_model_len": 8192}]
    assert window_of_models(vllm, "m") == (8192, "/v1/models max_model_len")
    assert combined(window_of_models(vllm, "m"), facts) == ServerFacts(
        8192, "/v1/models max_model_len", 2, "/props total_slots"
    )
    assert smallest([facts, ServerFacts(8192, "x", 1, "y")]) == ServerFacts(
        4096, "/props default_generation_settings.n_ctx", 1, "y"
    )
    assert served_window(100, facts, 7).record() == {"tokens": 100, "source": "max_length option"}
    assert served_window(None, facts, 7).source == "the server's /props default_generation_settings.n_ctx"
    assert served_window(None, ServerFacts(), 7).tokens == 7 and served_window(None, ServerFacts(), None).tokens is None


@pytest.fixture
def props_server() -> Iterator[str]:
    """Base URL (…/v1) of a loopback HTTP server answering GET /v1/models (no window) and GET /props."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = {"/v1/models": {"object": "list", "data": [{"id": "m", "object": "model"}]}, "/props": PROPS}
            payload = body.get(self.path)
            self.send_response(200 if payload is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(payload if payload is not None else {"error": "not found"}).encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_window_and_slots_come_from_props_unless_given(props_server):
    adapter = load_model(parse_spec(f"openai:m@{props_server}?tokenizer=smollm2-135m"))
    try:
        assert adapter.meta.context_window == 4096
        assert adapter.limits.max_in_flight == 2 and adapter.batch_size == 32
        assert adapter.meta.runtime["max_in_flight"] == {"requests": 2, "source": "/props total_slots"}
        assert adapter.meta.runtime["window"]["source"] == "the server's /props default_generation_settings.n_ctx"
        assert adapter.meta.runtime["server"]["slots"] == 2
    finally:
        adapter.close()
    given = load_model(parse_spec(f"openai:m@{props_server}?tokenizer=smollm2-135m&max_in_flight=8&max_length=2048"))
    try:
        assert given.limits.max_in_flight == 8 and given.meta.context_window == 2048
        assert given.meta.runtime["max_in_flight"]["source"] == "max_in_flight option"
    finally:
        given.close()
