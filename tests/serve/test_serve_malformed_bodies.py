"""Malformed request bodies of any shape get a JSON 400 from `serve` and from `fault-proxy` in front of it, never a
500 or a crash (campaign causes 7 and 10: JSON nested 1,000 and 100,000 deep was a RecursionError, a 500 from the
server and a plain-text 500 with a traceback from the proxy). Real servers on loopback; a hypothesis fuzzer sends
raw bodies (cut, bit-flipped, nested, not UTF-8, NaN, 5,000-digit numbers, lone surrogates) to both."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st
from servers import SERVE_MODEL, root

ROUTES = ("/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize")
VALID = {
    "/v1/completions": {"model": SERVE_MODEL, "prompt": "One, two,", "max_tokens": 1},
    "/v1/chat/completions": {"model": SERVE_MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1},
    "/tokenize": {"model": SERVE_MODEL, "prompt": "One, two,"},
    "/detokenize": {"model": SERVE_MODEL, "tokens": [1, 2, 3]},
}
TIMEOUT = httpx.Timeout(60.0)


def _post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=TIMEOUT)


def _json_error(resp: httpx.Response, status: int = 400) -> str:
    """The error message of an OpenAI-shaped JSON error reply with `status`."""
    assert resp.status_code == status, resp.text[:300]
    assert resp.headers["content-type"].startswith("application/json"), resp.text[:300]
    error = resp.json()["error"]
    assert isinstance(error["message"], str) and error["message"] and error["type"] == "invalid_request_error"
    return error["message"]


def _nested(depth: int, opener: str = "[") -> str:
    closer = {"[": "]", '{"a":': "}"}[opener]
    return opener * depth + ("1" if opener != "[" else "") + closer * depth


@pytest.fixture
def proxy_url(serve_hf, fault_proxy):
    """A fault proxy in front of the session's `serve` that injects nothing (every request is `ok`)."""
    return fault_proxy(serve_hf, schedule="seq:ok")


@pytest.mark.parametrize("depth", [101, 1000, 100_000])
@pytest.mark.parametrize("where", ["body", "prompt"])
def test_deeply_nested_json_is_a_400_naming_the_depth_limit(serve_hf, depth, where):
    """Cause 7: was HTTP 500 `internal error: RecursionError`, retried by the suite's own client as a server fault."""
    nested = _nested(depth)
    body = nested if where == "body" else f'{{"model": "{SERVE_MODEL}", "prompt": {nested}, "max_tokens": 1}}'
    for route in ("/v1/completions", "/v1/chat/completions", "/tokenize"):
        message = _json_error(_post(root(serve_hf) + route, body.encode()))
        assert "more than 100 levels deep" in message and "expected a JSON object" in message
    # 100 levels is within the rule: the body parses and the field check answers instead
    body = f'{{"model": "{SERVE_MODEL}", "prompt": {_nested(99)}, "max_tokens": 1}}'
    assert "'prompt' must be a string" in _json_error(_post(serve_hf + "/completions", body.encode()))
    assert _post(serve_hf + "/completions", json.dumps(VALID["/v1/completions"]).encode()).status_code == 200


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"", "is empty"),
        (b"{not json", "not valid JSON"),
        (b'{"prompt": "\xff\xfe"}', "not valid UTF-8"),
        (b"[1, 2]", "got a JSON array"),
        (b'"text"', "got a JSON string"),
        (b"null", "got a JSON null"),
        (b'{"model": "smollm2-135m", "prompt": "x", "temperature": NaN}', "NaN is not a JSON value"),
        (b'{"model": "smollm2-135m", "prompt": "x", "max_tokens": -Infinity}', "-Infinity is not a JSON value"),
        (b'{"model": "smollm2-135m", "prompt": "x", "max_tokens": ' + b"7" * 5000 + b"}", "4300 digits"),
        (b'{"model": "smollm2-135m", "prompt": "a\\ud800b", "max_tokens": 1}', "'prompt' holds an unpaired"),
        (b'{"model": "smollm2-135m", "messages": [{"role": "user", "content": "\\udfff"}]}', "'messages' holds"),
    ],
)
def test_malformed_bodies_are_a_400_naming_what_was_expected(serve_hf, proxy_url, body, needle):
    """The same answer from `serve` and through the proxy, which passes a malformed body through unscheduled."""
    route = "/v1/chat/completions" if b"messages" in body else "/v1/completions"
    direct = _json_error(_post(root(serve_hf) + route, body))
    assert needle in direct and len(direct) < 400
    assert _json_error(_post(root(proxy_url) + route, body)) == direct
    stats = httpx.get(root(proxy_url) + "/fault-stats", timeout=TIMEOUT).json()
    assert stats["requests"] == 0 and stats["passed_through"] == 1


