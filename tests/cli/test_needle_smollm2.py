"""SmolLM2 end to end on one 1K sample of every needle variant: prompts with answer prefixes render, the
answers are short and scored, and the scores file keeps the raw and parsed answers (opt-in: -m slow)."""

from __future__ import annotations

import json

import pytest

from longctx_eval.cli import main

TASKS = ("needle", "needle_multikey", "needle_multivalue", "needle_multiquery", "needle_lowlex")


@pytest.mark.slow
def test_smollm2_answers_every_variant(tmp_path):
    out = tmp_path / "out"
    argv = ["run", "--model", "smollm2-135m", "--tasks", ",".join(TASKS), "--lengths", "1024", "--limit", "1"]
    assert main([*argv, "--out", str(out)]) == 0
    run_dir = out / "smollm2-135m"
    preds = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert sorted({p["task"] for p in preds}) == sorted(TASKS)
    assert len(preds) == len(TASKS) - 1 + 4  # multiquery: four requests on one document
    for p in preds:
        assert p["status"] == "ok" and p["text"].strip(), p
        assert p["completion_tokens"] <= p["max_new_tokens"]  # the budget follows the answer's length
    run = json.loads((run_dir / "run.json").read_text())
    for task in run["tasks"]:
        pooled = {r["metric"]: r["value"] for r in task["results"] if r["length"] is None and r["depth"] is None}
        assert 0.0 <= pooled["score"] <= 1.0, task["name"]
    for name in TASKS:
        (line,) = (run_dir / "scores" / f"{name}.jsonl").read_text().splitlines()
        record = json.loads(line)
        assert "parsed" in record and "overlap_bucket" in record["metadata"]
