"""The `openai:<model>@<base_url>` adapter against real servers on loopback (tests/servers.py): the needle task
through our own `serve` scores exactly as the in-process `hf` run of the same model (chat and completions
endpoints), llama.cpp's server on the GGUF runs it end to end, server-side counting matches local counting;
plus the spec grammar, reasoning stripping and latency summaries on real values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from servers import LLAMA_CTX, LLAMA_MODEL, SERVE_MODEL
from tiny_needle import tiny_needle

from longctx_eval.cli import main
from longctx_eval.errors import ConfigError
from longctx_eval.models.openai.client import ServedResult
from longctx_eval.models.openai.reasoning import split_reasoning, strip_echoed_prefix
from longctx_eval.models.openai.target import known_window, parse_target
from longctx_eval.models.spec import parse_spec
from longctx_eval.results import read_run
from longctx_eval.scoring.latency import busy_seconds, latency_summary, percentiles

LENGTH = "256"
LIMIT = "2"


def run_needle(out: Path, spec: str, limit: str = LIMIT) -> Path:
    """`longctx-eval run` of the needle task at LENGTH tokens of context (reserve 0); the run folder."""
    argv = ["run", "--model", spec, *tiny_needle(LENGTH), "--limit", limit, "--out", str(out)]
    assert main(argv) == 0
    return out / parse_spec(spec).name


def scores(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "scores" / "needle.jsonl").read_text().splitlines()]


def predictions(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def metric_rows(run_dir: Path) -> list[tuple]:
    task = read_run(run_dir / "run.json").tasks[0]
    return [(r.metric, r.length, r.depth, r.value, r.n, r.ci95) for r in task.results]


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The in-process `hf:smollm2-135m` run the served runs are compared with."""
    return run_needle(tmp_path_factory.mktemp("hf"), "smollm2-135m")


# --- against our own `longctx-eval serve hf:smollm2-135m` ------------------------------------------------


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_needle_through_serve_matches_in_process_hf(serve_hf: str, hf_run: Path, tmp_path: Path, endpoint: str):
    spec = f"openai:{SERVE_MODEL}@{serve_hf}?tokenizer=smollm2-135m&endpoint={endpoint}&name=served-{endpoint}"
    served = run_needle(tmp_path, spec)
    want, got = scores(hf_run), scores(served)
    assert [s["id"] for s in got] == [s["id"] for s in want]
    assert [s["answer"] for s in got] == [s["answer"] for s in want]  # same greedy tokens, same text
    assert [s["scores"] for s in got] == [s["scores"] for s in want]
    assert metric_rows(served) == metric_rows(hf_run)
    for pred in predictions(served):
        assert pred["status"] == "ok"
        check = pred["data"]["length_check"]  # the server saw exactly the tokens measured here
        assert check["source"] == "usage" and check["delta"] == 0 and check["mismatch"] is False
        stats = pred["data"]["serving"]
        assert stats["attempts"] == 1 and stats["ttft_s"] > 0 and stats["e2e_s"] >= stats["ttft_s"]
    serving = read_run(served / "run.json").tasks[0].serving
    assert serving is not None and serving.ok == serving.requests == int(LIMIT) and serving.failed == 0
    assert serving.length_checked == int(LIMIT) and serving.length_mismatches == 0
    assert serving.ttft_s.p95 <= serving.e2e_s.p99 and serving.throughput.output_tokens_per_s > 0
    assert read_run(hf_run / "run.json").tasks[0].serving is None  # in-process runs have no serving section
    print(f"serve/{endpoint}: ttft p50 {serving.ttft_s.p50:.3f}s e2e p50 {serving.e2e_s.p50:.3f}s "
          f"itl p50 {serving.itl_s.p50:.4f}s output {serving.throughput.output_tokens_per_s:.1f} tok/s")  # fmt: skip


def test_server_side_counting_matches_local(serve_hf: str):
    from longctx_eval.models.loader import load_model
    from longctx_eval.sample import Request

    local = load_model(parse_spec(f"openai:{SERVE_MODEL}@{serve_hf}?tokenizer=smollm2-135m"))
    server = load_model(parse_spec(f"openai:{SERVE_MODEL}@{serve_hf}?tokenizer=smollm2-135m&count=server"))
    try:
        assert local.count_mode == "local" and server.count_mode == "server"
        assert local.meta.context_window == server.meta.context_window == 8192  # vLLM's max_model_len
        for req in (
            Request("a", "What is the capital of France? Answer in one word.", "", ""),
            Request("b", "Read this.\n\nThe magic number is 42.\n\nWhat is it?", "", "", answer_prefix="It is"),
        ):
            assert server.prompt_tokens(req) == local.prompt_tokens(req)
    finally:
        local.close()
        server.close()


# --- against llama.cpp's server on the GGUF (other numerics: numbers reported, not compared) ---------------


