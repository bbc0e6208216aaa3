"""`longctx-eval load`: the concurrency sweep against real loopback servers (our `serve` and llama.cpp's), its
budgets, the rate limits (counted at a proxy), the JSON and the plot. Budgets are tiny: 2 shared cores."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from servers import LLAMA_MODEL, SERVE_MODEL, http_json, root
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.errors import ConfigError
from longctx_eval.load_test.report import figure, table
from longctx_eval.load_test.sweep import SweepConfig, run_sweep
from longctx_eval.models.openai.client import ClientLimits, ServedClient, ServedRequest


def _pool(n: int, max_tokens: int = 2) -> list[ServedRequest]:
    return [
        ServedRequest(messages=({"role": "user", "content": f"Name the number {i}."},), max_tokens=max_tokens)
        for i in range(n)
    ]


def _sweep(url: str, model: str, pool, config: SweepConfig, **limits) -> list[dict]:
    client = ServedClient(url, model, limits=ClientLimits(max_in_flight=max(config.levels), **limits))

    async def go() -> list[dict]:
        try:
            return await run_sweep(client, pool, config)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_sweep_reports_each_level(serve_hf, fault_proxy):
    proxy = fault_proxy(serve_hf, schedule="seq:ok")
    levels = _sweep(proxy, SERVE_MODEL, _pool(6), SweepConfig(levels=(1, 2), max_requests=2, warmup=1))
    assert [lv["concurrency"] for lv in levels] == [1, 2]
    for lv in levels:
        assert lv["requests"] == lv["ok"] == 2 and lv["failed"] == 0 and lv["not_sent"] == 0
        assert lv["stopped_by"] == "max_requests" and lv["repeated_prompts"] == 0
        assert lv["output_tokens"] == 4 and lv["prompt_tokens"] > 0  # the server's usage, 2 tokens each
        assert lv["output_tokens_per_s"] > 0 and lv["total_tokens_per_s"] > lv["output_tokens_per_s"]
        assert 0 < lv["ttft_s"]["p50"] <= lv["ttft_s"]["p95"] <= lv["ttft_s"]["p99"] <= lv["e2e_s"]["p99"]
        assert lv["wall_s"] >= lv["e2e_s"]["p99"]
    stats = http_json(root(proxy) + "/fault-stats")[1]
    assert stats["requests"] == 1 + 2 + 2  # warm-up + both levels, nothing more
    text = table(levels)
    assert "TTFT p50/p95/p99 ms" in text and len(text.splitlines()) == 3
    record = {"model": SERVE_MODEL, "base_url": proxy, "prompts": {"description": "test"}, "levels": levels}
    fig = figure(record)
    assert [ax.get_ylabel() for ax in fig.axes] == ["output tokens/s", "prompt + output tokens/s", "seconds"]


def test_rpm_is_never_exceeded(serve_hf, fault_proxy):
    """rpm=2 with 4 in flight and a budget of 6: the proxy sees exactly 2 requests; the rest wait past the
    level's deadline and are not sent (the whole test takes far less than the 60 s window)."""
    proxy = fault_proxy(serve_hf, schedule="seq:ok")
    t0 = time.monotonic()
    levels = _sweep(
        proxy, SERVE_MODEL, _pool(8, 1), SweepConfig(levels=(4, 2), max_requests=6, duration_s=2.0, warmup=0), rpm=2
    )
    elapsed = time.monotonic() - t0
    assert elapsed < 60
    stats = http_json(root(proxy) + "/fault-stats")[1]
    assert stats["requests"] == 2
    first, second = levels
    assert first["requests"] == 2 and first["not_sent"] >= 1 and first["stopped_by"] == "duration"
    assert second["requests"] == 0 and second["not_sent"] >= 1 and second["stopped_by"] == "duration"


