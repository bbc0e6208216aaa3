"""The hf: adapter on a real transformers Llama (random weights, tokenizer trained in the test)."""

from __future__ import annotations

import json

from transformers import AutoTokenizer

from longctx_eval.cli import main
from longctx_eval.models.spec import load_model
from longctx_eval.sample import Request


def test_adapter_records_metadata_and_measures_exact_prompt(tiny_llama_dir):
    model = load_model(f"hf:{tiny_llama_dir}?max_length=400")
    assert "generate" in model.capabilities
    info = model.info
    assert info.kind == "hf" and info.params and info.params > 10_000 and len(info.sha256) == 64
    assert info.context_window == 400 and info.dtype == "float32"
    req = Request("s1", "The quick brown fox jumps over the lazy dog. " * 5, "", "q", max_new_tokens=8)
    n = model.prompt_tokens(req)
    assert n == len(AutoTokenizer.from_pretrained(tiny_llama_dir)(req.prompt)["input_ids"])
    pred = model.generate([req])[0]
    assert pred.status == "ok" and pred.prompt_tokens == n
    assert pred.completion_tokens is not None and pred.completion_tokens <= 8
    assert isinstance(pred.text, str)


def test_over_long_prompts_are_reported_not_truncated(tmp_path, tiny_llama_dir, capsys):
    out = tmp_path / "r"
    args = ["run", "--model", f"hf:{tiny_llama_dir}", "--tasks", "needle", "--lengths", "256,1024", "--limit", "2"]
    assert main([*args, "--out", str(out)]) == 0
    run_dir = out / tiny_llama_dir.name
    preds = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    by_len = {n: [p for p in preds if p["target_tokens"] == n] for n in (256, 1024)}
    assert all(p["status"] == "ok" and 256 < p["prompt_tokens"] <= 512 for p in by_len[256])
    for p in by_len[1024]:
        assert p["status"] == "over_length" and p["text"] is None
        assert p["prompt_tokens"] > 1024  # the whole prompt was measured, nothing was cut
        assert "> context window 512" in p["error"]
    run = json.loads((run_dir / "run.json").read_text())
    task = run["tasks"][0]
    assert task["over_length"] == 2 and task["n_samples"] == 4
    rate = {
        r["length"]: r["value"] for r in task["results"] if r["metric"] == "over_length_rate" and r["depth"] is None
    }
    assert rate == {None: 0.5, 256: 0.0, 1024: 1.0}
    assert run["model"]["context_window"] == 512 and run["model"]["params"] > 0
