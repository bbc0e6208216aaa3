"""`serve` never wedges and always answers in OpenAI's shape (campaign 1.14, 1.15), on a real server on loopback.

The worker-exception case is also driven in process through `HFEngine.stream` (no request can reach a failing
worker once the protocol refuses the seed, so that is the only way to make the worker itself raise), and a
hypothesis fuzzer sends request bodies drawn from the request schema, valid and not, to the real server.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from servers import SERVE_MODEL, root

from longctx_eval.serve.engine import Completion, GenerationError, HFEngine, Sampling

TOO_BIG_SEED = 18446744073709551616  # 2**64: torch.manual_seed raises on it
TIMEOUT = httpx.Timeout(60.0)


def _post(url: str, body: object) -> httpx.Response:
    return httpx.post(url, content=json.dumps(body), headers={"Content-Type": "application/json"}, timeout=TIMEOUT)


def _assert_openai_error(resp: httpx.Response, status: int, param: str | None = None) -> dict:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json"), resp.text
    error = resp.json()["error"]
    assert isinstance(error["message"], str) and error["message"] and isinstance(error["type"], str)
    if param is not None:
        assert error["param"] == param
    return error


def _still_serving(base: str) -> None:
    """A normal generation completes after whatever came before (the engine is not wedged)."""
    resp = _post(f"{base}/completions", {"model": SERVE_MODEL, "prompt": "One, two,", "max_tokens": 2})
    assert resp.status_code == 200, resp.text
    assert resp.json()["usage"]["completion_tokens"] >= 1


def test_seed_past_torchs_range_is_a_400_and_the_server_keeps_serving(serve_hf):
    body = {"model": SERVE_MODEL, "prompt": "Hello", "max_tokens": 1, "temperature": 0.5, "seed": TOO_BIG_SEED}
    for route in ("completions", "chat/completions"):
        sent = dict(body)
        if route.startswith("chat"):
            sent["messages"] = [{"role": "user", "content": sent.pop("prompt")}]
        error = _assert_openai_error(_post(f"{serve_hf}/{route}", sent), 400, "seed")
        assert "at most 18446744073709551615" in error["message"]
        _still_serving(serve_hf)
    top = dict(body, seed=TOO_BIG_SEED - 1)  # the largest seed torch takes is served
    assert _post(f"{serve_hf}/completions", top).status_code == 200


@pytest.mark.parametrize("tokens", [[-5], [99999999], [1, -1], "abc", [1.5], None])
def test_detokenize_refuses_ids_outside_the_vocabulary_as_json(serve_hf, tokens):
    body = {} if tokens is None else {"tokens": tokens}
    _assert_openai_error(_post(f"{root(serve_hf)}/detokenize", body), 400, "tokens")
    ok = _post(f"{root(serve_hf)}/detokenize", {"tokens": [1, 2, 3]})
    assert ok.status_code == 200 and isinstance(ok.json()["prompt"], str)


@pytest.fixture(scope="module")
def engine(tiny_llama_dir):
    """The engine `serve` runs, in process, over a real (random-weight, tiny) Llama: its worker driven directly."""
    engine = HFEngine.load(f"hf:{tiny_llama_dir}", "tiny")
    yield engine
    engine.adapter.close()


def test_a_worker_exception_fails_its_request_and_frees_the_engine(engine):
    """The seed that used to raise outside the worker's handler: the request fails, the next one runs."""
    ids = engine.text_ids("Once upon a time")

    async def generate(sampling: Sampling) -> Completion:
        out = Completion(prompt_tokens=len(ids))
        async with engine.lock:
            async for _ in engine.stream(ids, sampling, out):
                pass
        return out

    async def scenario() -> Completion:
        with pytest.raises(GenerationError, match="generation failed"):
            await asyncio.wait_for(generate(Sampling(max_tokens=1, temperature=0.5, seed=TOO_BIG_SEED)), 60)
        assert not engine.lock.locked()
        return await asyncio.wait_for(generate(Sampling(max_tokens=2)), 60)

    out = asyncio.run(scenario())
    assert out.completion_tokens >= 1 and out.finish_reason in ("stop", "length")


