"""benchmarks/gpu_check.py's CPU half (what `make bench` runs) on tiny shapes: every step runs and reports.

Marked `bench` (run with `pytest -m bench`); the GPU half needs a CUDA machine (`python -m benchmarks.gpu_check`)."""

from __future__ import annotations

import ast
import json
import os
import signal
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
ALLOWED = {"torch", "transformers", "numpy", "safetensors", "tokenizers", "benchmarks", "longctx_eval", "data_builders"}
"""What the script may import besides the standard library: the scientific packages and the repository."""


@pytest.fixture(scope="module")
def cpu_half(tmp_path_factory):
    """One CPU half on short lengths, written to a file, shared by the tests that read it."""
    from benchmarks import gpu_check

    out = tmp_path_factory.mktemp("half") / "gpu_check.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpu_check, "CPU_LENGTHS", (64, 320, 384))
        mp.setattr(gpu_check, "CPU_LONGEST_CAP", 1024)
        result = gpu_check.run(cpu=True, budget_s=600, out=out)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result, default=str))
    return result


def test_cpu_half_runs_every_step(cpu_half):
    from benchmarks import gpu_check

    result = cpu_half
    assert result["complete"] and result["environment"]["mode"] == "cpu"
    llama = result["models"]["llama-tiny"]
    assert [r["status"] for r in llama["generation"]["sdpa"]["rows"]] == ["ok"] * 3
    assert llama["longest"]["longest_fitting"] == 768
    assert llama["batch_auto_vs_1"]["texts_equal"] == "16/16"
    assert llama["prefix_cache"]["reused"] == 1 and llama["prefix_cache"]["same_text"]
    oom = llama["oom_path"]
    assert oom["recovered"]["status"] == "ok" and oom["recovered"]["oom"]["recovered"]
    assert oom["failed"]["error"] == "out of memory at 320 tokens"
    assert all(v["within_tolerance"] for k, v in result["probe_cuda_vs_cpu"].items() if isinstance(v, dict))
    assert result["minilm_cuda_vs_cpu"]["texts"] == 512 and result["minilm_cuda_vs_cpu"]["cpu_s"] > 0
    assert "| llama-tiny | cpu | float32 | sdpa | 64 | ok |" in gpu_check.table(result)


def test_gemma3_rows_and_estimates(cpu_half):
    """The Gemma 3 shape runs beside the others; each row records device, dtype and kernel, and the estimate
    `--dry-run` makes for the folder (hand-computed here), the measurement marked not available."""
    from benchmarks import gpu_check

    result = cpu_half
    assert list(result["models"]) == ["llama-tiny", "gemma3-tiny", "qwen2-tiny"]
    gemma = result["models"]["gemma3-tiny"]
    run = gemma["generation"]["sdpa"]
    assert run["runtime"] == {"device": "cpu", "device_name": "cpu", "dtype": "float32", "attn_implementation": "sdpa"}
    assert [r["status"] for r in run["rows"]] == ["ok"] * 3
    estimate = gemma["estimate"]
    assert estimate["parameters"] == estimate["parameters_built"] == gemma["parameters"]
    assert estimate["dtype"] == "float32" and estimate["held_bytes"] == 0
    # 2 (K, V) x 6 layers x 2 KV heads x head_dim 16 x 4 bytes; 5 of the 6 layers hold at most 128 tokens
    assert estimate["kv_bytes_per_token"] == 2 * 6 * 2 * 16 * 4
    memory = run["rows"][2]["memory"]  # 384 prompt + 32 new tokens: 1 full layer x 416 + 5 sliding x 128
    assert memory["kv_bytes"] == (416 + 5 * 128) * 2 * 2 * 16 * 4
    assert memory["weights_bytes"] == gemma["parameters"] * 4
    assert memory["estimate_bytes"] == memory["weights_bytes"] + memory["kv_bytes"]
    assert memory["measured"] == "not available: no CUDA device (the CPU half)" and "measured_bytes" not in memory
    llama_kv = result["models"]["llama-tiny"]["generation"]["sdpa"]["rows"][0]["memory"]["kv_bytes"]
    assert llama_kv == (64 + 32) * 2 * 2 * 2 * 16 * 4  # no sliding layers: every token in both layers
    text = gpu_check.table(result)
    assert "| gemma3-tiny | cpu | float32 | sdpa | 384 | ok |" in text
    assert (
        f"| {round(memory['estimate_bytes'] / 2**20, 1)} |"
        in text.split("| gemma3-tiny | cpu | float32 | sdpa | 384")[1]
    )


def test_references_answer_on_the_cpu(cpu_half):
    """The trained references' greedy answers are recorded; at their training length they equal the passkey."""
    from benchmarks import gpu_check

    refs = cpu_half["references_cuda_vs_cpu"]
    assert refs["devices"] == ["cpu"] and refs["cuda_equal_cpu"].startswith("not measured: no CUDA")
    kernels = {"tiny-rope": "sdpa", "tiny-alibi": "longctx_rows", "tiny-learned": "sdpa"}
    for name, kernel in kernels.items():
        cpu = refs[name]["cpu"]
        assert cpu["runtime"]["attn_implementation"] == kernel and cpu["runtime"]["dtype"] == "float32"
        assert [len(cpu["answers"][n]) for n in ("128", "512")] == [8, 8]
        assert cpu["passkey_equal"]["128"] == "8/8"  # reference.json: passkey accuracy 1.0 at 1x
        assert refs[name]["committed"]["passkey_accuracy_1x"] == 1.0
    assert refs["tiny-alibi"]["cpu"]["method"].startswith("one full forward per new token")
    assert "tiny-alibi: cpu (float32, longctx_rows) = passkey 128: 8/8" in gpu_check.table(cpu_half)


