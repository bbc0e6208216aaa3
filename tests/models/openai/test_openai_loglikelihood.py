"""`loglikelihood` through a served model: `longctx-eval serve` (SmolLM2, loopback) answers `/v1/completions` with
`echo: true, logprobs: N` with the prompt's log-probabilities, reusing the previous prompt's cache for a shared
document; the `openai:` adapter scores choices from them equal to `hf:` to 1e-4; a server that cannot echo them
(llama.cpp started without logits_all) makes the adapter refuse the capability with that reason."""

from __future__ import annotations

from dataclasses import replace

import pytest
from servers import LLAMA_MODEL, SERVE_MODEL, http_json, llama_cpp_available, llama_cpp_server_at

from longctx_eval.capability import Capability
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request

DOC = (
    "Mary gave the gardener a key at the gate. Tom watched her from the orchard wall and said nothing. "
    "The archive kept ledgers of grain, wool and salt for every harbour town along the northern coast. " * 6
)
CHOICES = (" Mary", " the gardener", " Tom")


def _ask(question: str, part: int) -> Request:
    return Request(
        "s", f"{DOC}\n\nQuestion: {question}", DOC, question, part=part, answer_prefix="Answer:", choices=CHOICES
    )


@pytest.fixture(scope="module")
def smollm2():
    model = load_model(parse_spec("smollm2-135m"))
    yield model
    model.close()


def _echo(url: str, prompt, **extra) -> tuple[int, dict]:
    body = {"model": SERVE_MODEL, "prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 0, **extra}
    return http_json(f"{url}/completions", body)


def test_serve_echoes_prompt_logprobs_and_reuses_the_document(serve_hf, smollm2):
    ids = smollm2.render(_ask("Who gave the key?", 0))
    status, reply = _echo(serve_hf, ids)
    assert status == 200, reply
    lp = reply["choices"][0]["logprobs"]
    assert lp["token_logprobs"][0] is None and len(lp["token_logprobs"]) == len(ids) == reply["usage"]["prompt_tokens"]
    assert len(lp["tokens"]) == len(lp["text_offset"]) == len(lp["top_logprobs"]) == len(ids)
    assert reply["usage"]["completion_tokens"] == 0 and reply["choices"][0]["text"] == "".join(lp["tokens"])
    assert all(v <= 0 for v in lp["token_logprobs"][1:])
    # the same document with another question: its shared prefix is not prefilled again, the values are the same
    other = smollm2.render(_ask("Who watched?", 1))
    status, again = _echo(serve_hf, other, max_tokens=1)
    assert status == 200, again
    assert again["cached_tokens"] > 200 and again["usage"]["completion_tokens"] == 1
    shared = again["cached_tokens"]
    a, b = lp["token_logprobs"][1:shared], again["choices"][0]["logprobs"]["token_logprobs"][1:shared]
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"echo": False, "logprobs": 2}, "logprobs"),  # the reply's log-probabilities are not served
        ({"logprobs": None}, "echo"),  # echo without logprobs
        ({"max_tokens": 2}, "max_tokens"),  # an echo request generates at most one token
        ({"stream": True}, "stream"),
        ({"max_tokens": 1, "temperature": 0.7}, "temperature"),
    ],
)
def test_serve_refuses_echo_requests_it_cannot_answer_exactly(serve_hf, extra, field):
    status, reply = _echo(serve_hf, "Hello there", **extra)
    assert status == 400 and reply["error"]["param"] == field, reply


def test_openai_adapter_scores_choices_as_hf_does(serve_hf, smollm2):
    served = load_model(parse_spec(f"openai:{SERVE_MODEL}@{serve_hf}?endpoint=completions"))
    try:
        assert served.unsupported(Capability.LOGLIKELIHOOD) is None
        asks = [_ask("Who gave the key?", 0), _ask("Who watched?", 1)]
        got = served.serve(Capability.LOGLIKELIHOOD, asks)
        want = smollm2.loglikelihood(asks)
        for g, w in zip(got, want, strict=True):
            assert g.status == "ok", g.error
            assert g.prompt_tokens == w.prompt_tokens and g.data["choice_tokens"] == w.data["choice_tokens"]
            assert max(abs(x - y) for x, y in zip(g.data["logprobs"], w.data["logprobs"], strict=True)) < 1e-4
            assert g.data["greedy"] == w.data["greedy"]
            assert g.data["length_check"]["mismatch"] is False
        # the window counts the prompt, the longest choice and the one token an echo request generates
        n = served.prompt_tokens(asks[0])
        assert served.choice_tokens(asks[0]) == max(want[0].data["choice_tokens"])
        assert served.fits(asks[0], n)
    finally:
        served.close()


def test_text_mode_finds_the_choice_by_its_offsets(serve_hf, smollm2):
    """Without the model's tokenizer here, prompt + choice go as text and the choice is read by `text_offset`."""
    served = load_model(parse_spec(f"openai:{SERVE_MODEL}@{serve_hf}?endpoint=completions"))
    try:
        served.renderer.loaded = replace(served.renderer.loaded, exact=False)
        ask = _ask("Who gave the key?", 0)
        got, want = served.loglikelihood([ask])[0], smollm2.loglikelihood([ask])[0]
        assert got.status == "ok", got.error
        assert got.data["choice_tokens"] == want.data["choice_tokens"]
        assert max(abs(x - y) for x, y in zip(got.data["logprobs"], want.data["logprobs"], strict=True)) < 1e-4
    finally:
        served.close()


def test_llama_cpp_without_logits_all_is_refused_with_its_reason(llama_cpp_server):
    served = load_model(parse_spec(f"openai:{LLAMA_MODEL}@{llama_cpp_server}?endpoint=completions"))
    try:
        reason = served.unsupported(Capability.LOGLIKELIHOOD)
        assert reason is not None and llama_cpp_server in reason and "cannot score choices" in reason, reason
        assert "logits_all=False" in reason  # the server's own words
    finally:
        served.close()


@pytest.mark.slow
@pytest.mark.skipif(not llama_cpp_available(), reason="llama-cpp-python[server] is not installed (make test)")
def test_llama_cpp_with_logits_all_echoes_misaligned_logprobs_and_is_refused(tmp_path):
    """llama-cpp-python 0.3 with logits_all answers echo requests, but each prompt token's log-probability is taken
    under the next position's distribution: the greedy next token, sent back, does not score as the most likely."""
    with llama_cpp_server_at(tmp_path, n_ctx=2048, logits_all=True) as url:
        status, reply = http_json(
            f"{url}/completions",
            {"model": LLAMA_MODEL, "prompt": "The cat sat on the mat", "echo": True, "logprobs": 1, "max_tokens": 1},
        )
        assert status == 200 and reply["choices"][0]["logprobs"]["token_logprobs"][1] is not None
        served = load_model(parse_spec(f"openai:{LLAMA_MODEL}@{url}?endpoint=completions"))
        try:
            reason = served.unsupported(Capability.LOGLIKELIHOOD)
            assert reason is not None and "not those of the prompt's tokens" in reason, reason
        finally:
            served.close()
