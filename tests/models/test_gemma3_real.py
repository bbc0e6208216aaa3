"""Gemma 3 270M with its real weights (opt-in: `make gemma3`, then `pytest -m gemma3 tests/models/test_gemma3_real.py`):
the `gemma3-270m` short name loads the converted folder and records its sliding/global layout, the probe runs on its
three global layers, and llama.cpp's server (the recipe of docs/served.md) answers one needle sample at the full
32K window end to end. Minutes per test on 2 CPU cores; never in the default suite."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from servers import llama_cpp_available, llama_cpp_server_at

from longctx_eval.cli import main
from longctx_eval.models.assets import gemma3_installed
from longctx_eval.models.spec import parse_spec
from longctx_eval.results import read_run

pytestmark = [
    pytest.mark.gemma3,
    pytest.mark.skipif(not gemma3_installed(), reason="Gemma 3 270M is not installed: `make gemma3`"),
]
WINDOW = 32768
ALIAS = "gemma3-270m-q4"


def test_short_name_records_the_sliding_and_global_layers():
    from longctx_eval.models.loader import load_model

    model = load_model(parse_spec("gemma3-270m"))
    try:
        layout = model.meta.runtime["attention"]
        assert model.meta.context_window == WINDOW
        assert layout["layers"] == 18 and layout["global_layers"] == [5, 11, 17]
        assert layout["types"]["sliding_attention"] == {"count": 15, "window": 512, "rope_theta": 10000.0}
        assert layout["types"]["full_attention"] == {"count": 3, "window": None, "rope_theta": 1000000.0}
        # the GGUF holds neither the layer pattern nor the sliding layers' RoPE base: transformers' defaults
        assert layout["defaulted"] == ["layer_types", "rope_parameters.sliding_attention.rope_theta"]
    finally:
        model.close()


@pytest.mark.skipif(not llama_cpp_available(), reason="llama-cpp-python[server] is not installed (make test)")
def test_needle_at_the_full_32k_window_through_llama_cpp(tmp_path: Path):
    """One 32K needle sample through llama.cpp's server (~7 min on 2 cores): it starts at 32K only with
    `--logits_all False`, answers, and the server's token count matches ours."""
    from longctx_eval.models.assets import gemma3_gguf

    with llama_cpp_server_at(tmp_path, n_ctx=WINDOW, gguf=gemma3_gguf(), alias=ALIAS) as url:
        spec = (
            f"openai:{ALIAS}@{url}?tokenizer=gemma3-270m&endpoint=completions&max_length={WINDOW}"
            "&timeout=3000&max_attempts=1&name=gemma3-llama-cpp"
        )
        t0 = time.perf_counter()
        argv = ["run", "--model", spec, "--tasks", "needle", "--lengths", str(WINDOW), "--limit", "1"]
        assert main([*argv, "--out", str(tmp_path / "out")]) == 0
        seconds = time.perf_counter() - t0
    run_dir = tmp_path / "out" / "gemma3-llama-cpp"
    pred = json.loads((run_dir / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["status"] == "ok", pred
    check = pred["data"]["length_check"]
    assert check["mismatch"] is False and WINDOW - 512 < check["expected_prompt_tokens"] <= WINDOW, check
    run = read_run(run_dir / "run.json")
    assert run.model.context_window == WINDOW
    assert run.model.runtime["window"] == {"tokens": WINDOW, "source": "max_length option"}
    score = json.loads((run_dir / "scores" / "needle.jsonl").read_text().splitlines()[0])
    print(
        f"gemma3 via llama.cpp at {WINDOW}: {seconds:.0f} s, prompt {check['expected_prompt_tokens']} tokens "
        f"(server {check['server_prompt_tokens']}), completion {pred.get('completion_tokens')} tokens, "
        f"answer {pred.get('text')!r}, score {score.get('values') or score}"
    )


def test_the_probe_runs_on_the_three_global_layers(tmp_path: Path):
    """posprobe at 2K (past the 512-token window of the sliding layers): NPB, LAE and the retrieval heads come from
    layers 5, 11 and 17, and every prediction says so."""
    args = ["run", "--model", "gemma3-270m", "--tasks", "posprobe", "--lengths", "2048", "--limit", "2"]
    probe = ["posprobe.text_every=0", "posprobe.needles=2", "posprobe.calibration_needles=4"]
    t0 = time.perf_counter()
    assert main([*args, *(a for p in probe for a in ("--task-arg", p)), "--out", str(tmp_path)]) == 0
    seconds = time.perf_counter() - t0
    lines = (tmp_path / "gemma3-270m" / "predictions.jsonl").read_text().splitlines()
    data = [json.loads(line)["data"] for line in lines]
    assert data and all(d["attention_layers"]["probed"] == [5, 11, 17] for d in data)
    assert all(len(d["lae_layers"]) == 3 and d["lae_sliding"] > 0 for d in data)
    assert all(layer in (5, 11, 17) for d in data for layer, _ in d["calibration"]["heads"])
    task = read_run(tmp_path / "gemma3-270m" / "run.json").tasks[0]
    pooled = {r.metric: r.value for r in task.results if r.length is None and r.depth is None}
    print(f"gemma3 posprobe at 2048 on layers 5/11/17: {seconds:.0f} s, {pooled}")
