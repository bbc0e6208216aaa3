"""The `vllm` bench part's prefix accounting on made-up passes: the whole-pass, prefill and cache figures and the
attainable speed-up follow from the stored rows, and an older result without them shows only what it holds."""

from __future__ import annotations

import pytest

from benchmarks.vllm_prefix_accounting import account, accounting_table

BOUND = 1.43


def _pass(key: str, per_sample: float, ttft: float | None, batch: int = 1, cached: int | None = None) -> dict:
    rows = [
        {"length": 1024 * (1 + i % 2), "ttft_s": ttft, "cached_tokens": cached, "prompt_tokens": 1000} for i in range(4)
    ]
    per_length = {"1024": per_sample * 0.5, "2048": per_sample * 1.5} if batch == 1 else {}
    return {"key": key, "batch": batch, "seconds_per_sample": per_sample, "per_length_s": per_length, "rows": rows}


def _results() -> dict:
    return {
        "hf": {
            "passes": [_pass("ours", 1.0, 0.4), _pass("no_prefix", 1.3, 0.7)],
            "prefix_cache": {"reused_tokens": 900, "ideal_cached_tokens": 1000, "prompt_tokens": 4000},
        },
        "vllm": {
            "passes": [_pass("ours", 2.0, None, batch=4, cached=256), _pass("no_prefix", 2.4, None, batch=4, cached=0)],
            "engine": {"ideal_cached_tokens": 1024, "prompt_tokens": 4000},
        },
        "served": {"passes": [_pass("ours", 0.9, 0.3, batch=8), _pass("no_batching", 1.0, 0.3)]},
    }


def test_prefill_share_and_attainable_follow_from_times_to_first_token() -> None:
    acc = account(_results(), BOUND)
    hf = acc["hf"]
    assert hf["whole_pass_bought"] == 1.3 and hf["share_of_bound"] == round(1.3 / BOUND, 3)
    fraction = 4 * 0.7 / (1.3 * 4)
    attainable = 1 / (fraction / BOUND + 1 - fraction)
    assert hf["prefill_fraction"] == round(fraction, 3)
    assert hf["attainable"] == round(attainable, 3) and attainable < BOUND
    assert hf["share_of_attainable"] == round(1.3 / attainable, 3)
    assert hf["prefill_bought"] == pytest.approx(1.75, abs=1e-3)
    assert hf["cache"]["share_of_ideal"] == 0.9 and hf["cache"]["token_bound"] == round(4000 / 3000, 3)
    assert hf["per_length_bought"] == {"1024": 1.3, "2048": 1.3}


def test_one_engine_call_gives_cache_counts_but_no_prefill_times() -> None:
    vllm = account(_results(), BOUND)["vllm"]
    assert vllm["cache"]["cached_tokens"] == 4 * 256 and vllm["cache"]["share_of_ideal"] == 1.0
    assert "prefill_bought" not in vllm and "per_length_bought" not in vllm


def test_a_backend_missing_its_no_reuse_pass_is_left_out_and_the_table_says_what_it_has() -> None:
    results = _results()
    acc = account(results, BOUND)
    assert "served" not in acc  # its pass without reuse did not run
    text = accounting_table({"prefix_bound": BOUND, "grid": {"lengths": [1024, 2048]}, "backends": results})
    assert "| ours `hf:` | 900 / 1,000 of 4,000 | 1.33x | 1.30x | 91% |" in text
    assert "openai:" not in text.split("\n\n")[0]
    old = {"hf": {"passes": [_pass("ours", 1.0, None), _pass("no_prefix", 1.2, None)]}}
    assert "| ours `hf:` |  |  | 1.20x | 84% |  |  |  |  |  | 1.20x |" in accounting_table(
        {"prefix_bound": BOUND, "grid": {"lengths": [1024]}, "backends": old}
    )