def test_needle_through_llama_cpp(llama_cpp_server: str, hf_run: Path, tmp_path: Path):
    spec = (
        f"openai:{LLAMA_MODEL}@{llama_cpp_server}?tokenizer=smollm2-135m&endpoint=completions"
        f"&max_length={LLAMA_CTX}&name=llama-cpp"
    )
    served = run_needle(tmp_path, spec)
    got = scores(served)
    assert [s["id"] for s in got] == [s["id"] for s in scores(hf_run)]
    assert all(s["status"] == "ok" for s in got)
    for pred in predictions(served):
        check = pred["data"]["length_check"]  # llama.cpp streams no usage: its /extras/tokenize counts
        assert check["source"] == "tokenize" and check["mismatch"] is False, check
        assert pred["data"]["serving"]["prompt_tokens"] == check["server_prompt_tokens"]
        assert pred["data"]["serving"]["usage_reported"] is False
    run = read_run(served / "run.json").tasks[0]
    assert run.serving is not None and run.serving.failed == 0 and run.serving.length_checked == int(LIMIT)
    assert run.serving.throughput.total_tokens_per_s > run.serving.throughput.output_tokens_per_s
    pooled = {r.metric: r.value for r in run.results if r.length is None and r.depth is None}
    hf_pooled = {r.metric: r.value for r in read_run(hf_run / "run.json").tasks[0].results if r.length is None}
    print(f"llama.cpp: score {pooled['score']:.3f} (hf {hf_pooled['score']:.3f}), "
          f"ttft p50 {run.serving.ttft_s.p50:.3f}s e2e p50 {run.serving.e2e_s.p50:.3f}s "
          f"output {run.serving.throughput.output_tokens_per_s:.1f} tok/s")  # fmt: skip


# --- the spec, reasoning and latency figures (no server) ---------------------------------------------------


def test_spec_target_options_and_names():
    spec = parse_spec("openai:Qwen/Qwen3-8B@http://gpu7:8000/v1?max_in_flight=32&rpm=600&thinking_tokens=512")
    assert (spec.kind, spec.name) == ("openai", "Qwen3-8B")
    target = parse_target(spec.target, spec.raw)
    assert (target.model, target.base_url, target.hosted) == ("Qwen/Qwen3-8B", "http://gpu7:8000/v1", False)
    assert parse_target("gpt-4o@https://api.openai.com/v1", "x").hosted
    assert parse_target("org/m@v2@http://h:1/v1/", "x").model == "org/m@v2"
    assert known_window("gpt-4o-2024-08-06") == 128_000 and known_window("gpt-4.1-mini") == 1_047_576
    assert known_window("smollm2-135m") is None
    for bad, words in [
        ("openai:gpt-4o", "lacks '@<base_url>'"),
        ("openai:@http://h/v1", "no model name"),
        ("openai:m@http://user:pw@h/v1", "environment variable"),
        ("openai:m@http://h/v1?endpoint=embeddings", "chat or completions"),
        ("openai:m@http://h/v1?max_in_flight=0", "positive integer"),
        ("openai:m@http://h/v1?api_key_env=1abc", "NAME of an environment variable"),
    ]:
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
            parse_spec(bad)


def test_reasoning_is_split_from_the_answer():
    assert split_reasoning("<think>add 2 and 2</think>\n\n4") == split_reasoning("add 2 and 2</think>4")
    reply = split_reasoning("<think>add 2 and 2</think>\n\n4")
    assert (reply.answer, reply.reasoning, reply.truncated) == ("4", "add 2 and 2", False)
    cut = split_reasoning("<think>still thinking when the budget ran out")
    assert (cut.answer, cut.truncated) == ("", True)
    separate = split_reasoning("4", reasoning="add 2 and 2")  # vLLM's reasoning_content field
    assert (separate.answer, separate.reasoning) == ("4", "add 2 and 2")
    assert split_reasoning("plain answer") == split_reasoning("plain answer", None)
    assert strip_echoed_prefix("The special  magic number is 42.", "The special magic number is") == " 42."
    assert strip_echoed_prefix("42", "The special magic number is") == "42"


def test_latency_summary_percentiles_and_wall_time():
    results = [
        ServedResult(
            id=str(i),
            usage={"prompt_tokens": 100, "completion_tokens": 11},
            ttft_s=0.1 * (i + 1),
            itl_s=[0.01] * 10,
            e2e_s=0.1 * (i + 1) + 0.1,
            started=1000.0 + i,
            finished=1000.0 + i + 0.1 * (i + 1) + 0.1,
            chunks=11,
            attempts=1 + (i == 0),
            retries_by_reason={"429": 1} if i == 0 else {},
        )
        for i in range(4)
    ]
    failed = ServedResult(id="x", attempts=3, retries_by_reason={"5xx": 2}, error="5xx after 3", error_kind="5xx")
    summary = latency_summary([*results, failed])
    assert (summary["requests"], summary["ok"], summary["failed"]) == (5, 4, 1)
    assert summary["retries_by_reason"] == {"429": 1, "5xx": 2} and summary["failure_kinds"] == {"5xx": 1}
    assert summary["ttft_s"] == percentiles([0.1, 0.2, 0.3, 0.4]) and summary["ttft_s"]["p50"] == 0.25
    assert summary["itl_s"]["n"] == 40 and summary["tpot_s"]["p50"] == pytest.approx(0.01)
    assert summary["wall_s"] == pytest.approx(0.2 + 0.3 + 0.4 + 0.5)  # disjoint intervals
    assert summary["throughput"]["output_tokens_per_s"] == pytest.approx(44 / 1.4)
    assert busy_seconds([(1.0, 3.0), (2.0, 4.0), (10.0, 11.0)]) == 4.0
    assert percentiles([]) is None