def test_proxy_answers_nested_json_as_the_server_does_and_logs_no_error(serve_hf, proxy_url, caplog):
    """Cause 10: the proxy's stream check raised RecursionError: plain-text 500 and a traceback in its log."""
    caplog.set_level(logging.WARNING)
    for body in (_nested(100_000), _nested(5000, '{"a":'), f'{{"model": "{SERVE_MODEL}", "prompt": {_nested(1000)}}}'):
        for route in ("/v1/completions", "/v1/chat/completions"):
            message = _json_error(_post(root(proxy_url) + route, body.encode()))
            assert "more than 100 levels deep" in message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[-2000:]
    ok = _post(proxy_url + "/completions", json.dumps(VALID["/v1/completions"]).encode())
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] >= 1
    stats = httpx.get(root(proxy_url) + "/fault-stats", timeout=TIMEOUT).json()
    assert stats["requests"] == 1 and stats["ok"] == 1 and stats["passed_through"] == 6


def test_a_body_over_64_mib_is_a_json_413_naming_the_limit(serve_hf, proxy_url):
    """aiohttp's own 413 page of the proxy was text/plain; both answer JSON."""
    for base in (root(serve_hf), root(proxy_url)):
        assert "64 MiB" in _json_error(_post(base + "/v1/completions", b" " * (64 * 1024 * 1024 + 1)), 413)


# ------------------------------------------------------------------------------------------------ the fuzzer


def _mutations(draw: st.DrawFn, raw: bytes) -> bytes:
    """`raw` cut short, with bytes flipped, or with a junk byte string spliced in."""
    kind = draw(st.sampled_from(["cut", "flip", "splice"]))
    at = draw(st.integers(0, len(raw)))
    if kind == "cut":
        return raw[:at]
    if kind == "flip":
        return raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    return raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:]


_FIELD_JUNK = st.sampled_from(
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "1" * 4301,
        '"\\ud800"',
        '"x\\udc00y"',
        '"\\ud83d"',
        "[" * 150 + "]" * 150,
        '{"a":' * 120 + "1" + "}" * 120,
        "[" * 20_000 + "]" * 20_000,
        "{",
        "'single quotes'",
        "tru",
        "0x10",
        "01",
        '"\\x41"',
    ]
)


