"""hf: out-of-memory recovery and GPU batching (issue 17).

Out of memory cannot be produced on demand on this CPU machine, so these tests inject it: a mock stands in for
`model.generate` and raises a real `torch.OutOfMemoryError` (the exception CUDA raises) under stated
conditions. The recovery path (free the cache, retry alone, retry with chunked prefill) and the failed state are
real; chunked prefill itself is checked for real (same text as a whole prefill) without a mock.
"""

from __future__ import annotations

import json

import pytest
import torch
from tiny_needle import tiny_needle  # tests/ is on sys.path

import longctx_eval.models.hf.adapter as hf_module
from longctx_eval.cli import main
from longctx_eval.models.hf.batching import PAD_MAX_TOKENS, pack, per_token_bytes
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request


def _doc(words: int, seed: int = 0) -> str:
    return " ".join(f"w{(i * 7 + seed) % 53} is here." for i in range(words))


@pytest.fixture
def tiny(tiny_llama_dir):
    return load_model(parse_spec(f"hf:{tiny_llama_dir}"))


class InjectOOM:
    """A mock of `model.generate`: raises torch.OutOfMemoryError while `when(call)` holds, else generates."""

    def __init__(self, model, when) -> None:
        self.real = model.generate
        self.when = when
        self.calls: list[dict] = []

    def __call__(self, **kwargs):
        call = {"batch": kwargs["input_ids"].shape[0], "width": kwargs["input_ids"].shape[1], **kwargs}
        self.calls.append(call)
        if self.when(call):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (injected by the test)")
        return self.real(**kwargs)


@pytest.fixture
def emptied(monkeypatch):
    """Counts torch.cuda.empty_cache calls (the cache must be freed before every retry)."""
    calls = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(1))
    return calls


def test_a_batch_that_runs_out_of_memory_is_retried_alone(tiny, emptied):
    reqs = [Request(f"b{i}", _doc(30 + 5 * i), "", "q", max_new_tokens=6) for i in range(3)]
    want = [p.text for p in tiny.generate(reqs)]
    tiny.batch_size = 3
    tiny.model.generate = mock = InjectOOM(tiny.model, lambda c: c["batch"] > 1)
    preds = tiny.generate(reqs)
    assert [p.text for p in preds] == want and all(p.status == "ok" for p in preds)
    assert [c["batch"] for c in mock.calls] == [3, 1, 1, 1] and emptied
    assert all(p.data["oom"] == {"retried": ["alone"], "recovered": True} for p in preds)


def test_alone_then_chunked_prefill_then_failed(tiny, emptied, monkeypatch):
    monkeypatch.setattr(hf_module, "PREFILL_CHUNK", 32)
    req = Request("long", _doc(60), "", "q", max_new_tokens=6)
    n = tiny.prompt_tokens(req)
    want = tiny.generate([req])[0].text
    # the whole prefill runs out of memory twice, the chunked one fits
    tiny.model.generate = mock = InjectOOM(tiny.model, lambda c: c.get("prefill_chunk_size") is None)
    pred = tiny.generate([req])[0]
    assert pred.status == "ok" and pred.text == want
    assert [c.get("prefill_chunk_size") for c in mock.calls] == [None, None, 32]
    assert pred.data["oom"]["retried"] == ["again after freeing the cache", "chunked prefill (32 tokens per step)"]
    assert len(emptied) == 2
    # nothing fits: failed, with the length it failed at; the next request still runs
    tiny.model.generate = mock.real
    tiny.model.generate = InjectOOM(tiny.model, lambda c: c["width"] == n)
    short = Request("short", "A short one.", "", "q", max_new_tokens=4)
    failed, fine = tiny.generate([req, short])
    assert failed.status == "error" and failed.error == f"out of memory at {n} tokens" and failed.text is None
    assert failed.prompt_tokens == n and len(failed.data["oom"]["retried"]) == 2
    assert fine.status == "ok"


def test_chunked_prefill_generates_the_whole_prefills_text(tiny):
    req = Request("c", _doc(80, seed=3), "", "q", max_new_tokens=10)
    whole = tiny._generate_batch([req])[0]
    chunked = tiny._generate_batch([req], prefill_chunk=16)[0]
    assert (chunked.text, chunked.completion_tokens) == (whole.text, whole.completion_tokens)


def test_an_out_of_memory_probe_request_fails_alone():
    from longctx_eval.models.references import REFERENCE_ROOT

    if not (REFERENCE_ROOT / "tiny-rope" / "model.safetensors").is_file():
        pytest.skip("reference weights not built")
    from test_hf_placement import _probe_requests

    adapter = load_model(parse_spec("tiny-rope"))
    reqs = _probe_requests(adapter)
    probe = adapter.probe

    def oom_one(request):  # the mock: the probe forward of this request runs out of memory, every time
        raise torch.OutOfMemoryError("CUDA out of memory (injected by the test)")

    probe._one, real_one = oom_one, probe._one
    preds = adapter.attention_stats(reqs)
    n = len(reqs[0].extra["input_ids"])
    assert preds[0].status == "error" and preds[0].error == f"out of memory at {n} tokens"
    probe._one = real_one
    assert adapter.attention_stats(reqs)[0].status == "ok"