def test_sweep_on_llama_cpp(llama_cpp_server):
    levels = _sweep(llama_cpp_server, LLAMA_MODEL, _pool(2), SweepConfig(levels=(1, 2), max_requests=1, warmup=0))
    assert [lv["ok"] for lv in levels] == [1, 1]
    # llama-cpp-python's streamed replies carry no usage: output tokens are the streamed chunks, and prompt tokens
    # come from the measured lengths (none in this hand-made pool)
    assert all(lv["output_tokens"] == 2 and lv["ttft_s"] is not None for lv in levels)
    assert all((lv["prompt_tokens"] > 0) == (lv["usage_missing"] == 0) for lv in levels)


def test_sweep_config_is_checked():
    for bad in (dict(levels=()), dict(levels=(0,)), dict(max_requests=0), dict(duration_s=0.0), dict(warmup=-1)):
        with pytest.raises(ConfigError):
            SweepConfig(**bad)
    assert SweepConfig().requests_at(1) == 8 and SweepConfig().requests_at(32) == 128
    assert SweepConfig(max_requests=3).requests_at(128) == 3


def test_load_json_is_read_by_dry_run_throughput(tmp_path):
    from longctx_eval.load_test.report import KIND, write_json
    from longctx_eval.run.dry_run import measured_throughput

    path = tmp_path / "load.json"
    write_json({"kind": KIND, "levels": [{"concurrency": 1, "total_tokens_per_s": 100.0},
                                         {"concurrency": 8, "total_tokens_per_s": 500.0}]}, path)  # fmt: skip
    model = measured_throughput(path)
    assert model.prompt_tps == model.output_tps == 500.0 and "concurrency 8" in model.source
    assert json.loads(path.read_text())["kind"] == KIND


def test_load_command_writes_json_and_plot(serve_hf, fault_proxy, tmp_path, capsys):
    from longctx_eval.cli import main

    proxy = fault_proxy(serve_hf, schedule="seq:ok")
    out = tmp_path / "load" / "served.json"
    spec = f"openai:{SERVE_MODEL}@{proxy}?tokenizer=smollm2-135m&name=served"
    args = ["load", "--model", spec, "--tasks", "needle", "--lengths", "512", "--limit", "3", "--warmup", "0"]
    args += ["--task-arg", "needle.source=synthetic", "--concurrency", "1,2", "--max-requests", "1", "--out", str(out)]
    assert main(args) == 0
    record = json.loads(out.read_text())
    assert record["kind"] == "load_test" and record["served_model"] == SERVE_MODEL and record["model"] == "served"
    assert record["prompts"]["n"] == 2 and record["prompts"]["tasks"] == ["needle"]  # one per request sent
    assert record["prompts"]["cache"] == "cold" and record["prompts"]["suite_prompts"] == 3
    # needle v5: 512 is the whole prompt budget (a 320-token context, the question, template and answer budget)
    assert 512 - 192 < record["prompts"]["prompt_tokens"]["mean"] <= 512
    assert [lv["concurrency"] for lv in record["levels"]] == [1, 2]
    assert [lv["ok"] for lv in record["levels"]] == [1, 1] and all(
        lv["repeated_prompts"] == 0 for lv in record["levels"]
    )
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr()
    assert "in flight" in printed.out and "TTFT p50/p95/p99 ms (n)" in printed.out
    assert "prefix-cache hits unknown" in printed.err  # serve has no /metrics: unknown, never 0
    assert all(lv["prefix_cache"] is None for lv in record["levels"])
    assert http_json(root(proxy) + "/fault-stats")[1]["requests"] == 2
    assert main(["load", "--model", "smollm2-135m"]) == 2
    assert "load measures a served model" in capsys.readouterr().err