def test_a_failing_step_and_sigterm_still_write_the_file(monkeypatch, tmp_path):
    """A step that raises is recorded and the next runs; SIGTERM (the timeout) stops the run and the file holds
    everything recorded before it."""
    from benchmarks import gpu_check

    def boom(cpu, budget):
        raise RuntimeError("boom")

    def terminate(cpu):
        os.kill(os.getpid(), signal.SIGTERM)
        return {"never": "recorded"}

    monkeypatch.setattr(gpu_check, "shapes", lambda cpu: {})
    monkeypatch.setattr(gpu_check, "references", lambda cpu, budget: {"ran": True})
    monkeypatch.setattr(gpu_check, "probe", boom)
    monkeypatch.setattr(gpu_check, "minilm", terminate)
    previous = signal.signal(signal.SIGTERM, gpu_check._stop)
    try:
        result = gpu_check.run(cpu=True, budget_s=600, out=tmp_path / "r.json")
    finally:
        signal.signal(signal.SIGTERM, previous)
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert saved["references_cuda_vs_cpu"] == {"ran": True}
    assert saved["probe_cuda_vs_cpu"] == {"status": "error", "error": "RuntimeError: boom"}
    assert "minilm_cuda_vs_cpu" not in saved and not saved["complete"]
    assert saved["stopped"].startswith("stopped by SIGTERM")
    assert "(stopped by SIGTERM" in gpu_check.table(saved)


def test_an_exhausted_budget_skips_every_step_and_says_why(tmp_path):
    from benchmarks import gpu_check

    result = gpu_check.run(cpu=True, budget_s=0.0, out=tmp_path / "r.json")
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["complete"] and saved["models"]
    steps = [saved["references_cuda_vs_cpu"], *saved["models"].values(), saved["probe_cuda_vs_cpu"]]
    assert all(s["status"] == "skipped" and s["reason"].startswith("time budget") for s in steps)
    assert "| gemma3-tiny | | | | | skipped (time budget" in gpu_check.table(result)


def test_the_script_imports_only_the_scientific_packages_and_the_repository():
    tree = ast.parse(SCRIPT.read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    outside = names - ALLOWED - set(sys.stdlib_module_names)
    assert not outside, f"benchmarks/gpu_check.py imports {sorted(outside)}"
    assert {"torch", "transformers", "tokenizers", "longctx_eval"} <= names  # the walk sees the lazy imports


def test_main_sets_the_hub_offline_before_running(monkeypatch):
    from benchmarks import gpu_check

    seen = {}

    def fake_run(cpu, budget_s, out):
        seen.update({k: os.environ.get(k) for k in gpu_check.OFFLINE} | {"out": out})
        return {"environment": {}, "complete": True, "models": {}}

    for key in gpu_check.OFFLINE:
        monkeypatch.setenv(key, "0")
    monkeypatch.setattr(gpu_check, "run", fake_run)
    monkeypatch.setattr(signal, "signal", lambda *a: None)
    assert gpu_check.main(["--cpu", "--out", "x.json"]) == 0
    assert seen == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "out": Path("x.json")}


def test_the_cuda_side_of_the_memory_comparison(tmp_path):
    """What the GPU half records beside a peak (unreachable on the CPU half): measured less held, and the ratio."""
    import torch

    from benchmarks import gpu_check

    config = gpu_check.shapes(cpu=True)["gemma3-tiny"]
    config.dtype = torch.bfloat16
    config.save_pretrained(tmp_path)
    sizing = gpu_check.Sizing.of(tmp_path, gpu_check.plain_query("sdpa"), held_bytes=2**20, cuda=True)
    assert sizing.summary(288_512)["dtype"] == "bfloat16" and sizing.footprint.params.params == 288_512
    row = {"length": 384, "status": "ok", "peak_device_mb": 3.0}
    memory = sizing.compare(384, 32, row)
    estimate = 288_512 * 2 + (416 + 5 * 128) * 2 * 2 * 16 * 2
    assert memory["estimate_bytes"] == estimate
    assert memory["measured_bytes"] == 2 * 2**20 and memory["measured_over_estimate"] == round(2 * 2**20 / estimate, 3)
    failed = sizing.compare(384, 32, {"length": 384, "status": "error"})
    assert failed["measured"] == "not measured: the generation's status is 'error'" and "measured_bytes" not in failed
    cells = gpu_check._cells({**row, "seconds": 1.0, "memory": memory}).split(" | ")
    assert cells[-3:] == ["2.0", f"{round(estimate / 2**20, 1)}", f"{memory['measured_over_estimate']}"]


def test_two_devices_compare_answers():
    """The pairing the GPU half does (CUDA against CPU), run on two CPU loads of tiny-rope."""
    from benchmarks import gpu_check

    prompts = {128: gpu_check.passkey_prompts(128, 3)}
    out = gpu_check.reference_run("tiny-rope", ("cpu", "cpu"), prompts)
    assert out["cuda_equal_cpu"] == "3/3" and out["cpu"]["passkey_equal"] == {"128": "3/3"}