def test_a_run_goes_on_past_out_of_memory_and_records_it(tmp_path, tiny_llama_dir, monkeypatch, emptied):
    """Through `longctx-eval run`: prompts over 330 tokens (the 256-token needles) run out of memory (mock) and are
    recorded failed with their length; the short ones are answered and scored; run.json is written."""
    from transformers import LlamaForCausalLM

    real = LlamaForCausalLM.generate

    def generate(self, *args, **kwargs):
        if kwargs["input_ids"].shape[1] > 330:
            raise torch.OutOfMemoryError("CUDA out of memory (injected by the test)")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LlamaForCausalLM, "generate", generate)
    args = ["run", "--model", f"hf:{tiny_llama_dir}", *tiny_needle("128,256"), "--limit", "2"]
    main([*args, "--out", str(tmp_path)])
    run_dir = tmp_path / tiny_llama_dir.name
    recs = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    failed = [r for r in recs if r["status"] == "error"]
    assert {r["target_tokens"] for r in failed} == {256} and len(failed) == 2
    assert all(r["error"] == f"out of memory at {r['prompt_tokens']} tokens" for r in failed)
    assert all(r["status"] == "ok" for r in recs if r["target_tokens"] == 128)
    assert (run_dir / "run.json").is_file() and emptied


# -- batching --------------------------------------------------------------------------------------------


def test_pack_groups_equal_lengths_at_long_prompts_and_keeps_the_budget():
    long = PAD_MAX_TOKENS + 100
    lengths = [long, 10, long, 12, long + 1, 11, long]
    budgets = [8] * len(lengths)
    groups = pack(lengths, budgets, max_tokens=3 * (long + 8))
    widths = [sorted({lengths[i] for i in g}) for g in groups]
    assert groups[0] == [1, 5, 3]  # short prompts of several lengths share a (padded) batch
    assert [long] in widths and [long + 1] in widths
    assert all(len(w) == 1 for g, w in zip(groups, widths, strict=True) if max(w) > PAD_MAX_TOKENS)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        assert len(g) * (max(lengths[i] for i in g) + 8) <= 3 * (long + 8) or len(g) == 1
    assert pack([5000], [32], max_tokens=100) == [[0]]  # over the budget alone: it still runs, alone
    assert [len(g) for g in pack([100] * 10, [28] * 10, max_tokens=512)] == [4, 4, 2]


def test_packed_generation_is_the_text_of_one_by_one_without_padding_at_long_lengths(tiny, monkeypatch):
    """batch_size=auto's CUDA path, forced here on the CPU: equal-length prompts share a batch, no padding."""
    monkeypatch.setattr("longctx_eval.models.hf.batching.PAD_MAX_TOKENS", 8)
    by_length: dict[int, list[Request]] = {}
    for seed in range(40):
        r = Request(f"p{seed}", _doc(20, seed=seed), "", "q", max_new_tokens=6)
        by_length.setdefault(tiny.prompt_tokens(r), []).append(r)
    same = max(by_length.values(), key=len)
    assert len(same) >= 4
    reqs = [*same[:4], Request("odd", _doc(25), "", "q", max_new_tokens=6)]
    single = [(p.text, p.completion_tokens) for p in tiny.generate(reqs)]
    tiny.packed, tiny.max_batch_tokens = True, 10_000
    tiny.model.generate = mock = InjectOOM(tiny.model, lambda c: False)
    got = [(p.text, p.completion_tokens) for p in tiny.generate(reqs)]
    assert got == single
    lengths = {tiny.prompt_tokens(r) for r in reqs[:4]}
    assert len(lengths) == 1  # the four share one length...
    assert sorted(c["batch"] for c in mock.calls) == [1, 4]  # ...and one batch; the odd one goes alone
    assert all(bool(c["attention_mask"].all()) for c in mock.calls)  # no padded position anywhere


def test_auto_budget_counts_kv_and_activations_per_token():
    from transformers import LlamaConfig

    llama3_8b = LlamaConfig(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8
    )
    assert per_token_bytes(llama3_8b, 2) == 2 * 32 * 8 * 128 * 2 + 2 * (4096 + 14336) * 2  # 128 KiB KV + 72 KiB


def test_throughput_splits_prefill_and_decode_and_gives_ttft(tmp_path, tiny_llama_dir):
    args = ["run", "--model", f"hf:{tiny_llama_dir}", *tiny_needle("128"), "--limit", "3"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    run_dir = tmp_path / tiny_llama_dir.name
    task = json.loads((run_dir / "run.json").read_text())["tasks"][0]
    tp = task["throughput"]
    assert tp["prefill_seconds"] > 0 and tp["decode_seconds"] > 0
    assert tp["prefill_seconds"] + tp["decode_seconds"] <= tp["seconds"] + 0.01
    recs = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    ttfts = sorted(r["data"]["timing"]["ttft_s"] for r in recs)
    assert tp["ttft_s"]["n"] == 3 and tp["ttft_s"]["p50"] == pytest.approx(ttfts[1], abs=1e-6)
    assert all(r["data"]["timing"]["ttft_s"] <= r["seconds"] + 1e-6 for r in recs)