def test_cache_scenarios_distinct_suite_and_hit(serve_hf, tmp_path, capsys):
    """cold: every request its own prompt, distinct from its first line; suite: the run's prompts, refused when
    the sweep needs more; hit: the same prompt after a prewarm, every request counted as reused."""
    from longctx_eval.cli import main
    from longctx_eval.discovery import discover, select
    from longctx_eval.load_test.prompts import LEAD, build_pool
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.run.config import TaskPlan

    spec = f"openai:{SERVE_MODEL}@{serve_hf}?tokenizer=smollm2-135m"
    info = select(discover(()), ("needle",))[0]
    plans = [TaskPlan(info, [256], 2, info.check_args({"source": "synthetic", "reserve": 0}, "--task-arg"))]
    adapter = load_model(parse_spec(spec))
    try:
        cold = build_pool(adapter, plans, 0, "cold", needed=5)
        suite = build_pool(adapter, plans, 0, "suite", needed=2)
        with pytest.raises(ConfigError, match="sends up to 5 requests but the tasks give 2 prompts"):
            build_pool(adapter, plans, 0, "suite", needed=5)
        hit = build_pool(adapter, plans, 0, "hit", needed=5, hit_prompts=1)
    finally:
        adapter.close()
    firsts = [r.messages[0]["content"] for r in cold.requests]
    assert len(firsts) == 5 and len({f[:40] for f in firsts}) == 5  # distinct from the first characters on
    assert [f.startswith(LEAD.format(n=i + 1)) for i, f in enumerate(firsts)] == [True] * 5
    assert cold.prompt_tokens[0] > suite.prompt_tokens[0]  # measured with the lead line it is sent with
    assert len(suite.requests) == 2 and not suite.requests[0].messages[0]["content"].startswith("Load-test")
    assert len(hit.requests) == 1

    out = tmp_path / "hit.json"
    args = ["load", "--model", spec, *tiny_needle("256"), "--limit", "2", "--warmup", "0"]
    args += ["--task-arg", "needle.source=synthetic", "--concurrency", "1", "--max-requests", "2"]
    assert main([*args, "--cache", "hit", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    (level,) = record["levels"]
    assert record["config"]["cache"] == "hit" and record["config"]["hit_prompts"] == 1
    assert level["ok"] == 2 and level["repeated_prompts"] == 2 and level["prefix_cache"] is None
    assert main([*args, "--cache", "suite", "--max-requests", "3", "--out", str(out)]) == 2
    assert "--cache suite: the sweep sends up to 3 requests" in capsys.readouterr().err


def test_prefix_cache_counters_are_parsed_from_prometheus_text():
    """No vLLM runs in the default suite (nothing here serves these counters), so this reads text in the form
    vLLM 0.32's /metrics served here (its counter names and labels, written out by hand; the real page was read
    by hand too, docs/served.md): the KV connector's external_prefix_cache counters are not the server's cache."""
    from longctx_eval.load_test.server_metrics import level_hit_rate, parse_prefix_cache

    def page(queries: float, hits: float) -> str:
        return (
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.\n"
            "# TYPE vllm:prefix_cache_queries_total counter\n"
            f'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}\n'
            f'vllm:prefix_cache_queries_created{{engine="0",model_name="m"}} 1.7e9\n'
            "# TYPE vllm:prefix_cache_hits_total counter\n"
            f'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}\n'
            f'vllm:external_prefix_cache_queries_total{{engine="0",model_name="m"}} 500.0\n'
            f'vllm:external_prefix_cache_hits_total{{engine="0",model_name="m"}} 500.0\n'
            'vllm:num_requests_running{engine="0",model_name="m"} 0.0\n'
        )

    before, after = parse_prefix_cache(page(1000.0, 100.0)), parse_prefix_cache(page(3000.0, 1100.0))
    assert before == {"queries": 1000.0, "hits": 100.0, "metrics": ["vllm:prefix_cache_hits_total",
                                                                     "vllm:prefix_cache_queries_total"]}  # fmt: skip
    assert level_hit_rate(before, after)["hit_rate"] == 0.5  # 1000 of the 2000 tokens queried in the level
    assert parse_prefix_cache("# nothing\nprocess_cpu_seconds_total 1.0\n") is None
    assert level_hit_rate(None, after) is None