@st.composite
def malformed_bodies(draw: st.DrawFn) -> tuple[str, bytes, bool]:
    """(route, body, always_malformed): bodies no client should send; `False` only for mutations of a valid body,
    which may still happen to be valid JSON."""
    route = draw(st.sampled_from(ROUTES))
    valid = VALID[route]
    kind = draw(st.sampled_from(["binary", "nested", "field", "mutation", "not-an-object", "encoding"]))
    if kind == "binary":
        raw = draw(st.binary(max_size=48))
        return route, raw, _malformed(route, raw)
    if kind == "nested":
        depth = draw(st.integers(101, 30_000))
        nested = _nested(depth, draw(st.sampled_from(["[", '{"a":'])))
        if draw(st.booleans()):
            return route, nested.encode(), True
        field = draw(st.sampled_from(sorted(valid)))
        return route, json.dumps({**valid, field: "__JUNK__"}).replace('"__JUNK__"', nested).encode(), True
    if kind == "field":
        field = draw(st.sampled_from([*sorted(valid), "stop", "temperature", "stream"]))
        junk = draw(_FIELD_JUNK)
        text = json.dumps({**valid, field: "__JUNK__"}).replace('"__JUNK__"', junk)
        return route, text.encode(), True
    if kind == "mutation":
        raw = _mutations(draw, json.dumps(valid).encode())
        return route, raw, _malformed(route, raw)
    if kind == "not-an-object":
        value = draw(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10), st.lists(st.integers())))
        return route, json.dumps(value).encode(), True
    encoding = draw(st.sampled_from(["utf-16", "utf-32", "latin-1+", "bom"]))
    text = json.dumps({**valid, "model": SERVE_MODEL + "é"}, ensure_ascii=False)
    if encoding == "bom":
        return route, b"\xef\xbb\xbf" + text.encode(), True
    if encoding == "latin-1+":
        return route, text.encode("latin-1"), True
    return route, text.encode(encoding), True


def _refuse_constant(name: str) -> None:
    raise ValueError(name)


def _json_object(raw: bytes) -> dict | None:
    """`raw` as strict UTF-8 JSON (no NaN, no lone surrogate) when it is an object nested at most 100 deep (tiny
    bodies only), else None: the server's rule, for bodies the fuzzer drew at random."""
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate cannot be encoded
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and raw.count(b"[") + raw.count(b"{") <= 100 else None


def _malformed(route: str, raw: bytes) -> bool:
    """Whether a randomly drawn body is malformed; a valid generation request must ask for at most 4 tokens (a
    flipped `max_tokens` key would generate up to the window: minutes on a CPU), else the example is dropped."""
    value = _json_object(raw)
    if value is None:
        return True
    if "completions" in route:
        budget = value.get("max_tokens")
        assume(isinstance(budget, int) and not isinstance(budget, bool) and 1 <= budget <= 4)
    return False


def _check(resp: httpx.Response, route: str, body: bytes, always_malformed: bool) -> None:
    what = (route, body[:200], resp.status_code, resp.text[:300])
    assert resp.status_code < 500, what
    if resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream"):
        assert not always_malformed, what
        return
    assert resp.headers["content-type"].startswith("application/json"), what
    reply = resp.json()
    if always_malformed:
        assert resp.status_code == 400 and reply["error"]["type"] == "invalid_request_error", what
    elif resp.status_code >= 400:
        assert isinstance(reply["error"]["message"], str), what


def test_fuzzed_malformed_bodies_get_a_json_400_from_serve_and_the_proxy(serve_hf, proxy_url, caplog):
    """Drawn raw bodies (bounded: 50 examples) on every POST route: never a 5xx, always JSON, a 400 when malformed;
    the proxy answers exactly what the server answers, and nothing is logged as an error."""
    caplog.set_level(logging.WARNING)
    server, proxy = root(serve_hf), root(proxy_url)

    @settings(
        max_examples=50,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        database=None,
    )
    @example(("/v1/completions", ("[" * 100_000 + "]" * 100_000).encode(), True))  # the campaign's bodies
    @example(("/v1/completions", ('{"prompt":' + "[" * 1000 + "]" * 1000 + "}").encode(), True))
    @given(malformed_bodies())
    def fuzz(case: tuple[str, bytes, bool]) -> None:
        route, body, always_malformed = case
        direct = _post(server + route, body)
        _check(direct, route, body, always_malformed)
        through = _post(proxy + route, body)
        _check(through, route, body, always_malformed)
        if direct.status_code != 200:  # a generated reply may differ in its id; an error is answered alike
            assert (through.status_code, through.json()) == (direct.status_code, direct.json())

    fuzz()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[-2000:]
    assert httpx.get(server + "/health", timeout=TIMEOUT).text == "ok"
