"""benchmarks/gpu_check.py's CPU half (what `make bench` runs) on tiny shapes: every step runs and reports.

Marked `bench` (run with `pytest -m bench`); the GPU half needs a CUDA machine (`python -m benchmarks.gpu_check`)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.bench


def test_cpu_half_runs_every_step(monkeypatch):
    from benchmarks import gpu_check

    monkeypatch.setattr(gpu_check, "CPU_LENGTHS", (64, 320, 384))
    monkeypatch.setattr(gpu_check, "CPU_LONGEST_CAP", 1024)
    result = gpu_check.run(cpu=True, budget_s=600)
    assert result["environment"]["mode"] == "cpu"
    llama = result["models"]["llama-tiny"]
    assert [r["status"] for r in llama["generation"]["sdpa"]["rows"]] == ["ok"] * 3
    assert llama["longest"]["longest_fitting"] == 768
    assert llama["batch_auto_vs_1"]["texts_equal"] == "16/16"
    assert llama["prefix_cache"]["reused"] == 1 and llama["prefix_cache"]["same_text"]
    oom = llama["oom_path"]
    assert oom["recovered"]["status"] == "ok" and oom["recovered"]["oom"]["recovered"]
    assert oom["failed"]["error"] == "out of memory at 320 tokens"
    assert all(v["within_tolerance"] for k, v in result["probe_cuda_vs_cpu"].items() if isinstance(v, dict))
    assert "| llama-tiny | sdpa | 64 | ok |" in gpu_check.table(result)