# ------------------------------------------------------------------------------------------------ the fuzzer

_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.lists(st.integers(min_value=-10, max_value=60000), max_size=4),
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "assistant", "tool", "robot"]), "content": st.text(max_size=20)}
)
_not_a_count = st.one_of(st.booleans(), st.floats(), st.text(max_size=4), st.integers(max_value=0))
_budget = st.one_of(st.integers(min_value=1, max_value=3), _not_a_count)
"""Token budgets stay tiny (or invalid): a valid large one would generate up to the window, minutes on a CPU."""
_fields = {
    "model": st.one_of(st.just(SERVE_MODEL), _junk),
    "max_completion_tokens": st.one_of(st.none(), _budget),
    "temperature": st.one_of(st.floats(min_value=0, max_value=2.5), _junk),
    "top_p": st.one_of(st.floats(min_value=0, max_value=1.2), _junk),
    "seed": st.one_of(st.integers(min_value=-(2**64), max_value=2**65), _junk),
    "stop": st.one_of(st.text(max_size=4), st.lists(st.text(max_size=4), max_size=5), _junk),
    "stream": st.one_of(st.booleans(), _junk),
    "stream_options": st.one_of(st.fixed_dictionaries({"include_usage": st.booleans()}), _junk),
    "n": st.one_of(st.integers(min_value=0, max_value=3), _junk),
    "logprobs": _junk,
    "add_special_tokens": _junk,
}
_bodies = {
    "/v1/completions": st.fixed_dictionaries(
        {
            "prompt": st.one_of(st.text(max_size=30), st.lists(st.integers(-3, 50000), max_size=6), _junk),
            "max_tokens": _budget,
        },
        optional=_fields,
    ),
    "/v1/chat/completions": st.fixed_dictionaries(
        {"messages": st.one_of(st.lists(_message, max_size=3), _junk), "max_tokens": _budget}, optional=_fields
    ),
    "/tokenize": st.fixed_dictionaries(
        {},
        optional={"prompt": st.one_of(st.text(max_size=30), _junk), "messages": st.lists(_message, max_size=2)},
    ),
    "/detokenize": st.fixed_dictionaries({}, optional={"tokens": _junk, "model": _fields["model"]}),
}
_requests = st.sampled_from(sorted(_bodies)).flatmap(lambda route: st.tuples(st.just(route), _bodies[route]))


def _check_reply(resp: httpx.Response, route: str, body: dict) -> None:
    assert resp.status_code in (200, 400, 404), (route, body, resp.status_code, resp.text[:300])
    ctype = resp.headers["content-type"]
    if resp.status_code != 200:
        _assert_openai_error(resp, resp.status_code)
    elif ctype.startswith("text/event-stream"):
        events = [line.removeprefix("data: ") for line in resp.text.splitlines() if line.startswith("data: ")]
        assert events and events[-1] == "[DONE]", (route, body, resp.text[-300:])
        assert all("error" not in json.loads(e) for e in events[:-1]), (route, body, resp.text[-300:])
    else:
        assert ctype.startswith("application/json") and isinstance(resp.json(), dict)


def test_fuzzed_requests_always_get_an_openai_shaped_answer(serve_hf):
    """Drawn bodies (bounded: 60 examples, max_tokens <= 3): every reply is 200, or a 400/404 JSON error."""
    base = root(serve_hf)

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        database=None,
    )
    @example(("/v1/completions", {"prompt": "", "max_tokens": 2, "seed": 0}))  # an empty prompt: 400, not 500
    @given(_requests)
    def fuzz(request: tuple[str, dict]) -> None:
        route, body = request
        _check_reply(_post(base + route, body), route, body)

    fuzz()
    _still_serving(serve_hf)
    assert httpx.get(f"{base}/health", timeout=TIMEOUT).text == "ok"
